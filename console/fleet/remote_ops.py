"""Stop, restart or read the log's tail of one server on another host, through `Fleet.run`.

Each runs ddconsole's own verb there with `--json` and `--exact`, so the only server it can
touch is the one named (never another whose id that one's is a prefix of), and the answer's
id is checked again. Every failure (the host unreachable, the call too long, the verb
refusing, an answer that cannot be read) becomes an outcome naming the reason and the
command to run by hand; nothing here raises but a cancellation.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from console.core.errors import ConsoleError

if TYPE_CHECKING:
    # Types only: the SSH stack is imported by the fleet that runs these calls.
    from console.fleet.link import RemoteResult

GRACE_S = 30.0
"""Seconds between SIGTERM and SIGKILL there (the CLI's default: SGLang drains)."""
STOP_TIMEOUT_S = GRACE_S + 60.0
READY_TIMEOUT_S = 600.0
"""How long a restart there waits for its server to be ready (a large model loads slowly)."""
RESTART_TIMEOUT_S = GRACE_S + READY_TIMEOUT_S + 60.0
LOG_TIMEOUT_S = 30.0
LOG_LINES = 40


class Runner(Protocol):
    """What runs `ddconsole ARGS` on a host (console.fleet.fleet.Fleet)."""

    async def run(self, name: str, args: Sequence[str], timeout_s: float = ...) -> RemoteResult:
        """The finished command; LinkDown when the host cannot be reached or it ran over."""


@dataclass(frozen=True)
class RemoteOutcome:
    """How one remote call ended: a line to show, any lines it brought (a log's tail), and
    the command to run by hand when it failed."""

    ok: bool
    summary: str
    lines: tuple[str, ...] = ()
    hint: str | None = None


def stop_args(server_id: str) -> list[str]:
    return ["down", server_id, "--exact", "--yes", "--json", "--grace", f"{GRACE_S:g}"]


def restart_args(server_id: str) -> list[str]:
    return [
        "restart",
        server_id,
        "--exact",
        "--json",
        "--grace",
        f"{GRACE_S:g}",
        "--timeout",
        f"{READY_TIMEOUT_S:g}",
    ]


def logs_args(server_id: str, lines: int = LOG_LINES) -> list[str]:
    return ["logs", server_id, "--exact", "--lines", str(lines), "--json"]


def by_hand(host: str, *args: str) -> str:
    """The command a user runs to do it themselves: `ddconsole --host alpha down ID`."""
    return "ddconsole " + shlex.join(["--host", host, *args])


def _stderr_reason(result: RemoteResult) -> str:
    """The verb's own one-line reason (its last line on stderr), or its exit status."""
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    if lines:
        return lines[-1].removeprefix("ddconsole: error: ").removeprefix("ddconsole: ")[:300]
    return f"exit status {result.exit_status}"


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _unanswered(host: str, verb: str, server_id: str, result: RemoteResult) -> RemoteOutcome:
    """The verb gave no answer to read: its reason, or the flag an older ddconsole lacks."""
    reason = _stderr_reason(result)
    if "unrecognized" in reason and "--exact" in reason:
        reason = (
            f"the ddconsole on {host} is older and has no --exact; nothing was run there, "
            "so no other server could be hit"
        )
    return RemoteOutcome(
        False, f"{verb} {server_id} on {host} failed: {reason}", hint=by_hand(host, verb, server_id)
    )


def read_stop(host: str, server_id: str, result: RemoteResult) -> RemoteOutcome:
    """`down ID --json`'s answer: one object per server it acted on."""
    answer = _json(result.stdout)
    entries = [e for e in answer if isinstance(e, dict)] if isinstance(answer, list) else []
    hint = by_hand(host, "down", server_id)
    if not entries:
        return _unanswered(host, "down", server_id, result)
    others = sorted({str(e.get("id")) for e in entries if e.get("id") != server_id})
    if others:
        return RemoteOutcome(
            False, f"down on {host} answered for {', '.join(others)}, not {server_id}", hint=hint
        )
    entry = entries[0]
    outcome = str(entry.get("result", "?"))
    if outcome == "stopped":
        how = "SIGKILL" if entry.get("sigkill") else "SIGTERM"
        seconds = entry.get("seconds")
        took = f", {seconds:.1f} s" if isinstance(seconds, int | float) else ""
        notes = [str(n) for n in entry.get("notes") or [] if isinstance(n, str)]
        if entry.get("port_free") is False:
            notes.append("its port is still held")
        tail = f"; {'; '.join(notes)}" if notes else ""
        return RemoteOutcome(True, f"{server_id} on {host}: stopped ({how}{took}){tail}")
    if outcome == "forgotten":
        return RemoteOutcome(True, f"{server_id} on {host}: forgotten ({entry.get('state')})")
    error = entry.get("error")
    why = f": {error}" if isinstance(error, str) else ""
    return RemoteOutcome(False, f"{server_id} on {host}: {outcome}{why}", hint=hint)


def read_restart(host: str, server_id: str, result: RemoteResult) -> RemoteOutcome:
    """`restart ID --json`'s answer: the server's status once it is ready or ended."""
    status = _json(result.stdout)
    if not isinstance(status, dict):
        return _unanswered(host, "restart", server_id, result)
    hint = by_hand(host, "restart", server_id)
    if status.get("id") != server_id:
        return RemoteOutcome(
            False,
            f"restart on {host} answered for {status.get('id')!r}, not {server_id}",
            hint=hint,
        )
    state = str(status.get("state", "?"))
    if state == "ready":
        return RemoteOutcome(True, f"{server_id} on {host}: ready at {status.get('url') or '-'}")
    reason = status.get("reason") or _stderr_reason(result)
    excerpt = tuple(str(line) for line in status.get("failure_excerpt") or [])[-4:]
    return RemoteOutcome(False, f"{server_id} on {host}: {state}: {reason}", excerpt, hint)


def read_logs(host: str, server_id: str, result: RemoteResult) -> RemoteOutcome:
    """`logs ID --json`'s answer: the server's status and its log's last lines."""
    answer = _json(result.stdout)
    if not isinstance(answer, dict) or not isinstance(answer.get("server"), dict):
        return _unanswered(host, "logs", server_id, result)
    named = answer["server"].get("id")
    if named != server_id:
        return RemoteOutcome(
            False,
            f"logs on {host} answered for {named!r}, not {server_id}",
            hint=by_hand(host, "logs", server_id),
        )
    lines = tuple(str(line) for line in answer.get("lines") or [] if isinstance(line, str))
    state = answer["server"].get("state", "?")
    return RemoteOutcome(True, f"{server_id} on {host} ({state}): last {len(lines)} lines", lines)


async def _call(
    runner: Runner,
    host: str,
    args: list[str],
    timeout_s: float,
    read: Callable[[str, str, RemoteResult], RemoteOutcome],
) -> RemoteOutcome:
    verb, server_id = args[0], args[1]
    try:
        result = await runner.run(host, args, timeout_s=timeout_s)
    except ConsoleError as exc:  # LinkDown: unreachable, lost, or over its time
        return RemoteOutcome(
            False,
            f"{verb} {server_id} on {host}: {exc.message}",
            hint=by_hand(host, verb, server_id),
        )
    except KeyError:
        return RemoteOutcome(False, f"{verb} {server_id}: no host {host!r} in the fleet")
    return read(host, server_id, result)


async def stop(runner: Runner, host: str, server_id: str) -> RemoteOutcome:
    """`down` that one server on `host` (a stopped one is forgotten)."""
    return await _call(runner, host, stop_args(server_id), STOP_TIMEOUT_S, read_stop)


async def restart(runner: Runner, host: str, server_id: str) -> RemoteOutcome:
    """Stop that one server on `host` and launch its plan again, waiting for ready."""
    return await _call(runner, host, restart_args(server_id), RESTART_TIMEOUT_S, read_restart)


async def log_tail(
    runner: Runner, host: str, server_id: str, lines: int = LOG_LINES
) -> RemoteOutcome:
    """The last `lines` lines of that one server's log on `host`."""
    return await _call(runner, host, logs_args(server_id, lines), LOG_TIMEOUT_S, read_logs)
