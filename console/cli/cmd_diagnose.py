"""`ddconsole diagnose LOGFILE [--json]`: the phases an SGLang log reached and the failure that
ended it, for any SGLang log (a server ddconsole did not start, a colleague's file)."""

from __future__ import annotations

import argparse
from typing import Any

from console.cli.render import print_json

# Exit statuses: the log was read and shows no failure / shows one; 2 (a UsageError) when the
# file cannot be read.
NO_FAILURE = 0
FAILURE_FOUND = 1


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "diagnose",
        parents=[common],
        help="read an SGLang log: startup phases reached and the failure that ended it",
        description="Reads any SGLang server log (streamed; any size) and prints the startup "
        "phases it reached with their timestamps, and the failure that ended it: its kind, "
        "reason, line and line number. Exit status 0: no failure found; 1: a failure; "
        "2: the file cannot be read.",
    )
    parser.add_argument("log", metavar="LOGFILE")
    parser.add_argument(
        "--exit-status",
        type=int,
        metavar="N",
        help="the server's exit status, when known (e.g. -9): an exit the log does not explain "
        "is then reported too",
    )
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_diagnose)


def _diagnose(args: argparse.Namespace) -> int:
    from console.core.redact import redact_json
    from console.server.diagnose import diagnose_file

    # The failure comes back with secrets masked (SGLang logs its API keys in clear); the
    # JSON is masked once more as a whole, the file name included.
    diagnosis = diagnose_file(args.log, returncode=args.exit_status)
    if args.json:
        print_json(redact_json(diagnosis.to_json()))
    else:
        print(f"{args.log}: {diagnosis.line_count} lines")
        print("phases reached:" if diagnosis.phases else "phases reached: none")
        for line in diagnosis.phase_lines():
            print(line)
        failure = diagnosis.failure
        if failure is None:
            print(diagnosis.summary())
        else:
            print(f"FAILED [{failure.kind}]: {failure.reason}")
            if diagnosis.failure_line_number is not None and failure.line is not None:
                print(f"  line {diagnosis.failure_line_number}: {failure.line.strip()[:300]}")
            for line in failure.excerpt:
                print(f"  | {line[:300]}")
    return NO_FAILURE if diagnosis.failure is None else FAILURE_FOUND
