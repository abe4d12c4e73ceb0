"""`runs stop --exact` and `runs show --exact` act on that very run id, never on another whose
id merely starts with it (review 3, MEDIUM 3): `RunDir.open(exact=True)`, the CLI refusing a
prefix, the Bench screen's remote stop and the remote summary read sending `--exact` (their
args parsed back by the real `runs` parser, answered by the real CLI), and an older
ddconsole that refuses the flag worded as such."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from console.bench.rundir import RunDir
from console.cli import cmd_runs
from console.core.errors import UsageError
from console.fleet.link import RemoteResult
from console.fleet.remote_bench import read_stopped, stop_args
from console.fleet.remote_runs import RemoteRunError, fetch_summary, older_reason, show_args
from tests.conftest import CliResult
from tests.unit.test_hints_via_host import _imported_run

if TYPE_CHECKING:
    from collections.abc import Callable

    from console.fleet.fleet import Fleet

# Two `g` presses in one second: the second run of the same name gets `-2` (RunDir.create).
FIRST = "20261206-071500-bench-q"
SECOND = f"{FIRST}-2"

# What an older ddconsole (no --exact yet) says to the flag, as its parser words an unknown
# option.
OLDER = (
    "usage: ddconsole runs stop ...\nddconsole runs stop: error: unrecognized option '--exact'\n"
)


def _runs(root: Path, *ids: str) -> None:
    for run_id in ids:
        (root / run_id).mkdir(parents=True)
        (root / run_id / "run.json").write_text("{}")


def test_exact_opens_only_that_very_id(tmp_path: Path) -> None:
    _runs(tmp_path, SECOND)
    # Without exact, a prefix of the only run there is that run: the old behaviour stays.
    assert RunDir.open(tmp_path, FIRST).run_id == SECOND
    with pytest.raises(UsageError) as refused:
        RunDir.open(tmp_path, FIRST, exact=True)
    assert refused.value.message == f"no run with the exact id {FIRST!r} (--exact)"
    assert RunDir.open(tmp_path, SECOND, exact=True).run_id == SECOND
    # Nor is a path taken for the id: the id names a run under the runs folder only.
    with pytest.raises(UsageError):
        RunDir.open(tmp_path / "elsewhere", str(tmp_path / SECOND), exact=True)
    _runs(tmp_path, FIRST)
    assert RunDir.open(tmp_path, FIRST, exact=True).run_id == FIRST


def _parsed(args: list[str]) -> argparse.Namespace:
    """`args` as the real `ddconsole runs` parser reads them."""
    parser = argparse.ArgumentParser()
    cmd_runs.register(parser.add_subparsers(), argparse.ArgumentParser(add_help=False))
    return parser.parse_args(args)


def test_the_remote_stop_and_show_send_exact() -> None:
    stop = _parsed(stop_args(SECOND))
    assert (stop.run, stop.exact, stop.yes, stop.json, stop.timeout) == (
        SECOND,
        True,
        True,
        True,
        60.0,
    )
    show = _parsed(show_args(SECOND))
    assert (show.run, show.exact, show.json, show.follow) == (SECOND, True, True, False)


def test_an_older_ddconsole_refusing_exact_is_named() -> None:
    ok, line = read_stopped("alpha", FIRST, RemoteResult(2, "", OLDER))
    assert not ok
    assert line == (
        f"stop {FIRST} on alpha failed: the ddconsole on alpha is older and has no --exact; "
        "nothing was run there, so no other run was stopped"
    )
    # Any other refusal keeps its own reason.
    assert older_reason("alpha", RemoteResult(2, "", "ddconsole: error: unknown run 'x'\n")) is None
    assert older_reason("alpha", RemoteResult(0, "{}", OLDER)) is None


@dataclass
class _Summary:
    reason: str | None = None


class _CliHost:
    """A host whose `ddconsole ARGS` is this checkout's CLI run in-process (demo state), or
    a fixed answer: what `Fleet.run` returns for it."""

    def __init__(self, cli: Callable[..., CliResult], answer: RemoteResult | None = None) -> None:
        self.cli = cli
        self.answer = answer
        self.calls: list[list[str]] = []

    def summary(self, host: str) -> _Summary:
        return _Summary()

    def link_state(self, host: str) -> str:
        return "up"

    async def run(self, host: str, args: list[str], timeout_s: float) -> RemoteResult:
        self.calls.append(args)
        if self.answer is not None:
            return self.answer
        done = self.cli("--demo", *args)
        return RemoteResult(done.code, done.out, done.err)


async def test_a_prefix_is_refused_by_the_cli_and_the_remote_read(cli, tmp_path: Path) -> None:
    run_id = _imported_run(cli, tmp_path)
    prefix = run_id[:-2]
    # Without --exact the prefix reaches the run (a person typing it); with it, nothing.
    assert cli("--demo", "runs", "show", prefix).code == 0
    for verb in (["show"], ["stop", "--yes"]):
        refused = cli("--demo", "runs", *verb, "--exact", prefix)
        assert refused.code == 2, refused
        assert f"no run with the exact id {prefix!r} (--exact)" in refused.err
    stopped = cli("--demo", "runs", "stop", "--exact", "--yes", run_id)
    assert stopped.code == 1  # that very run is found; it has ended, so nothing to stop
    assert "is not running" in stopped.err

    host = _CliHost(cli)
    fleet = cast("Fleet", host)
    summary = await fetch_summary(fleet, "alpha", run_id)
    assert summary.run_id == run_id
    with pytest.raises(RemoteRunError) as missing:
        await fetch_summary(fleet, "alpha", prefix)
    assert f"no run with the exact id {prefix!r} (--exact)" in missing.value.message
    assert all("--exact" in call for call in host.calls)
    older = cast("Fleet", _CliHost(cli, RemoteResult(2, "", OLDER)))
    with pytest.raises(RemoteRunError) as refused_there:
        await fetch_summary(older, "alpha", run_id)
    assert refused_there.value.message == (
        f"runs show {run_id}: the ddconsole on alpha is older and has no --exact; nothing was "
        "run there, so no other run was shown"
    )
    assert json.loads(cli("--demo", "runs", "show", "--exact", "--json", run_id).out)
