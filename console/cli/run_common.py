"""Helpers `bench` and `campaign` share: flag parsers, level specs, running and detaching."""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from console.cli.render import print_json
from console.cli.render_runs import print_summary


def int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"levels must be positive integers: {text!r}")
    return values


def float_list(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"rates must be positive: {text!r}")
    return values


def services(args: argparse.Namespace) -> Any:
    from console.cli.services import Services

    return Services.create(demo=bool(getattr(args, "demo", False)))


def runs_root(args: argparse.Namespace, services: Any) -> Path:
    return Path(args.out) if getattr(args, "out", None) else services.state.runs


def say(args: argparse.Namespace, text: str) -> None:
    """Progress text: to stderr under --json so stdout stays one JSON document."""
    print(text, file=sys.stderr if getattr(args, "json", False) else sys.stdout, flush=True)


def levels(
    concurrency: list[int] | None,
    rates: list[float] | None,
    requests: int | None,
    duration: float | None,
    warmup: int,
    flush: bool,
) -> list[Any]:
    from console.bench.levels import LevelSpec
    from console.core.errors import UsageError

    if requests is None and duration is None:
        requests = 16
    if requests is not None and requests < 1:
        raise UsageError("--requests must be at least 1")
    if duration is not None and duration <= 0:
        raise UsageError("--duration must be positive")
    if rates:
        cap = concurrency[0] if concurrency else None
        return [
            LevelSpec(i, cap, rate, requests, duration, warmup, flush)
            for i, rate in enumerate(rates)
        ]
    return [
        LevelSpec(i, c, None, requests, duration, warmup, flush)
        for i, c in enumerate(concurrency or [1])
    ]


def fingerprint(services: Any) -> dict[str, Any]:
    from console.bench.campaign import fingerprint

    return fingerprint(services.gpu_backend, services.demo)


def execute(args: argparse.Namespace, runner: Any) -> str:
    """Run with SIGINT/SIGTERM stopping cleanly (in-flight requests are the only loss)."""

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


def finish(args: argparse.Namespace, run: Any, status: str, resume_hint: str) -> int:
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
        say(args, f"interrupted; {resume_hint}")
        return 130
    failed = [c for c in summary.cells if c.status == "failed"]
    return 1 if failed and len(failed) == len(summary.cells) else 0


def detach(args: argparse.Namespace, run: Any, argv: list[str]) -> int:
    """Run `ddconsole ARGV` in its own session (it outlives this shell) and say how to follow."""
    command = [sys.executable, "-m", "console", *argv]
    if getattr(args, "demo", False):
        command.append("--demo")
    if args.out:
        command += ["--out", str(args.out)]
    with (run.path / "console.log").open("ab") as log:
        subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + 10
    while run.owner_alive() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    demo = " --demo" if getattr(args, "demo", False) else ""
    pid = run.owner_alive()
    if args.json:
        print_json({"run_id": run.run_id, "run_dir": str(run.path), "detached": True, "pid": pid})
    else:
        print(
            f"running in the background as run {run.run_id} ({run.path}), pid {pid}\n"
            f"follow it: ddconsole runs show {run.run_id} --follow{demo}"
        )
    return 0
