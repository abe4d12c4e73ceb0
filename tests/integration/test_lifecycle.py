"""Launch, readiness, stop, conflicts, switch, failures and reattach, with real processes.

Every server here is a simulator process launched by `ddconsole up --demo` exactly as a real
SGLang would be (same argv, detached, its own session), at --sim-speed 20.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from console.cli.cmd_plan import make_plan
from console.cli.services import Services
from console.core.net import free_port, port_is_free
from console.core.paths import StatePaths
from console.hw.discover import Membership, member_processes, process_age_s
from console.hw.procs import (
    cmdline,
    is_running,
    live_processes,
    process_info,
    send_signal,
    uptime_s,
)
from console.hw.simload import SimGpuLoad, SimPublication, publish
from console.hw.simulated import SimulatedGpuBackend
from console.server.manager import MARKER_ENV
from console.server.records import Records, ServerRecord
from tests.conftest import REPO

SPEED = "20"


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fast simulators, and nothing left running whatever the test did."""
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", SPEED)
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    dd("down", "--all", "--grace", "2")


def dd(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60, check: bool = False
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    result = subprocess.run(
        [sys.executable, "-m", "console", *args, "--demo"],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"ddconsole {' '.join(args)}: {result.returncode}\n{result.stdout}\n{result.stderr}"
        )
    return result


def ps() -> list[dict]:
    return json.loads(dd("ps", "--json", check=True).stdout)


def server_pids(server_id: str) -> list[int]:
    """The server's processes: its leader's session or its marker (SGLang's setproctitle
    wipes the marker of its children unless SPT_NOENV=1), the waiter excluded."""
    paths = StatePaths.for_mode(True)
    spawn_file = paths.servers / f"{server_id}.spawn.json"
    spawn = json.loads(spawn_file.read_text()) if spawn_file.exists() else {}
    wanted = {
        server_id: Membership(
            f"{paths.root}:{server_id}", spawn.get("pid"), spawn.get("start_ticks", 0)
        )
    }
    found = member_processes(MARKER_ENV, wanted)[server_id]
    return [p.pid for p in found if p.pid != spawn.get("waiter_pid")]


def session_pids(sid: int) -> list[int]:
    """Every live process of session `sid`, whatever it is."""
    return sorted(p.pid for p in live_processes() if p.sid == sid)


def up(profile: str, *args: str, env: dict[str, str] | None = None) -> dict:
    result = dd("up", profile, *args, "--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("profile", "layout"),
    [
        ("qwen3.6-27b", "tp1"),
        ("qwen3.6-27b", "tp4"),
        ("qwen3.6-27b", "tp8"),
        ("kimi-k2.6", "tp8"),
    ],
)
def test_up_ps_down_every_shipped_layout(profile: str, layout: str):
    port = free_port()
    status = up(profile, "--layout", layout, "--port", str(port))
    assert status["state"] == "ready"
    assert status["id"] == f"{profile}-{layout}-1"
    listed = {s["id"]: s for s in ps()}
    entry = listed[status["id"]]
    for key in (
        "id",
        "profile",
        "layout",
        "variant",
        "state",
        "reason",
        "pid",
        "pgid",
        "port",
        "gpus",
        "log_path",
    ):
        assert key in entry
    assert entry["state"] == "ready"
    assert entry["port"] == port
    assert httpx.get(f"http://127.0.0.1:{port}/ready").status_code == 200
    tp = 1 if layout == "tp1" else int(layout[2:])
    pids = server_pids(status["id"])
    assert status["pid"] in pids
    assert len(pids) == 1 + tp + 1  # leader, one scheduler per GPU, detokenizer
    down = dd("down", status["id"], "--grace", "10", check=True)
    assert f"stopped {status['id']}" in down.stdout
    assert "port free" in down.stdout
    assert server_pids(status["id"]) == []
    assert not is_running(status["pid"], None)
    assert port_is_free(port)
    assert {s["id"]: s for s in ps()}[status["id"]]["state"] == "stopped"


def test_several_servers_on_disjoint_gpus():
    first = up("qwen3.6-27b", "-l", "tp4", "--port", str(free_port()))
    second = up("qwen3.6-27b", "-l", "tp4", "--gpus", "4,5,6,7", "--port", str(free_port()))
    third = dd("up", "qwen3.6-27b", "-l", "tp1", "--gpus", "5", "--port", str(free_port()))
    try:
        assert first["gpus"] == [0, 1, 2, 3]
        assert second["gpus"] == [4, 5, 6, 7]
        assert second["numa_nodes"] == [1]
        assert third.returncode == 2
        assert f"GPU 5 is held by managed server {second['id']}" in third.stderr
        states = {s["id"]: s["state"] for s in ps()}
        assert states[first["id"]] == states[second["id"]] == "ready"
    finally:
        dd("down", "--all", "--grace", "5")


def test_conflicts_refused_before_launching(tmp_path: Path):
    held = up("qwen3.6-27b", "-l", "tp1", "--port", str(free_port()))
    try:
        same_gpu = dd("up", "kimi-k2.6", "--port", str(free_port()))
        assert same_gpu.returncode == 2
        assert f"GPU 0 is held by managed server {held['id']} (ready)" in same_gpu.stderr
        same_port = dd("up", "qwen3.6-27b", "-l", "tp1", "--gpus", "4", "--port", str(held["port"]))
        assert same_port.returncode == 2
        assert f"port {held['port']} is promised to managed server {held['id']}" in same_port.stderr
    finally:
        dd("down", held["id"], "--grace", "5")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        refused = dd("up", "qwen3.6-27b", "-l", "tp1", "--port", str(port))
    assert refused.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in refused.stderr
    assert f"by pid {os.getpid()}" in refused.stderr
    # A foreign compute process on GPU 3 (simulated host).
    foreign = subprocess.Popen(["sleep", "60"])
    try:
        folder = StatePaths.for_mode(True).sim_gpu
        folder.mkdir(parents=True, exist_ok=True)
        publish(
            folder,
            SimPublication(
                foreign.pid,
                time.time(),
                {3: SimGpuLoad(mem_used_bytes=80 * 2**30)},
                start_ticks=_ticks(foreign.pid),
            ),
        )
        blocked = dd("up", "qwen3.6-27b", "-l", "tp4", "--port", str(free_port()))
        assert blocked.returncode == 2
        assert (
            f"GPU 3 is in use by pid {foreign.pid} (sleep 60), holding 80.0 GiB" in blocked.stderr
        )
    finally:
        foreign.kill()
        foreign.wait()
    assert ps() == [] or all(s["state"] != "ready" for s in ps())


def test_two_consoles_racing_for_the_same_gpus():
    env = {**os.environ}
    commands = [
        [
            sys.executable,
            "-m",
            "console",
            "up",
            "qwen3.6-27b",
            "-l",
            "tp1",
            "--port",
            str(free_port()),
            "--demo",
        ]
        for _ in range(2)
    ]
    procs = [
        subprocess.Popen(
            c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
        )
        for c in commands
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    codes = sorted(p.returncode for p in procs)
    try:
        assert codes == [0, 2], outputs
        loser = outputs[[p.returncode for p in procs].index(2)]
        assert "GPU 0 is held by managed server qwen3.6-27b-tp1-1" in loser[1]
        assert [s["state"] for s in ps()] == ["ready"]
    finally:
        dd("down", "--all", "--grace", "5")


def test_switch_stops_the_old_server_before_starting_the_new():
    old = up("qwen3.6-27b", "-l", "tp8", "--port", str(free_port()))
    result = dd("switch", "kimi-k2.6", "--yes", "--port", str(free_port()), "--json")
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        new = json.loads(result.stdout)
        assert new["state"] == "ready"
        assert f"stopping {old['id']}" in result.stderr
        states = {s["id"]: s for s in ps()}
        assert states[old["id"]]["state"] == "stopped"
        root = StatePaths.for_mode(True)
        old_exit = json.loads((root.servers / f"{old['id']}.exit.json").read_text())
        new_spawn = json.loads((root.servers / f"{new['id']}.spawn.json").read_text())
        assert old_exit["ended_wall"] < new_spawn["spawned_wall"]
        assert server_pids(old["id"]) == []
    finally:
        dd("down", "--all", "--grace", "5")


def test_switch_without_yes_needs_confirmation():
    old = up("qwen3.6-27b", "-l", "tp1", "--port", str(free_port()))
    try:
        result = dd("switch", "kimi-k2.6", "--port", str(free_port()))
        assert result.returncode == 2
        assert f"switching stops {old['id']}" in result.stderr
        assert "--yes" in result.stderr
        assert {s["id"]: s["state"] for s in ps()}[old["id"]] == "ready"
    finally:
        dd("down", "--all", "--grace", "5")


@pytest.mark.parametrize(
    ("fault", "kind", "words"),
    [
        ("crash-at-load:oom", "cuda-oom", "CUDA out of memory: tried to allocate 2.50 GiB, GPU 0"),
        ("crash-at-load:nccl", "nccl", "NCCL error"),
        ("crash-at-load:import", "import-error", "Python import or version mismatch"),
        ("crash-at-load:notfound", "model-not-found", "model not found or hub unreachable"),
        ("crash-at-load:badflag", "bad-flag", "unknown or invalid flag: unrecognized arguments"),
    ],
)
def test_startup_faults_are_classified(fault: str, kind: str, words: str):
    result = dd(
        "up",
        "qwen3.6-27b",
        "-l",
        "tp1",
        "--port",
        str(free_port()),
        "--json",
        env={"DDCONSOLE_SIM_FAULT": fault},
    )
    assert result.returncode == 1
    status = json.loads(result.stdout)
    assert status["state"] == "failed"
    assert status["failure_kind"] == kind
    assert words in status["reason"]
    assert "FAILED:" in result.stderr
    listed = {s["id"]: s for s in ps()}[status["id"]]
    assert listed["state"] == "failed"
    assert listed["reason"] == status["reason"]
    logs = dd("logs", status["id"], check=True)
    assert logs.stdout.startswith(f"== {status['id']} failed: {status['reason']}")
    dd("down", status["id"], check=True)
    assert status["id"] not in {s["id"] for s in ps()}


def test_port_taken_during_load_is_classified():
    port = free_port()
    result = dd(
        "up",
        "qwen3.6-27b",
        "-l",
        "tp1",
        "--port",
        str(port),
        "--no-wait",
        "--json",
        env={"DDCONSOLE_SIM_SPEED": "1"},
    )
    assert result.returncode == 0
    server_id = json.loads(result.stdout)["id"]
    with socket.socket() as thief:
        thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        thief.bind(("127.0.0.1", port))
        thief.listen()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = {s["id"]: s for s in ps()}[server_id]
            if state["state"] == "failed":
                break
            time.sleep(0.3)
    assert state["failure_kind"] == "port-in-use"
    assert state["reason"] == f"port already in use: 127.0.0.1:{port}"


def test_crash_after_ready_noticed_within_a_second():
    status = up(
        "qwen3.6-27b",
        "-l",
        "tp1",
        "--port",
        str(free_port()),
        env={"DDCONSOLE_SIM_FAULT": "crash-mid-stream:8"},
    )
    from console.cli.services import Services

    manager = Services.create(demo=True).manager()
    with (
        pytest.raises(httpx.HTTPError),
        httpx.stream(
            "POST",
            f"{status['url']}/generate",
            timeout=10,
            json={
                "input_ids": [1] * 4,
                "stream": True,
                "sampling_params": {"max_new_tokens": 100, "ignore_eos": True},
            },
        ) as response,
    ):
        for _ in response.iter_lines():
            pass
    broken = time.monotonic()
    while manager.status(status["id"], probe=False).state.value != "failed":
        assert time.monotonic() - broken < 1.0
        time.sleep(0.05)
    failed = manager.status(status["id"], probe=False)
    assert failed.failure is not None
    assert failed.failure.kind == "cuda-error"
    assert "illegal memory access" in (failed.reason or "")
    assert server_pids(status["id"]) == []


def test_hung_server_is_unresponsive_and_down_escalates():
    status = up(
        "qwen3.6-27b",
        "-l",
        "tp1",
        "--port",
        str(free_port()),
        env={"DDCONSOLE_SIM_FAULT": "hang:0.2", "DDCONSOLE_SIM_SPEED": "1"},
    )
    time.sleep(0.5)
    listed = {s["id"]: s for s in ps()}[status["id"]]
    assert listed["state"] == "unresponsive"
    assert "timed out" in listed["reason"]
    down = dd("down", status["id"], "--grace", "1.5", check=True)
    assert "SIGTERM, then SIGKILL" in down.stdout
    assert server_pids(status["id"]) == []
    assert {s["id"]: s for s in ps()}[status["id"]]["state"] == "stopped"


def test_console_killed_while_waiting_then_a_new_console_takes_over():
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "up", "kimi-k2.6", "--port", str(free_port()), "--demo"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": "4"},
    )
    root = StatePaths.for_mode(True)
    deadline = time.monotonic() + 20
    while not list(root.servers.glob("*.spawn.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        servers = ps()
        if servers and servers[0]["state"] == "ready":
            break
        time.sleep(0.2)
    assert servers[0]["state"] == "ready"
    server_id = servers[0]["id"]
    dd("down", server_id, "--grace", "5", check=True)
    assert server_pids(server_id) == []


@pytest.mark.parametrize(
    ("layout", "orphans"),
    [
        ("tp4", 5),  # four schedulers and the detokenizer
        ("dp2tp2", 6),  # plus the DP controller that started the schedulers
    ],
)
def test_orphaned_schedulers_are_found_and_removed(user_profiles: Path, layout: str, orphans: int):
    """sglang 0.5.23 srt/entrypoints/engine.py:909-987: the leader starts the schedulers
    (the DP controller does when dp > 1) and the detokenizer; without PDEATHSIG (the
    `orphans` fault) they outlive a killed leader, keep its session and hold the GPUs."""
    shipped = (REPO / "profiles" / "qwen3.6-27b.toml").read_text()
    (user_profiles / "qwen3.6-27b.toml").write_text(
        shipped + "\n[layouts.dp2tp2]\ntp = 2\ndp = 2\ngpus = [0, 1, 2, 3]\n"
    )
    status = up(
        "qwen3.6-27b",
        "-l",
        layout,
        "--port",
        str(free_port()),
        env={"DDCONSOLE_SIM_FAULT": "orphans"},
    )
    gpus = SimulatedGpuBackend(StatePaths.for_mode(True).sim_gpu)
    os.kill(status["pid"], signal.SIGKILL)
    want = f"killed by SIGKILL; {orphans} of its processes still running"
    deadline = time.monotonic() + 20
    while (listed := {s["id"]: s for s in ps()}[status["id"]])["reason"] != want:
        assert time.monotonic() < deadline, listed
        time.sleep(0.1)
    assert listed["state"] == "failed"
    assert sorted(listed["orphans"]) == session_pids(status["pid"])
    assert len(listed["orphans"]) == orphans
    held = {p.pid for gpu in (0, 1, 2, 3) for p in gpus.compute_processes(gpu)}
    assert len(held) == 4
    assert held < set(listed["orphans"])
    # The failed server no longer promises its GPUs, but its schedulers still hold them.
    blocked = dd("up", "qwen3.6-27b", "-l", "tp1", "--port", str(free_port()))
    assert blocked.returncode == 2
    (holder,) = (p.pid for p in gpus.compute_processes(0))
    title = "sglang::scheduler_TP0" if layout == "tp4" else "sglang::scheduler_DP0_TP0"
    assert f"GPU 0 is held by pid {holder} ({title}), " in blocked.stderr
    assert (
        f"GiB, left running by managed server {status['id']}: `ddconsole down {status['id']}` "
        "ends it"
    ) in blocked.stderr
    down = dd("down", status["id"], check=True)
    assert "SIGKILL to its processes" in down.stdout
    assert "GPU memory released" in down.stdout
    assert server_pids(status["id"]) == []
    assert session_pids(status["pid"]) == []
    assert all(gpus.compute_processes(gpu) == () for gpu in (0, 1, 2, 3))
    assert status["id"] not in {s["id"] for s in ps()}


def test_stale_reused_and_corrupt_state_files():
    root = StatePaths.for_mode(True).ensure()
    good = up("qwen3.6-27b", "-l", "tp1", "--port", str(free_port()))
    template = json.loads((root.servers / f"{good['id']}.json").read_text())
    dead = subprocess.Popen(["true"])
    dead.wait()
    for name, spawn in (
        ("stale-1", {"pid": dead.pid, "start_ticks": 1}),
        ("reused-1", {"pid": os.getpid(), "start_ticks": 1}),
    ):
        record = {**template, "id": name}
        (root.servers / f"{name}.json").write_text(json.dumps(record))
        (root.servers / f"{name}.spawn.json").write_text(
            json.dumps({**spawn, "waiter_pid": 1, "spawned_wall": time.time() - 60})
        )
    (root.servers / "corrupt-1.json").write_text("{ this is not json")
    try:
        table = dd("ps", check=True)
        assert "Traceback" not in table.stdout + table.stderr
        assert "corrupt-1.json: unreadable state file" in table.stdout
        listed = {s["id"]: s for s in ps()}
        assert listed[good["id"]]["state"] == "ready"
        assert listed["stale-1"]["state"] == "failed"
        assert listed["stale-1"]["reason"] == "process gone; exit status unknown"
        # Same pid, different start time: another program, treated as gone.
        assert listed["reused-1"]["state"] == "failed"
        assert is_running(os.getpid(), None)
        removed = dd("down", "corrupt-1", "stale-1", "reused-1", check=True)
        assert "state files removed" in removed.stdout
        assert {s["id"] for s in ps()} == {good["id"]}
    finally:
        dd("down", "--all", "--grace", "5")


def test_unknown_server_names_list_the_known_ones():
    result = dd("down", "nope")
    assert result.returncode == 2
    assert "no managed servers" in result.stderr
    held = up("qwen3.6-27b", "-l", "tp1", "--port", str(free_port()))
    try:
        result = dd("logs", "nope")
        assert result.returncode == 2
        assert f"servers: {held['id']}" in result.stderr
        # A unique prefix is enough.
        assert dd("logs", "qwen", "-n", "3", check=True).stdout.strip()
    finally:
        dd("down", "--all", "--grace", "5")


def _ticks(pid: int) -> int:
    info = process_info(pid)
    assert info is not None
    return info.start_ticks


# -- a stale record whose pid was reused -----------------------------------------------------

DAEMON = """
import os, sys, time
child = os.fork()
if child:
    print(child, flush=True)
    os._exit(0)
if sys.argv[1]:
    import setproctitle
    setproctitle.setproctitle(sys.argv[1])
os.close(1)
time.sleep(120)
"""


@dataclass(frozen=True)
class Daemon:
    """A process left in a session whose leader is gone: its pid `session` is no process,
    but the kernel keeps the number while the session has a member."""

    session: int
    pid: int
    start_ticks: int


def start_daemon(title: str) -> Daemon:
    """What a daemon does on a reused pid P: setsid (P leads a new session P), fork, exit.
    Its child lives on in session P with no process P."""
    env = {k: v for k, v in os.environ.items() if k != MARKER_ENV}
    leader = subprocess.Popen(
        [sys.executable, "-c", DAEMON, title],
        stdout=subprocess.PIPE,
        start_new_session=True,
        env=env,
    )
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    leader.stdout.close()
    leader.wait(timeout=10)
    deadline = time.monotonic() + 10
    while title and cmdline(child) != title:
        assert time.monotonic() < deadline, cmdline(child)
        time.sleep(0.02)
    info = process_info(child)
    assert info is not None
    assert info.sid == leader.pid
    assert process_info(leader.pid) is None
    return Daemon(leader.pid, child, info.start_ticks)


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    started: list[Daemon] = []
    yield started
    for daemon in started:
        send_signal(daemon.pid, signal.SIGKILL, daemon.start_ticks)


def write_stale(
    server_id: str,
    session: int,
    start_ticks: int,
    ended_wall: float | None,
    *,
    record: bool,
    spawned_wall: float | None = None,
) -> None:
    """The files of a server that ran as pid `session` and is gone (its exit recorded at
    `ended_wall`, or never), with a readable record or a corrupt one."""
    services = Services.create(demo=True)
    servers = services.state.ensure().servers
    if record:
        plan = make_plan(services, "qwen3.6-27b", "tp1", None, free_port())
        Records(services.state).save(
            ServerRecord(server_id, plan, str(servers / "x.log"), time.time() - 60, 1)
        )
    else:
        (servers / f"{server_id}.json").write_text("{ not json")
    spawn = {
        "pid": session,
        "start_ticks": start_ticks,
        "waiter_pid": session,
        "spawned_wall": time.time() - 1 if spawned_wall is None else spawned_wall,
    }
    (servers / f"{server_id}.spawn.json").write_text(json.dumps(spawn))
    if ended_wall is not None:
        exit_file = {"returncode": -9, "ended_wall": ended_wall}
        (servers / f"{server_id}.exit.json").write_text(json.dumps(exit_file))


def started_wall(daemon: Daemon) -> float:
    age = process_age_s(daemon.start_ticks)
    assert age is not None
    return time.time() - age


@pytest.mark.parametrize(
    ("title", "leader_started", "exited", "ours"),
    [
        # A record written before this boot: nothing of this boot is its.
        ("sglang::scheduler", -1, "previous boot", False),
        # An unrelated daemon on a reused pid: in the window, but neither SGLang's nor ours.
        ("", -1, None, False),
        # SGLang's title, started after the leader and before its recorded exit.
        ("sglang::scheduler", -1, "after", True),
        ("sglang::scheduler", -1, None, True),
        # Started before the recorded leader did: another process's session.
        ("sglang::scheduler", +1, None, False),
        # Started after the leader's recorded exit: the pid was reused since.
        ("sglang::scheduler", -1, "before", False),
        # No recorded start time (a corrupt or old spawn file): the session is not trusted.
        ("sglang::scheduler", None, None, False),
    ],
)
def test_a_session_member_must_fit_the_leaders_lifetime(
    daemons: list[Daemon],
    title: str,
    leader_started: int | None,
    exited: str | None,
    ours: bool,
) -> None:
    """A process left in the session of a stale record's pid is the server's only when it
    started between the recorded leader's start and its recorded exit, in this boot, and
    shows SGLang's title; `leader_started` places the record's start time one tick before
    or after the daemon's."""
    daemon = start_daemon(title)
    daemons.append(daemon)
    ticks = 0 if leader_started is None else daemon.start_ticks + leader_started
    ended = {None: None, "after": time.time(), "before": started_wall(daemon) - 10}.get(exited)
    booted = time.time() - (uptime_s() or 0.0)
    spawned = booted - 60 if exited == "previous boot" else None
    write_stale("stale-1", daemon.session, ticks, ended, record=True, spawned_wall=spawned)
    manager = Services.create(demo=True).manager()
    found = [p.pid for p in manager.server_processes("stale-1")]
    assert found == ([daemon.pid] if ours else [])
    assert (daemon.pid in manager.managed_processes()) is ours


def test_down_of_a_stale_record_leaves_a_reused_session_alone(daemons: list[Daemon]) -> None:
    """The record's pid now names the session of an unrelated double-forked daemon: `ps`
    lists no orphans, `down` (readable record or corrupt one) signals nothing, and the
    daemon lives on."""
    daemon = start_daemon("")
    daemons.append(daemon)
    write_stale("stale-1", daemon.session, daemon.start_ticks - 1, None, record=True)
    write_stale("broken-1", daemon.session, daemon.start_ticks - 1, None, record=False)
    listed = {s["id"]: s for s in ps()}["stale-1"]
    assert listed["state"] == "failed"
    assert listed["orphans"] == []
    down = dd("down", "stale-1", "broken-1", check=True)
    assert "killed" not in down.stdout
    assert "SIGKILL" not in down.stdout
    assert is_running(daemon.pid, daemon.start_ticks)
