"""Reading the answers of `down`, `restart` and `logs` run on another host: the exact id is
asked for and checked in the answer, a failure names its reason and the command to run by
hand, and an older ddconsole without --exact is never left to guess by prefix."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from console.fleet import remote_ops
from console.fleet.link import LinkDown, RemoteResult

SERVER = "qwen3.6-27b-tp1-1"

# What `ddconsole --demo down qwen3.6-27b-tp1-1 --json` printed.
DOWN = [
    {
        "id": SERVER,
        "result": "stopped",
        "sigterm": True,
        "sigkill": False,
        "seconds": 0.2605953440000235,
        "port_free": True,
        "gpus_released": True,
        "notes": [],
        "warnings": [],
    }
]
# The status `restart --json` and `logs --json` print (abridged from a demo server).
STATUS: dict[str, Any] = {
    "id": SERVER,
    "profile": "qwen3.6-27b",
    "layout": "tp1",
    "variant": "off",
    "state": "ready",
    "reason": None,
    "failure_excerpt": [],
    "port": 39925,
    "url": "http://127.0.0.1:39925",
    "gpus": [0],
}
LINES = [
    '[2026-12-06 04:25:24] INFO:     127.0.0.1:46748 - "GET /metrics HTTP/1.1" 200 OK',
    '[2026-12-06 04:25:25] INFO:     127.0.0.1:46758 - "GET /ready HTTP/1.1" 200 OK',
]


def answer(data: object, status: int = 0, stderr: str = "") -> RemoteResult:
    return RemoteResult(status, json.dumps(data), stderr)


def test_every_call_asks_for_the_exact_id() -> None:
    for args in (
        remote_ops.stop_args(SERVER),
        remote_ops.restart_args(SERVER),
        remote_ops.logs_args(SERVER),
    ):
        # The id last, after `--`: whatever it looks like, it is no option there.
        assert args[-2:] == ["--", SERVER]
        assert "--exact" in args
        assert "--json" in args


def test_stop_answer() -> None:
    done = remote_ops.read_stop("alpha", SERVER, answer(DOWN))
    assert done.ok
    assert done.summary == f"{SERVER} on alpha: stopped (SIGTERM, 0.3 s)"
    forgot = [{"id": SERVER, "result": "forgotten", "state": "stopped"}]
    assert remote_ops.read_stop("alpha", SERVER, answer(forgot)).ok
    held = [{**DOWN[0], "port_free": False, "sigkill": True}]
    outcome = remote_ops.read_stop("alpha", SERVER, answer(held, status=1))
    assert outcome.ok
    assert "SIGKILL" in outcome.summary
    assert "port is still held" in outcome.summary


def test_an_answer_for_another_server_is_a_failure() -> None:
    other = [{**DOWN[0], "id": SERVER + "0"}]
    outcome = remote_ops.read_stop("alpha", SERVER, answer(other))
    assert not outcome.ok
    assert SERVER + "0" in outcome.summary
    assert outcome.hint == f"ddconsole --host alpha down {SERVER}"
    moved = remote_ops.read_restart("alpha", SERVER, answer({**STATUS, "id": "x"}))
    assert not moved.ok
    logs = remote_ops.read_logs("alpha", SERVER, answer({"server": {"id": "x"}, "lines": []}))
    assert not logs.ok


def test_a_refusal_names_its_reason_and_the_command() -> None:
    refused = RemoteResult(
        2, "", "ddconsole: error: no server with the exact id 'qwen3.6-27b-tp1-1' (--exact)\n"
    )
    outcome = remote_ops.read_stop("alpha", SERVER, refused)
    assert not outcome.ok
    assert "no server with the exact id" in outcome.summary
    assert outcome.hint == f"ddconsole --host alpha down {SERVER}"
    older = RemoteResult(
        2, "", "usage: ddconsole down ...\nddconsole down: error: unrecognized option '--exact'\n"
    )
    outcome = remote_ops.read_restart("beta", SERVER, older)
    assert not outcome.ok
    assert "older" in outcome.summary
    assert "nothing was run" in outcome.summary


def test_restart_and_logs_answers() -> None:
    ready = remote_ops.read_restart("alpha", SERVER, answer(STATUS))
    assert ready.ok
    assert ready.summary.endswith("ready at http://127.0.0.1:39925")
    failed = {**STATUS, "state": "failed", "reason": "exited with code 1", "failure_excerpt": ["x"]}
    outcome = remote_ops.read_restart("alpha", SERVER, answer(failed, status=1))
    assert not outcome.ok
    assert "exited with code 1" in outcome.summary
    assert outcome.lines == ("x",)
    logs = remote_ops.read_logs("alpha", SERVER, answer({"server": STATUS, "lines": LINES}))
    assert logs.ok
    assert logs.lines == tuple(LINES)


class Runner:
    """A runner whose host is unreachable, or that answers with `result`."""

    def __init__(self, result: RemoteResult | None) -> None:
        self.result = result
        self.calls: list[tuple[str, list[str], float]] = []

    async def run(self, name: str, args: Sequence[str], timeout_s: float = 120.0) -> RemoteResult:
        self.calls.append((name, list(args), timeout_s))
        if self.result is None:
            raise LinkDown(f"host {name}: connection refused")
        return self.result


async def test_an_unreachable_host_is_an_outcome_not_an_error() -> None:
    runner = Runner(None)
    outcome = await remote_ops.stop(runner, "alpha", SERVER)
    assert not outcome.ok
    assert "connection refused" in outcome.summary
    assert outcome.hint == f"ddconsole --host alpha down {SERVER}"
    assert runner.calls[0][2] == remote_ops.STOP_TIMEOUT_S
    logs = await remote_ops.log_tail(
        Runner(answer({"server": STATUS, "lines": LINES})), "a", SERVER
    )
    assert logs.ok


async def test_a_demo_consoles_hints_carry_demo() -> None:
    # A demo console's hosts run demo servers: the command by hand says --demo, as the
    # call itself does (Fleet.run adds it), or it would name no server there.
    outcome = await remote_ops.stop(_DemoRunner(None), "alpha", SERVER)
    assert outcome.hint == f"ddconsole --demo --host alpha down {SERVER}"
    failed = await remote_ops.restart(
        _DemoRunner(answer({**STATUS, "state": "failed", "reason": "exit 1"})), "alpha", SERVER
    )
    assert not failed.ok
    assert failed.hint == f"ddconsole --demo --host alpha restart {SERVER}"
    assert remote_ops.by_hand("alpha", "ps") == "ddconsole --host alpha ps"


class _DemoRunner(Runner):
    demo = True


@pytest.mark.parametrize(
    ("read", "data"),
    [
        # Each shape a version-skewed host could print; none may raise.
        (remote_ops.read_stop, [{**DOWN[0], "notes": 5}]),
        (remote_ops.read_stop, [{**DOWN[0], "notes": "held"}]),
        (remote_ops.read_stop, [{**DOWN[0], "seconds": float("nan")}]),
        (remote_ops.read_stop, [{**DOWN[0], "seconds": True}]),
        (remote_ops.read_stop, [{**DOWN[0], "result": ["stopped"]}]),
        (remote_ops.read_stop, [{"id": SERVER, "result": "failed", "error": {"x": 1}}]),
        (remote_ops.read_restart, {**STATUS, "failure_excerpt": 3}),
        (remote_ops.read_restart, {**STATUS, "failure_excerpt": "boom"}),
        (remote_ops.read_restart, {**STATUS, "state": 7, "reason": ["x"]}),
        (remote_ops.read_restart, {**STATUS, "url": 5}),
        (remote_ops.read_logs, {"server": STATUS, "lines": 7}),
        (remote_ops.read_logs, {"server": STATUS, "lines": "one line"}),
        (remote_ops.read_logs, {"server": {**STATUS, "state": None}, "lines": [1, "x"]}),
    ],
)
def test_a_malformed_answer_is_read_not_raised(
    read: Callable[[str, str, RemoteResult], remote_ops.RemoteOutcome], data: object
) -> None:
    outcome = read("alpha", SERVER, answer(data))
    assert SERVER in outcome.summary
    assert "nan" not in outcome.summary
    assert "; h; e" not in outcome.summary  # a string is not split into notes
    assert all(isinstance(line, str) for line in outcome.lines)


def test_malformed_answers_read_as_unknown() -> None:
    notes = remote_ops.read_stop("alpha", SERVER, answer([{**DOWN[0], "notes": "held"}]))
    assert notes.summary == f"{SERVER} on alpha: stopped (SIGTERM, 0.3 s)"
    nan = remote_ops.read_stop("alpha", SERVER, answer([{**DOWN[0], "seconds": float("nan")}]))
    assert nan.summary == f"{SERVER} on alpha: stopped (SIGTERM)"
    failed = {**STATUS, "state": "failed", "reason": "exit 1", "failure_excerpt": 3}
    restart = remote_ops.read_restart("alpha", SERVER, answer(failed))
    assert (restart.ok, restart.lines) == (False, ())
    logs = remote_ops.read_logs("alpha", SERVER, answer({"server": STATUS, "lines": 7}))
    assert (logs.ok, logs.lines) == (True, ())


async def test_a_reader_or_link_that_raises_is_an_outcome_naming_host_and_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(host: str, server_id: str, result: RemoteResult) -> remote_ops.RemoteOutcome:
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(remote_ops, "read_stop", broken)
    outcome = await remote_ops.stop(Runner(answer(DOWN)), "alpha", SERVER)
    assert not outcome.ok
    assert outcome.summary.startswith(f"down {SERVER} on alpha: answer unreadable")
    assert outcome.hint == f"ddconsole --host alpha down {SERVER}"

    class Failing(Runner):
        async def run(
            self, name: str, args: Sequence[str], timeout_s: float = 120.0
        ) -> RemoteResult:
            raise OSError("broken pipe")

    outcome = await remote_ops.restart(Failing(None), "alpha", SERVER)
    assert not outcome.ok
    assert outcome.summary == f"restart {SERVER} on alpha: OSError: broken pipe"


@pytest.mark.parametrize("bad", ["--all", "-a", "", "a/b", "a b", "x\ny", "x" * 201])
async def test_an_id_that_is_not_a_server_id_is_refused_and_nothing_is_run(bad: str) -> None:
    assert not remote_ops.valid_server_id(bad)
    runner = Runner(answer(DOWN))
    for call in (remote_ops.stop, remote_ops.restart, remote_ops.log_tail):
        outcome = await call(runner, "alpha", bad)
        assert not outcome.ok
        assert "is not a server id" in outcome.summary
    assert runner.calls == []
    assert remote_ops.valid_server_id(SERVER)


def test_the_reason_drops_the_verbs_error_head() -> None:
    refused = RemoteResult(2, "", "ddconsole down: error: unrecognized arguments: --bogus\n")
    outcome = remote_ops.read_stop("alpha", SERVER, refused)
    assert outcome.summary == f"down {SERVER} on alpha failed: unrecognized arguments: --bogus"


def test_a_log_tail_leaves_the_polling_out() -> None:
    served = '[2026-12-06 04:25:26] INFO:     127.0.0.1:46770 - "POST /generate HTTP/1.1" 200 OK'
    loaded = "[2026-12-06 04:25:20] INFO:     Application startup complete."
    lines, polls = remote_ops.without_polling([loaded, *LINES, served, *LINES * 3])
    assert (lines, polls) == ([loaded, served], 8)
    lines, polls = remote_ops.without_polling([f"line {i}" for i in range(50)], keep=3)
    assert (lines, polls) == (["line 47", "line 48", "line 49"], 0)
