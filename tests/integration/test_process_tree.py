"""The simulator's process tree against SGLang 0.5.23's, and how ddconsole finds, stops and
measures it, with real processes.

SGLang's leader (never retitled) starts one scheduler per rank and a detokenizer, or with
dp > 1 a data-parallel controller that starts the schedulers (sglang 0.5.23
srt/entrypoints/engine.py:909-987, 1326). The children retitle themselves with setproctitle
(srt/managers/scheduler.py:6279-6294, detokenizer_manager.py:551,
data_parallel_controller.py:955), which overwrites the environ area: an environment marker is
invisible in /proc/PID/environ of exactly those processes unless SPT_NOENV=1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli.services import Services
from console.hw import simload
from console.hw.procs import (
    ProcessInfo,
    cmdline,
    environ_value,
    is_running,
    live_processes,
    process_info,
)
from console.hw.simulated import SimulatedGpuBackend
from console.server.manager import ServerManager
from tests.conftest import REPO
from tests.simproc import SMALL, SimProcess, start_sim, stop_sim

MARK = "DDCONSOLE_TREE_TEST"
DP_LAYOUT = "\n[layouts.dp2tp2]\ntp = 2\ndp = 2\ngpus = [0, 1, 2, 3]\n"


def session_processes(sid: int) -> list[ProcessInfo]:
    """Every live process of session `sid`, whatever it is."""
    return [info for info in live_processes() if info.sid == sid]


def _wait_tree(sim: SimProcess, count: int, timeout: float = 30) -> dict[int, str]:
    """pid -> title of the leader's session, once `count` children carry an SGLang title."""
    deadline = time.monotonic() + timeout
    titles: dict[int, str] = {}
    while time.monotonic() < deadline:
        titles = {
            p.pid: cmdline(p.pid) for p in session_processes(sim.proc.pid) if p.pid != sim.proc.pid
        }
        if sum(t.startswith("sglang::") for t in titles.values()) == count:
            return titles
        time.sleep(0.05)
    raise AssertionError(f"children not retitled in {timeout} s: {titles}\n{sim.log()}")


def _wait_gone(sid: int, timeout: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := [p.pid for p in session_processes(sid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.parametrize(
    ("tp", "dp", "titles"),
    [
        # scheduler.py:6279-6294: no prefix at tp=1 dp=1; " TP{t}" when tp > 1; " DP{d}" when
        # a DP controller passed the rank; spaces become underscores.
        (1, 1, ["sglang::detokenizer", "sglang::scheduler"]),
        (
            4,
            1,
            ["sglang::detokenizer"] + [f"sglang::scheduler_TP{t}" for t in range(4)],
        ),
        (
            2,
            2,
            [
                "sglang::data_parallel_controller",
                "sglang::detokenizer",
                "sglang::scheduler_DP0_TP0",
                "sglang::scheduler_DP0_TP1",
                "sglang::scheduler_DP1_TP0",
                "sglang::scheduler_DP1_TP1",
            ],
        ),
        (
            1,
            2,
            [
                "sglang::data_parallel_controller",
                "sglang::detokenizer",
                "sglang::scheduler_DP0",
                "sglang::scheduler_DP1",
            ],
        ),
    ],
)
def test_children_are_retitled_and_lose_the_marker(
    tp: int, dp: int, titles: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started the way real SGLang runs (no SPT_NOENV), every child's title is SGLang's and
    its environ no longer shows the marker; the leader keeps both its argv and the marker.
    Killing the leader takes every child with it (PDEATHSIG, through the DP controller)."""
    monkeypatch.delenv("SPT_NOENV", raising=False)
    sim = start_sim(
        [*SMALL, "--tp-size", str(tp), "--dp-size", str(dp)],
        tmp_path=tmp_path,
        env={MARK: "on"},
    )
    try:
        found = _wait_tree(sim, len(titles))
        assert sorted(found.values()) == titles
        leader = sim.proc.pid
        assert "console.sim" in cmdline(leader)
        assert environ_value(leader, MARK) == "on"
        for pid, title in found.items():
            info = process_info(pid)
            assert info is not None
            assert environ_value(pid, MARK) is None, title
            if title.startswith("sglang::scheduler") and dp > 1:
                # data_parallel_controller.py:740-790: the controller starts the schedulers.
                assert cmdline(info.ppid) == "sglang::data_parallel_controller"
            else:
                assert info.ppid == leader
        os.kill(leader, signal.SIGKILL)
        sim.proc.wait(timeout=10)
        assert _wait_gone(leader) == []
    finally:
        stop_sim(sim)


def test_spt_noenv_keeps_the_marker_readable(tmp_path: Path) -> None:
    """What ddconsole sets at launch: with SPT_NOENV=1 setproctitle leaves the environ alone."""
    sim = start_sim(
        [*SMALL, "--tp-size", "2"], tmp_path=tmp_path, env={MARK: "on", "SPT_NOENV": "1"}
    )
    try:
        found = _wait_tree(sim, 3)
        assert sorted(found.values()) == [
            "sglang::detokenizer",
            "sglang::scheduler_TP0",
            "sglang::scheduler_TP1",
        ]
        assert all(environ_value(pid, MARK) == "on" for pid in found)
    finally:
        stop_sim(sim)


def test_orphans_survive_a_killed_leader_in_its_session(tmp_path: Path) -> None:
    """The `orphans` fault: no PDEATHSIG, so a dp2 x tp2 tree outlives its leader and keeps
    its session (the DP controller and its schedulers included)."""
    sim = start_sim(
        [*SMALL, "--tp-size", "2", "--dp-size", "2", "--sim-fault", "orphans"],
        tmp_path=tmp_path,
    )
    try:
        found = _wait_tree(sim, 6)
        os.kill(sim.proc.pid, signal.SIGKILL)
        sim.proc.wait(timeout=10)
        time.sleep(0.3)
        assert sorted(p.pid for p in session_processes(sim.proc.pid)) == sorted(found)
    finally:
        stop_sim(sim)


# -- ddconsole against the tree ------------------------------------------------------------


def dd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args, "--demo"],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=90,
        cwd=REPO,
        check=False,
    )


def up(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    result = dd("up", *args, "--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    status: dict[str, object] = json.loads(result.stdout)
    assert status["state"] == "ready", status
    return status


@pytest.fixture
def demo(monkeypatch: pytest.MonkeyPatch, user_profiles: Path) -> Iterator[Path]:
    """Fast simulators, a qwen profile with a dp2 x tp2 layout, nothing left running."""
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    shipped = (REPO / "profiles" / "qwen3.6-27b.toml").read_text()
    (user_profiles / "qwen3.6-27b.toml").write_text(shipped + DP_LAYOUT)
    yield user_profiles
    dd("down", "--all", "--grace", "2")


class SessionOnly(ServerManager):
    """A manager whose marker nothing carries: it can find a server's processes only by
    their session, as it must when SGLang's setproctitle has wiped the marker."""

    def marker(self, server_id: str) -> str:
        return f"{super().marker(server_id)}:carried-by-nothing"


@pytest.mark.parametrize(("layout", "children"), [("tp4", 5), ("dp2tp2", 6)])
def test_orphans_found_and_removed_by_session_alone(demo: Path, layout: str, children: int):
    status = up(
        "qwen3.6-27b",
        "-l",
        layout,
        "--port",
        str(_free_port()),
        env={"DDCONSOLE_SIM_FAULT": "orphans"},
    )
    services = Services.create(demo=True)
    manager = SessionOnly(services.state, services.gpu_backend, demo=True)
    server_id = str(status["id"])
    leader = int(str(status["pid"]))
    gpus = [0, 1, 2, 3]
    backend = SimulatedGpuBackend(services.state.sim_gpu)
    schedulers = {p.pid for gpu in gpus for p in backend.compute_processes(gpu)}
    tree = {p.pid for p in manager.server_processes(server_id)}
    assert tree == {p.pid for p in session_processes(leader)}
    assert len(tree) == 1 + children
    # ddconsole launches with SPT_NOENV=1, so its marker stays readable on the schedulers.
    real = f"{services.state.root}:{server_id}"
    assert all(environ_value(pid, "DDCONSOLE_SERVER") == real for pid in schedulers)
    assert schedulers < tree
    assert leader not in schedulers
    os.kill(leader, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while manager.records.exit(server_id) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    listed, _ = manager.statuses(probe=False)
    orphaned = next(s for s in listed if s.id == server_id)
    assert orphaned.state.value == "failed"
    assert sorted(orphaned.orphans) == sorted(tree - {leader})
    # The orphaned schedulers still hold their GPUs, so another launch must not take them
    # for foreign processes: they are managed.
    assert schedulers == {p.pid for gpu in gpus for p in backend.compute_processes(gpu)}
    assert schedulers <= set(manager.managed_processes())
    report = manager.stop(server_id, grace=2)
    assert report.escalated
    assert sorted(report.killed_pids) == sorted(tree - {leader})
    assert report.gpus_released is True
    assert session_processes(leader) == []
    assert not any(is_running(pid, None) for pid in tree)
    assert all(backend.compute_processes(gpu) == () for gpu in gpus)


def test_unreadable_record_still_kills_its_session(demo: Path):
    """`down` of a server whose record file is corrupt kills every process of its session
    (found from the spawn record), not only those that still show the marker."""
    status = up(
        "qwen3.6-27b",
        "-l",
        "tp1",
        "--port",
        str(_free_port()),
        env={"DDCONSOLE_SIM_FAULT": "orphans"},
    )
    services = Services.create(demo=True)
    manager = SessionOnly(services.state, services.gpu_backend, demo=True)
    server_id = str(status["id"])
    leader = int(str(status["pid"]))
    os.kill(leader, signal.SIGKILL)
    (services.state.servers / f"{server_id}.json").write_text("{ not json")
    deadline = time.monotonic() + 10
    while is_running(leader, None):
        assert time.monotonic() < deadline, "the leader outlived SIGKILL"
        time.sleep(0.02)
    orphans = sorted(p.pid for p in session_processes(leader))
    assert len(orphans) == 2  # the scheduler and the detokenizer
    assert manager.stop_unreadable(server_id) == f"killed {orphans}; state files removed"
    assert _wait_gone(leader) == []


def test_gpu_memory_stays_held_while_a_scheduler_lives(tmp_path: Path):
    """A publication whose writer was killed stops showing work (no utilisation) but keeps
    its memory while any process it lists runs; once all are gone it is dropped."""
    scheduler = subprocess.Popen(["sleep", "60"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        simload.publish(
            tmp_path,
            simload.SimPublication(
                gone.pid,
                time.time() - 60,
                {2: simload.SimGpuLoad(util_pct=90.0, mem_used_bytes=7 * 2**30, power_w=300.0)},
                "x",
                (simload.SimProcess(scheduler.pid, "sglang::scheduler", 2, 0, _ticks(scheduler)),),
            ),
        )
        backend = SimulatedGpuBackend(tmp_path)
        reading = backend.read(2)
        assert reading.util_pct == 0
        assert reading.mem_used_bytes is not None
        assert reading.mem_used_bytes >= 7 * 2**30
        assert [p.pid for p in backend.compute_processes(2)] == [scheduler.pid]
    finally:
        scheduler.kill()
        scheduler.wait()
    assert simload.read_publications(tmp_path) == []
    assert list(tmp_path.glob("*.json")) == []


def test_stop_checks_the_schedulers_gpus_not_the_leaders(demo: Path):
    """`down` of a healthy server: its schedulers are the GPU holders, collected before the
    stop, and the release check waits until none of them holds a GPU."""
    status = up("qwen3.6-27b", "-l", "tp4", "--port", str(_free_port()))
    services = Services.create(demo=True)
    manager = services.manager()
    backend = SimulatedGpuBackend(services.state.sim_gpu)
    holders = {p.pid for gpu in (0, 1, 2, 3) for p in backend.compute_processes(gpu)}
    assert len(holders) == 4
    assert int(str(status["pid"])) not in holders
    assert all(cmdline(pid).startswith("sglang::scheduler_TP") for pid in holders)
    report = manager.stop(str(status["id"]), grace=10)
    assert report.sent_sigterm
    assert not report.escalated
    assert report.gpus_released is True
    assert not any(is_running(pid, None) for pid in holders)


def test_numa_binding_is_measured_on_the_schedulers(demo: Path):
    """Single-node tp1 and tp4 servers read MATCH (their leaders and detokenizers run on
    every CPU, the schedulers on their node); a server whose schedulers are bound to the
    other node (the `misbind` fault) reads MISMATCH."""
    tp4 = up("qwen3.6-27b", "-l", "tp4", "--port", str(_free_port()))
    tp1 = up("qwen3.6-27b", "-l", "tp1", "--gpus", "4", "--port", str(_free_port()))
    wrong = up(
        "qwen3.6-27b",
        "-l",
        "tp1",
        "--gpus",
        "5",
        "--port",
        str(_free_port()),
        env={"DDCONSOLE_SIM_FAULT": "misbind"},
    )
    result = dd("metrics", "--once", "--json", "--interval", "0.5")
    assert result.returncode == 0, result.stderr
    bindings = {b["server_id"]: b for b in json.loads(result.stdout)["host"]["bindings"]}
    assert bindings[str(tp4["id"])]["intended_nodes"] == [0]
    assert bindings[str(tp4["id"])]["actual_nodes"] == [0]
    assert bindings[str(tp4["id"])]["processes"] == 4
    assert bindings[str(tp4["id"])]["matches"] is True
    assert bindings[str(tp1["id"])]["actual_nodes"] == [1]
    assert bindings[str(tp1["id"])]["processes"] == 1
    assert bindings[str(tp1["id"])]["matches"] is True
    assert bindings[str(wrong["id"])]["intended_nodes"] == [1]
    assert bindings[str(wrong["id"])]["actual_nodes"] == [0]
    assert bindings[str(wrong["id"])]["matches"] is False
    text = dd("metrics", "--once", "--interval", "0.5").stdout
    assert f"{tp4['id']}: intended NUMA [0], actual [0] (ok)" in text
    assert f"{wrong['id']}: intended NUMA [1], actual [0] (MISMATCH)" in text


def _free_port() -> int:
    from console.core.net import free_port

    return free_port()


def _ticks(proc: subprocess.Popen[bytes]) -> int:
    info = process_info(proc.pid)
    assert info is not None
    return info.start_ticks
