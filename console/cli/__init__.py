"""`ddconsole`: the command line. Parses, dispatches, and turns errors into clear messages.

Heavy modules (pydantic, httpx, Textual) are imported inside the commands that need them, so
`ddconsole --help` and the headless verbs start fast and never load Textual.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from console.cli.parser import build_parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        from console.cli.cmd_tui import run_tui

        handler = run_tui
    from console.core.errors import ConsoleError

    try:
        from console.cli.read_only import refuse_if_read_only

        refuse_if_read_only(args, handler)
        return int(handler(args) or 0)
    except ConsoleError as exc:
        print(f"ddconsole: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ddconsole: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: say so in one line, keep the traceback in a file
        from console.cli.crash import report_crash

        where = report_crash(exc)
        print(
            f"ddconsole: internal error: {type(exc).__name__}: {exc} (traceback in {where})",
            file=sys.stderr,
        )
        return 70
