"""Fast checks of a multi-node layout placed on hosts: `up --nodes` errors name the flag, a
node's plan carries its rank, the gang's hosts and the head's rendezvous address (SGLang's
`--nnodes`, `--node-rank`, `--dist-init-addr`: sglang 0.5.23
srt/arg_groups/fields/parallel.py:32-44), the supervisor's reason uses gang.py's words, and
the gang file keeps the request `restart` starts again (an older file without it loads, and
its restart is refused with what to do). Then the gang's down and restart: only restart
sends the nodes `--stop-reason` (an older node host refusing it is named as such), a prefix
that starts both a gang and a server here is refused as ambiguous, and a supervisor is
stopped only when its command line names this gang's file."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from console.cli import cmd_servers
from console.cli.cmd_plan import make_plan
from console.cli.services import Services
from console.core.errors import ConsoleError
from console.core.paths import StatePaths
from console.fleet import gang_up
from console.fleet.gang_file import (
    WATCH_MODULE,
    GangFile,
    GangNode,
    end_watcher,
    gang_path,
    load,
    save,
    watcher_alive,
)
from console.fleet.gang_up import request_of
from console.fleet.gang_watch import ended_on_its_own, reason_for
from console.fleet.link import RemoteResult
from console.topology.nodes import node_plan
from tests.fleet.gangworld import wait_for
from tests.tui.made_servers import gone_pid, write_server


def test_nodes_flag_needs_as_many_hosts_as_the_layout_has_nodes(cli) -> None:
    result = cli("--demo", "up", "kimi-k2.6", "--layout", "tp16-2node", "--nodes", "alpha")
    assert result.code == 2
    assert "--nodes: layout 'tp16-2node' runs 2 nodes; name 2 hosts (got 1)" in result.err


def test_nodes_flag_on_a_single_node_layout_is_refused(cli) -> None:
    result = cli("--demo", "up", "kimi-k2.6", "--layout", "tp8", "--nodes", "a,b")
    assert result.code == 2
    assert "--nodes: layout 'tp8' runs on one node" in result.err


def test_a_node_on_an_unknown_host_is_named_with_the_known_ones(cli) -> None:
    result = cli("--demo", "up", "kimi-k2.6", "--layout", "tp16-2node", "--nodes", "gamma,beta")
    assert result.code == 2
    assert "--nodes: node 'gamma' is no host of hosts.toml (known: local)" in result.err


def test_node_plan_carries_rank_hosts_and_the_heads_address() -> None:
    plan = make_plan(Services.create(demo=True), "kimi-k2.6", "tp16-2node", None, 41234)
    node = node_plan(plan, 1, ["alpha", "beta"], "10.0.0.2:29500", 45678)
    argv = list(node.argv)
    assert argv[argv.index("--nnodes") + 1] == "2"
    assert argv[argv.index("--node-rank") + 1] == "1"
    assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.2:29500"
    assert argv[argv.index("--port") + 1] == "45678"
    assert argv.count("--node-rank") == 1
    assert (node.node_rank, node.nodes, node.port) == (1, ("alpha", "beta"), 45678)
    assert node.dist_init_addr == "10.0.0.2:29500"


def test_the_supervisors_reason_is_gang_pys() -> None:
    killed = {"state": "failed", "exit_code": -9, "ended_wall": 1.0, "failure_kind": "signal"}
    assert reason_for(GangNode(1, "beta", "g.node1"), killed) == (
        "node 1 exited 137 (SIGKILL); the gang was stopped"
    )
    assert reason_for(GangNode(0, "alpha", "g"), {"state": "failed", "exit_code": 1}) == (
        "node 0 (the head) exited with status 1; the gang was stopped"
    )
    assert ended_on_its_own(killed)
    # A node the gang itself stopped is no cause; a running one has not ended.
    assert not ended_on_its_own({**killed, "failure_kind": "gang"})
    assert not ended_on_its_own({"state": "ready"})
    assert not ended_on_its_own(None)


# A gang file as `up kimi-k2.6 --layout tp16-2node --nodes alpha,beta` wrote it before the
# request was kept: no variant, port or gpus.
OLD_FILE: dict[str, Any] = {
    "id": "kimi-k2.6-tp16-2node-1",
    "profile": "kimi-k2.6",
    "layout": "tp16-2node",
    "demo": True,
    "nodes": [
        {"rank": 0, "host": "alpha", "id": "kimi-k2.6-tp16-2node-1"},
        {"rank": 1, "host": "beta", "id": "kimi-k2.6-tp16-2node-1.node1"},
    ],
    "created_wall": 1780000000.5,
    "head_url": "http://127.0.0.1:30000",
    "watcher_pid": 4242,
    "stop_requested_wall": None,
    "stop_reason": None,
    "ended_wall": None,
    "failure": None,
    "notes": [],
}


def test_the_gang_file_keeps_the_request_and_restart_starts_it_again(tmp_path: Path) -> None:
    gang = GangFile.from_json({**OLD_FILE, "variant": "off", "port": 30011, "gpus": [0, 1, 2, 3]})
    path = tmp_path / "gangs" / f"{gang.id}.json"
    save(path, gang)
    again = load(path)
    assert again == gang
    assert json.loads(path.read_text())["gpus"] == [0, 1, 2, 3]
    request = request_of(again, path, 90.0)
    assert (request.profile, request.layout, request.variant) == ("kimi-k2.6", "tp16-2node", "off")
    assert (request.nodes, request.port, request.gpus) == (("alpha", "beta"), 30011, (0, 1, 2, 3))
    assert (request.demo, request.timeout_s, request.wait) == (True, 90.0, True)
    # A request without --port comes back on the port its head served on (its URL stays
    # good); without --gpus the GPUs stay unset, picked as `up` picks them.
    path.write_text(json.dumps({**OLD_FILE, "variant": "off", "port": None, "gpus": None}))
    bare = request_of(load(path), path, None)
    assert (bare.port, bare.gpus, bare.timeout_s) == (30000, None, None)
    path.write_text(
        json.dumps({**OLD_FILE, "variant": "off", "port": None, "gpus": None, "head_url": ""})
    )
    assert request_of(load(path), path, None).port is None


def test_an_older_gang_file_loads_and_its_restart_is_refused(cli) -> None:
    paths = StatePaths.for_mode(True)
    path = gang_path(paths, OLD_FILE["id"])
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(OLD_FILE))
    gang = load(path)
    assert (gang.variant, gang.port, gang.gpus) == (None, None, None)
    assert load(path).to_json() == {**OLD_FILE, "variant": None, "port": None, "gpus": None}
    # By a unique prefix, as `down` takes it; nothing is stopped and the file stays.
    result = cli("--demo", "restart", "kimi-k2.6-tp16")
    assert result.code == 1
    assert f"{path}: this multi-node server's file was written before it kept the request" in (
        result.err
    )
    assert (
        "`ddconsole down kimi-k2.6-tp16-2node-1`, then `ddconsole up kimi-k2.6 --layout "
        "tp16-2node --nodes alpha,beta` again"
    ) in result.err
    assert load(path) == gang


def _down_parsed(args: list[str]) -> argparse.Namespace:
    """`args` as the real `ddconsole down` parser reads them."""
    parser = argparse.ArgumentParser()
    cmd_servers.register(parser.add_subparsers(), argparse.ArgumentParser(add_help=False))
    return parser.parse_args(args)


# What a node host on a ddconsole from before --stop-reason says to it.
OLDER = "usage: ddconsole down ...\nddconsole down: error: unrecognized option '--stop-reason'\n"


class _AnsweringLinks(gang_up.Links):
    """Links whose hosts answer each `ddconsole ARGS` with a fixed result, the args kept."""

    answers: ClassVar[dict[str, RemoteResult]] = {}
    calls: ClassVar[list[tuple[str, list[str]]]] = []

    async def run(self, host: str, args: Sequence[str], timeout_s: float) -> RemoteResult:
        type(self).calls.append((host, list(args)))
        return type(self).answers[host]


def test_only_restart_sends_the_stop_reason_to_the_nodes() -> None:
    down = _down_parsed(gang_up.node_down_args(["g", "g.node1"], 5.0, None))
    assert (down.ids, down.gang_node, down.grace, down.stop_reason) == (
        ["g", "g.node1"],
        True,
        5.0,
        None,
    )
    restart = _down_parsed(gang_up.node_down_args(["g"], 5.0, "restart"))
    assert (restart.ids, restart.gang_node, restart.stop_reason) == (["g"], True, "restart")


async def test_down_of_a_gang_stops_nodes_on_an_older_ddconsole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gang = GangFile.from_json({**OLD_FILE, "variant": "off", "watcher_pid": None})
    path = tmp_path / "gangs" / f"{gang.id}.json"
    save(path, gang)
    stopped = RemoteResult(0, f"{gang.id}: stopped (SIGTERM, 1.0 s)\n", "")
    monkeypatch.setattr(_AnsweringLinks, "answers", {"alpha": stopped, "beta": stopped})
    monkeypatch.setattr(_AnsweringLinks, "calls", [])
    monkeypatch.setattr(gang_up, "Links", _AnsweringLinks)
    said: list[str] = []
    done = await gang_up._down(gang, path, [], grace=5.0, forget=False, say=said.append)
    assert done == {"id": gang.id, "result": "stopped", "hosts": ["alpha", "beta"]}
    # The plain down sends no --stop-reason, which a node host's older ddconsole refuses.
    assert sorted(_AnsweringLinks.calls) == [
        ("alpha", ["down", gang.id, "--gang-node", "--grace", "5.0"]),
        ("beta", ["down", f"{gang.id}.node1", "--gang-node", "--grace", "5.0"]),
    ]
    assert load(path).ended_wall is not None


async def test_a_restart_refused_by_an_older_host_or_not_clean_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = {
        "alpha": RemoteResult(2, "", OLDER),
        "beta": RemoteResult(1, "g.node1: stopped (SIGTERM); port 30000 still held\n", ""),
    }
    monkeypatch.setattr(_AnsweringLinks, "answers", answers)
    monkeypatch.setattr(_AnsweringLinks, "calls", [])
    links = _AnsweringLinks([], True)
    said: list[str] = []
    targets = {"alpha": ["g"], "beta": ["g.node1"]}
    stopped = await gang_up._stop_on_hosts(links, targets, 5.0, "restart", said.append)
    assert sorted(stopped.problems) == [
        "host alpha: the ddconsole on alpha is older and has no --stop-reason; nothing was "
        "stopped there",
        "host beta: `ddconsole down` exited 1 (see its lines)",
    ]
    assert stopped.unreached == []
    assert said == ["  beta: g.node1: stopped (SIGTERM); port 30000 still held"]


def test_a_prefix_of_a_gang_and_a_server_here_is_ambiguous(cli) -> None:
    services = Services.create(demo=True)
    pid, ticks = gone_pid()
    # The only local record, ended: the refusal must come before anything reads it.
    write_server(
        services,
        "kimi-k2.6-tp8-1",
        (0,),
        launched_wall=1.0,
        pid=pid,
        start_ticks=ticks,
        ended_wall=2.0,
    )
    path = gang_path(services.state, OLD_FILE["id"])
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**OLD_FILE, "variant": "off", "watcher_pid": None}))
    for verb in ("restart", "down"):
        result = cli("--demo", verb, "kimi-k2.6-tp")
        assert result.code == 2, result
        assert (
            "ambiguous id 'kimi-k2.6-tp': the multi-node server kimi-k2.6-tp16-2node-1 and the "
            "server kimi-k2.6-tp8-1 here"
        ) in result.err
    assert load(path).stop_requested_wall is None
    assert "kimi-k2.6-tp8-1" in services.manager().records.ids()


def test_a_supervisor_is_ours_only_with_this_gangs_file(tmp_path: Path) -> None:
    mine = tmp_path / "gangs" / "mine.json"
    other = tmp_path / "gangs" / "other.json"
    other.parent.mkdir()
    # Another gang's supervisor, as a reused pid would find it: its module, its own file
    # (given relative to its working folder).
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", WATCH_MODULE, "gangs/other.json"],
        cwd=tmp_path,
    )
    try:
        wait_for(
            lambda: watcher_alive(proc.pid) or None, 10, "the process to show its command line"
        )
        assert watcher_alive(proc.pid, other)
        assert not watcher_alive(proc.pid, mine)
        end_watcher(proc.pid, mine)
        assert proc.poll() is None
        end_watcher(proc.pid, other)
        assert proc.wait(10) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


class _VersionedLinks(gang_up.Links):
    """Hosts that list the gang's nodes and answer `down --help` as their ddconsole would:
    beta's is from before `--stop-reason`. Every call is kept."""

    calls: ClassVar[list[tuple[str, list[str]]]] = []

    async def run(self, host: str, args: Sequence[str], timeout_s: float) -> RemoteResult:
        type(self).calls.append((host, list(args)))
        if list(args[-2:]) == ["down", "--help"]:
            help_text = "usage: ddconsole down [-h] [--gang-node] [--grace S]"
            if host == "alpha":
                help_text += " [--stop-reason TEXT]"
            return RemoteResult(0, help_text + "\n", "")
        if "ps" in args:
            ids = [OLD_FILE["nodes"][0]["id"]] if host == "alpha" else [OLD_FILE["nodes"][1]["id"]]
            return RemoteResult(0, json.dumps([{"id": i, "state": "ready"} for i in ids]), "")
        raise AssertionError(f"nothing else may run: {host} {list(args)}")


async def test_a_restart_across_an_older_host_stops_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gang = GangFile.from_json({**OLD_FILE, "variant": "off", "watcher_pid": None})
    path = tmp_path / "gangs" / f"{gang.id}.json"
    save(path, gang)
    monkeypatch.setattr(_VersionedLinks, "calls", [])
    links = _VersionedLinks([], True)
    assert await gang_up._older_hosts(links, ["alpha", "beta"]) == ["beta"]
    monkeypatch.setattr(gang_up, "Links", _VersionedLinks)
    with pytest.raises(ConsoleError, match="the ddconsole on beta is older") as refused:
        await gang_up._restart(
            gang, request_of(gang, path, None), path, [], grace=5.0, say=lambda _: None
        )
    assert "nothing was stopped" in refused.value.message
    # No down was sent, and the gang's file still reads as running.
    assert not [c for c in _VersionedLinks.calls if "down" in c[1] and "--help" not in c[1]]
    assert load(path).stop_requested_wall is None
