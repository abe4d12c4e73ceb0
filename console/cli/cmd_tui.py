"""`ddconsole` with no command: open the TUI (Textual is imported only here)."""

from __future__ import annotations

import argparse
import sys

from console.core.errors import UsageError


def run_tui(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "the console needs a terminal; without one use a headless verb (see `ddconsole --help`)"
        )
    from console.cli.services import Services
    from console.tui.app import ConsoleApp

    services = Services.create(demo=bool(args.demo))
    backend = services.live_backend(
        recordings=None if args.no_record else services.state.ensure().recordings,
        record_max_bytes=max(1, args.record_max_mb) * 1024 * 1024,
    )
    app = ConsoleApp(backend, warm_up=True)
    app.run()
    return app.return_code or 0
