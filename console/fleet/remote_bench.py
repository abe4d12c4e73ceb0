"""Start a benchmark on another host, or stop a run there, through `Fleet.run`.

A benchmark is the CLI's own `bench --server ID ... --detach --json` run there, its flags
made from the same `BenchRequest` the Bench screen builds for this host; a stop is `runs
stop --exact --yes --json ID`. What the host answers is external input: an answer that cannot be
read, a refusal, a lost host or a call over its time is an outcome saying why with the
command to run by hand, never an exception for the caller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from console.bench.request import BenchRequest
from console.fleet.remote_ops import by_hand, valid_server_id
from console.fleet.remote_runs import (
    MAX_TEXT,
    RemoteRunError,
    call_ddconsole,
    older_reason,
    valid_run_id,
)
from console.profiles.slo import DEFAULT_ATTAINMENT

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet
    from console.fleet.link import RemoteResult

START_TIMEOUT_S = 60.0
"""A start's whole call: connect, a remote Python start, the request checked, the run
folder made and its detached runner claiming it (the CLI waits up to 10 s for that)."""
STOP_WAIT_S = 60.0
"""How long `runs stop` there waits for the run to end (its level recorded as interrupted)."""
STOP_TIMEOUT_S = STOP_WAIT_S + 30.0


@dataclass(frozen=True, slots=True)
class RemoteStart:
    """How a start on another host ended: the run it made, or why there is none."""

    ok: bool
    message: str
    run_id: str | None = None
    hint: str | None = None
    """The command to run by hand when it failed."""


def _number(value: float) -> str:
    return f"{value:g}"


def bench_args(request: BenchRequest) -> tuple[list[str], list[str]]:
    """(`bench` and the flags that reproduce `request` there, detached with a JSON answer;
    what of the request no flag carries). ValueError when the request names no server id
    the host's CLI can take."""
    server = request.server_id
    if server is None or not valid_server_id(server):
        raise ValueError(f"{server!r} is not a server id another host's bench can take")
    args = ["bench", f"--server={server}"]
    if request.concurrency:
        args.append("--concurrency=" + ",".join(str(c) for c in request.concurrency))
    if request.rates:
        args.append("--rate=" + ",".join(_number(r) for r in request.rates))
    if request.requests is not None:
        args.append(f"--requests={request.requests}")
    if request.duration_s is not None:
        args.append(f"--duration={_number(request.duration_s)}")
    args += [f"--input-len={request.input_len}", f"--output-len={request.output_len}"]
    defaults = BenchRequest(server_id=server)
    # Each flag only where the request differs from the CLI's default: the command shown
    # and stored in the run there stays what a user would have typed.
    if request.range_ratio != defaults.range_ratio:
        args.append(f"--range-ratio={_number(request.range_ratio)}")
    if request.endpoint != defaults.endpoint:
        args.append(f"--endpoint={request.endpoint}")
    if request.warmup != defaults.warmup:
        args.append(f"--warmup={request.warmup}")
    if request.flush_cache:
        args.append("--flush-cache")
    if request.seed != defaults.seed:
        args.append(f"--seed={request.seed}")
    if request.vocab_size != defaults.vocab_size:
        args.append(f"--vocab-size={request.vocab_size}")
    if request.name is not None:
        args.append(f"--name={request.name}")
    if request.slo is not None:
        args.append(f"--slo={request.slo}")
    if request.attainment != DEFAULT_ATTAINMENT:
        args.append(f"--attainment={_number(request.attainment)}")
    if request.include_transients:
        args.append("--include-transients")
    if request.find_max is not None:
        args.append(f"--find-max={request.find_max}")
    if request.find_max_limit is not None:
        args.append(f"--find-max-limit={_number(request.find_max_limit)}")
    # Files name paths on this machine: the host there has its own, or none.
    left = [
        f"{what} {value} (a file on this host)"
        for what, value in (("dataset", request.dataset), ("workload", request.workload_name))
        if value is not None
    ]
    if request.replay_speed != defaults.replay_speed and not left:
        args.append(f"--replay-speed={_number(request.replay_speed)}")
    return [*args, "--detach", "--json"], left


def stop_args(run_id: str) -> list[str]:
    """`runs stop` of one run there, unasked (the console confirmed it), with a JSON answer;
    `--exact`, so a run whose id only starts with this one is never stopped in its place,
    and the id after `--`, so it is read as the run whatever it looks like."""
    return [
        "runs",
        "stop",
        "--exact",
        "--yes",
        "--json",
        f"--timeout={STOP_WAIT_S:g}",
        "--",
        run_id,
    ]


def _stderr_reason(result: RemoteResult) -> str:
    """The verb's own one-line reason (its last error line on stderr, not a `hint:` under
    it), or its exit status."""
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    if not lines:
        return f"exit status {result.exit_status}"
    errors = [line for line in lines if line.startswith("ddconsole")]
    last = errors[-1] if errors else lines[-1]
    for verb in ("bench", "runs stop", "runs"):
        last = last.removeprefix(f"ddconsole {verb}: error: ")
    return last.removeprefix("ddconsole: error: ").removeprefix("ddconsole: ")[:MAX_TEXT]


def _answer(text: str) -> dict[str, object] | None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def read_started(host: str, result: RemoteResult) -> RemoteStart:
    """`bench --detach --json`'s answer: the run it started there."""
    answer = _answer(result.stdout) if result.exit_status == 0 else None
    if answer is None:
        return RemoteStart(False, f"benchmark on {host} not started: {_stderr_reason(result)}")
    run_id = answer.get("run_id")
    if not valid_run_id(run_id):
        return RemoteStart(False, f"benchmark on {host}: its answer names no run")
    assert isinstance(run_id, str)
    pid = answer.get("pid")
    claimed = isinstance(pid, int) and not isinstance(pid, bool)
    runner = f"pid {pid} there" if claimed else "its runner had not claimed it yet"
    return RemoteStart(True, f"run {run_id} on {host} (detached, {runner})", run_id)


def read_stopped(host: str, run_id: str, result: RemoteResult) -> tuple[bool, str]:
    """`runs stop --json`'s answer: (stopped or ended, its message)."""
    answer = _answer(result.stdout)
    if answer is None:
        older = older_reason(host, result)
        if older is not None:
            return False, f"stop {run_id} on {host} failed: {older}, so no other run was stopped"
        return False, f"stop {run_id} on {host} failed: {_stderr_reason(result)}"
    if answer.get("run_id") != run_id:
        named = answer.get("run_id")
        shown = named[:100] if isinstance(named, str) else "?"
        return False, f"runs stop on {host} answered for {shown!r}, not {run_id}"
    message = answer.get("message")
    shown = message[:MAX_TEXT] if isinstance(message, str) and message else "stopped"
    return result.exit_status == 0, f"{host}: {shown}"


async def start_bench(fleet: Fleet, host: str, request: BenchRequest) -> RemoteStart:
    """Start `request` on `host`, detached, as `ddconsole --host HOST bench ...` would."""
    try:
        args, _ = bench_args(request)
    except ValueError as exc:
        return RemoteStart(False, str(exc))
    hint = by_hand(host, *args[:-1], demo=fleet.demo)  # without --json: the CLI's own lines
    try:
        result = await call_ddconsole(fleet, host, args, START_TIMEOUT_S)
    except RemoteRunError as exc:
        return RemoteStart(False, f"benchmark on {host} not started: {exc.message}", hint=hint)
    try:
        started = read_started(host, result)
    except Exception as exc:  # another host's answer: whatever the reader trips on
        started = RemoteStart(False, f"benchmark on {host}: answer unreadable ({exc!r})"[:400])
    return started if started.ok else RemoteStart(False, started.message, hint=hint)


async def stop_run(fleet: Fleet, host: str, run_id: str) -> tuple[bool, str]:
    """Stop run `run_id` on `host` as Ctrl-C would: (stopped, the line saying how)."""
    if not valid_run_id(run_id):
        return False, f"{run_id[:100]!r} is not a run id"
    hint = by_hand(host, "runs", "stop", run_id, demo=fleet.demo)
    try:
        result = await call_ddconsole(fleet, host, stop_args(run_id), STOP_TIMEOUT_S)
    except RemoteRunError as exc:
        return False, f"stop {run_id} on {host}: {exc.message}; by hand: {hint}"
    try:
        ok, message = read_stopped(host, run_id, result)
    except Exception as exc:  # another host's answer: whatever the reader trips on
        ok, message = False, f"stop {run_id} on {host}: answer unreadable ({exc!r})"[:400]
    return ok, message if ok else f"{message}; by hand: {hint}"
