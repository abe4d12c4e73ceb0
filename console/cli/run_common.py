"""Helpers `bench`, `campaign` and the run-request runner share: flag parsers, services,
running with clean signals, the closing summary, and the detached notice."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.cli.render import print_json
from console.cli.render_runs import print_summary

if TYPE_CHECKING:
    # Types only: `ddconsole --help` does not import the services or the runner.
    from console.bench.campaign import CampaignRunner
    from console.bench.launch import Detached
    from console.bench.results import RunSummary
    from console.bench.rundir import RunDir
    from console.cli.progress_line import ProgressPrinter
    from console.cli.services import Services


def int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"levels must be positive integers: {text!r}")
    return values


FILES_BESIDES_REQUESTS = 64
"""Descriptors a run holds besides one socket per request in flight: its files, the telemetry
client's connections, the interpreter's own."""


def check_open_files(concurrency: int, what: str) -> None:
    """Refuse, before anything starts, a concurrency this process cannot open sockets for
    (raising the soft RLIMIT_NOFILE up to the hard one first, as far as needed)."""
    import resource

    from console.core.errors import UsageError

    need = concurrency + FILES_BESIDES_REQUESTS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < need:
        raise UsageError(
            f"{what} {concurrency} needs about {need} open files, but this process may open "
            f"{soft}: lower it, or raise the limit (`ulimit -n {need}`)"
        )


def services(args: argparse.Namespace) -> Services:
    from console.cli.services import Services

    return Services.create(demo=bool(getattr(args, "demo", False)))


def runs_root(args: argparse.Namespace, services: Services) -> Path:
    return Path(args.out) if getattr(args, "out", None) else services.state.runs


def say(args: argparse.Namespace, text: str) -> None:
    """Progress text: to stderr under --json so stdout stays one JSON document."""
    print(text, file=sys.stderr if getattr(args, "json", False) else sys.stdout, flush=True)


def progress_printer(args: argparse.Namespace) -> ProgressPrinter:
    """Where a foreground run's events and progress go: the stream `say` writes to."""
    from console.cli.progress_line import ProgressPrinter

    return ProgressPrinter(sys.stderr if getattr(args, "json", False) else sys.stdout)


def fingerprint(services: Services) -> dict[str, Any]:  # run.json's JSON, kept verbatim
    """The host the run ran on (written verbatim to run.json)."""
    from console.bench.campaign import fingerprint

    return fingerprint(services.gpu_backend, services.demo)


def execute(args: argparse.Namespace, runner: CampaignRunner) -> str:
    """Run with SIGINT/SIGTERM stopping cleanly (in-flight requests are the only loss)."""
    import asyncio  # here: shell completion builds this module's parser and wants it fast

    from console.bench.rundir import RunWriteError

    async def main() -> str:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, runner.stop.set)
        return str(await runner.run_all())

    try:
        return asyncio.run(main())
    except RunWriteError as exc:
        # Servers were stopped on the way out; what was written so far stays usable.
        print(f"ddconsole: stopped: {exc}", file=sys.stderr, flush=True)
        return "write-error"


def finish(args: argparse.Namespace, run: RunDir, status: str, resume_hint: str) -> int:
    from console.bench.summary import load_summary

    if status == "write-error":
        say(args, resume_hint)
        return 1
    summary = load_summary(run)
    if args.json:
        print_json(summary.to_json())
    else:
        print_summary(summary)
    if status == "interrupted":
        from console.bench.campaign import OUTSIDE_STOP

        outside = [c.cell_id for c in summary.cells if c.reason == OUTSIDE_STOP]
        if outside:
            # Its server was stopped from outside: the campaign stopped with it.
            say(args, f"campaign stopped: {outside[0]}: {OUTSIDE_STOP}; {resume_hint}")
            return 1
        say(args, f"interrupted; {resume_hint}")
        return 130
    failed = [c for c in summary.cells if c.status == "failed"]
    verdict, failed_level = failure_verdict(summary)
    if verdict:
        say(args, verdict)
    if failed_level:
        return 1
    return 1 if failed and len(failed) == len(summary.cells) else 0


def failure_verdict(summary: RunSummary) -> tuple[str | None, bool]:
    """The closing line about failed requests, and whether a level failed outright.

    Exit status (issue 16): a failed level makes the run fail (non-zero, `bench failed: level 0
    (concurrency 1): 16/16 requests failed: connection refused` last, the level's `reason`);
    some failed requests with no failed level still exit 0 but say
    `3/16 requests failed (most: HTTP 500 ...)`.
    """
    from console.bench.results import most_common_error

    partial: list[str] = []
    for cell in summary.cells:
        for level in cell.levels:
            if level.status == "interrupted":
                continue  # cut short (Ctrl-C, a stop): not a verdict on the server
            total = level.requests + level.errors
            where = _level_name(level.level, level.concurrency, level.rate)
            if level.status == "failed" or (level.errors and not level.requests):
                verb = "campaign" if summary.kind == "campaign" else "bench"
                prefix = f"{cell.cell_id} " if len(summary.cells) > 1 else ""
                counted = f": {level.errors}/{total} requests failed" if level.errors else ""
                why = level.reason or most_common_error(level.error_kinds) or "?"
                return f"{verb} failed: {prefix}{where}{counted}: {why}", True
            if level.errors:
                most = most_common_error(level.error_kinds) or "?"
                partial.append(f"{where}: {level.errors}/{total} requests failed (most: {most})")
    return ("; ".join(partial) if partial else None), False


def _level_name(index: int, concurrency: int | None, rate: float | None) -> str:
    if concurrency is not None:
        return f"level {index + 1} (concurrency {concurrency})"
    if rate is not None:
        return f"level {index + 1} (rate {rate:g}/s)"
    return f"level {index + 1}"


def report_detached(args: argparse.Namespace, detached: Detached) -> int:
    """Say where a detached run went, how to follow it and how to stop it."""
    if args.json:
        print_json(detached.to_json())
    else:
        from console.core.via_host import ddconsole_command

        demo = " --demo" if getattr(args, "demo", False) else ""
        dd = ddconsole_command()
        print(
            f"running in the background as run {detached.run_id} ({detached.run_dir}), "
            f"pid {detached.pid}\n"
            f"follow it: {dd} runs show {detached.run_id} --follow{demo}\n"
            f"stop it:   {dd} runs stop {detached.run_id}{demo}"
        )
    return 0
