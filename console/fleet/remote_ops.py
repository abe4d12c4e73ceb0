"""Stop, restart or read the log's tail of one server on another host, through `Fleet.run`.

Each runs ddconsole's own verb there with `--json` and `--exact`, so the only server it can
touch is the one named (never another whose id that one's is a prefix of), and the answer's
id is checked again. Every failure (the host unreachable, the call too long, the verb
refusing, an answer that cannot be read) becomes an outcome naming the reason and the
command to run by hand; nothing here raises but a cancellation.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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
LOG_LINES_READ = 400
"""Lines read there for a tail of LOG_LINES: the console's own polling fills a log fast."""
_POLLING = re.compile(r'"(GET|HEAD) /(metrics|ready|health|health_generate|get_load)[ ?"]')


def without_polling(lines: Sequence[str], keep: int = LOG_LINES) -> tuple[list[str], int]:
    """(the last `keep` lines that are not a poll's access line, how many polls were left
    out): a server's log is mostly `GET /metrics` and `GET /ready`, once a second each."""
    kept = [line for line in lines if not _POLLING.search(line)]
    return kept[-keep:], len(lines) - len(kept)


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


MAX_ID = 200
"""The longest server id sent to another host."""


def valid_server_id(value: object) -> bool:
    """A server id as the verbs there take it: printable, bounded, no path and no option."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_ID
        and "/" not in value
        and "\\" not in value
        and not value.startswith("-")
        and value.isprintable()
        and not any(c.isspace() for c in value)
    )


# The id goes last, after `--`: argparse then reads it as the id whatever it looks like.
def stop_args(server_id: str) -> list[str]:
    return ["down", "--exact", "--yes", "--json", "--grace", f"{GRACE_S:g}", "--", server_id]


def restart_args(server_id: str) -> list[str]:
    return [
        "restart",
        "--exact",
        "--json",
        "--grace",
        f"{GRACE_S:g}",
        "--timeout",
        f"{READY_TIMEOUT_S:g}",
        "--",
        server_id,
    ]


def logs_args(server_id: str, lines: int = LOG_LINES) -> list[str]:
    return ["logs", "--exact", "--lines", str(lines), "--json", "--", server_id]


def _strings(value: object) -> list[str]:
    """A list of strings from another host's answer; anything else reads as none."""
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def by_hand(host: str, *args: str, demo: bool = False) -> str:
    """The command a user runs to do it themselves: `ddconsole --host alpha down ID` (with
    `--demo` first for a demo console: its hosts' servers are demo ones)."""
    return "ddconsole " + shlex.join([*(["--demo"] if demo else []), "--host", host, *args])


def _stderr_reason(result: RemoteResult) -> str:
    """The verb's own one-line reason (its last line on stderr), or its exit status."""
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    if lines:
        last = lines[-1]
        for verb in ("", " down", " restart", " logs"):
            last = last.removeprefix(f"ddconsole{verb}: error: ")
        return last.removeprefix("ddconsole: ")[:300]
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
    outcome = _text(entry.get("result"))
    if outcome == "stopped":
        how = "SIGKILL" if entry.get("sigkill") else "SIGTERM"
        seconds = entry.get("seconds")
        took = ""
        if isinstance(seconds, int | float) and not isinstance(seconds, bool):
            took = f", {seconds:.1f} s" if math.isfinite(seconds) else ""
        notes = _strings(entry.get("notes"))
        if entry.get("port_free") is False:
            notes.append("its port is still held")
        tail = f"; {'; '.join(notes)}" if notes else ""
        return RemoteOutcome(True, f"{server_id} on {host}: stopped ({how}{took}){tail}")
    if outcome == "forgotten":
        state = entry.get("state")
        return RemoteOutcome(True, f"{server_id} on {host}: forgotten ({_text(state)})")
    error = entry.get("error")
    why = f": {error[:300]}" if isinstance(error, str) else ""
    return RemoteOutcome(False, f"{server_id} on {host}: {outcome[:100]}{why}", hint=hint)


def _text(value: object, limit: int = 300) -> str:
    """A field of another host's answer shown in a line: a string (cut), else `?`."""
    return value[:limit] if isinstance(value, str) else "?"


def read_restart(host: str, server_id: str, result: RemoteResult) -> RemoteOutcome:
    """`restart ID --json`'s answer: the server's status once it is ready or ended."""
    status = _json(result.stdout)
    if not isinstance(status, dict):
        return _unanswered(host, "restart", server_id, result)
    hint = by_hand(host, "restart", server_id)
    if status.get("id") != server_id:
        return RemoteOutcome(
            False,
            f"restart on {host} answered for {_text(status.get('id'), 100)!r}, not {server_id}",
            hint=hint,
        )
    state = _text(status.get("state"), 100)
    if state == "ready":
        url = status.get("url")
        return RemoteOutcome(True, f"{server_id} on {host}: ready at {_text(url) if url else '-'}")
    reason = status.get("reason")
    reason = reason[:300] if isinstance(reason, str) and reason else _stderr_reason(result)
    excerpt = tuple(_strings(status.get("failure_excerpt")))[-4:]
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
            f"logs on {host} answered for {_text(named, 100)!r}, not {server_id}",
            hint=by_hand(host, "logs", server_id),
        )
    lines = tuple(_strings(answer.get("lines")))
    state = _text(answer["server"].get("state"), 100)
    return RemoteOutcome(True, f"{server_id} on {host} ({state}): last {len(lines)} lines", lines)


async def _call(
    runner: Runner,
    host: str,
    args: list[str],
    timeout_s: float,
    read: Callable[[str, str, RemoteResult], RemoteOutcome],
) -> RemoteOutcome:
    verb, server_id = args[0], args[-1]
    demo = bool(getattr(runner, "demo", False))
    hint = by_hand(host, verb, server_id, demo=demo)
    if not valid_server_id(server_id):
        # Never sent: an id like `--all` would be an option there (and `--` is no help
        # against a ddconsole too old to honour it).
        return RemoteOutcome(False, f"{verb} on {host}: {server_id[:100]!r} is not a server id")
    try:
        result = await runner.run(host, args, timeout_s=timeout_s)
    except ConsoleError as exc:  # LinkDown: unreachable, lost, or over its time
        return RemoteOutcome(False, f"{verb} {server_id} on {host}: {exc.message}", hint=hint)
    except KeyError:
        return RemoteOutcome(False, f"{verb} {server_id}: no host {host!r} in the fleet")
    except Exception as exc:  # whatever a link raises besides LinkDown: an outcome
        return RemoteOutcome(
            False, f"{verb} {server_id} on {host}: {type(exc).__name__}: {exc}", hint=hint
        )
    try:
        outcome = read(host, server_id, result)
    except Exception as exc:  # another host's answer: whatever the reader trips on
        return RemoteOutcome(
            False, f"{verb} {server_id} on {host}: answer unreadable ({exc!r})"[:400], hint=hint
        )
    # The readers name the command without the console's --demo; the hint is this call's.
    return replace(outcome, hint=hint) if outcome.hint else outcome


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
