"""SGLang servers ddconsole did not start: found by their processes, listed, never signalled
unless named with `down ID --external --yes`.

Real processes only. The stand-in SGLang below has the real process shape (sglang 0.5.23
srt/entrypoints/engine.py:956-987, start method spawn: the leader starts its schedulers, a
detokenizer and, with dp > 1, a data-parallel controller that starts the schedulers; every
child retitles itself with `setproctitle`, scheduler.py:6294, detokenizer_manager.py:551,
data_parallel_controller.py:955) and the real command lines (`python -m
sglang.launch_server ...`, the `sglang serve ...` console script). The simulator is started
by hand, as an operator would, never through ddconsole. The CLI runs as a subprocess without
--demo, with this test's own state dir.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from console.core.net import free_port
from console.hw.discover import entry_kind
from console.hw.procs import cmdline, is_running, process_info
from console.server.external import DEFAULT_HOST, DEFAULT_PORT, NO_PORT, parse_args
from console.telemetry.keys import SourceId
from tests.conftest import run_cli_subprocess
from tests.simproc import SMALL, start_sim, stop_sim, wait_ready

pytestmark = pytest.mark.slow

FAKE_LEADER = '''
"""Stand-in for SGLang's leader: its process tree and titles, /ready and nothing else."""
import ctypes, http.server, multiprocessing as mp, os, sys, time

import setproctitle


def _child(title):
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG = SIGKILL, as SGLang's children
    setproctitle.setproctitle(title)
    while True:
        time.sleep(3600)


def _title(dp_rank, tp, tp_rank):
    prefix = (f" DP{dp_rank}" if dp_rank is not None else "") + (f" TP{tp_rank}" if tp > 1 else "")
    return "sglang::scheduler" + prefix.replace(" ", "_")


def _controller(dp, tp):
    ctypes.CDLL(None).prctl(1, 9)
    setproctitle.setproctitle("sglang::data_parallel_controller")
    for d in range(dp):
        for t in range(tp):
            mp.Process(target=_child, args=(_title(d, tp, t),)).start()
    while True:
        time.sleep(3600)


def _flag(argv, name, default):
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


class _Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if os.environ.get("FAKE_SGLANG_HTTP") == "hang":
            time.sleep(3600)  # accepts, reads the request, never answers
        self.send_response(200 if self.path == "/ready" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def main(argv):
    port = int(_flag(argv, "--port", "30000"))
    tp, dp = int(_flag(argv, "--tp-size", "1")), int(_flag(argv, "--dp-size", "1"))
    mp.set_start_method("spawn")
    if dp > 1:
        mp.Process(target=_controller, args=(dp, tp)).start()
    else:
        for t in range(tp):
            mp.Process(target=_child, args=(_title(None, tp, t),)).start()
    mp.Process(target=_child, args=("sglang::detokenizer",)).start()
    if os.environ.get("FAKE_SGLANG_HTTP") == "none":
        while True:  # an embedded Engine, or a server that has not bound its port
            time.sleep(3600)
    http.server.ThreadingHTTPServer(("127.0.0.1", port), _Ready).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
'''

CONSOLE_SCRIPT = """
import sys

from sglang.launch_server import main

if __name__ == "__main__":
    main(sys.argv[2:])
"""


@pytest.fixture
def fake_sglang(tmp_path: Path) -> Path:
    """A folder holding a `sglang` package with `launch_server`, and `bin/sglang`."""
    root = tmp_path / "fake-sglang"
    (root / "sglang").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    (root / "sglang" / "launch_server.py").write_text(FAKE_LEADER)
    (root / "bin").mkdir()
    (root / "bin" / "sglang").write_text(CONSOLE_SCRIPT)
    return root


@contextlib.contextmanager
def leader(argv: list[str], fake: Path, env: dict[str, str] | None = None) -> Iterator[int]:
    """Start a server by hand (its own session, as from an operator's shell); kill it after."""
    full_env = {**os.environ, "PYTHONPATH": str(fake), **(env or {})}
    proc = subprocess.Popen(
        argv,
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield proc.pid
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def dd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI without --demo, on this test's state dir (the isolated XDG folders)."""
    return run_cli_subprocess(*args, env={**os.environ, **(env or {})})


def ps_entry(pid: int, env: dict[str, str] | None = None) -> dict[str, Any] | None:
    result = dd("ps", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return next((e for e in json.loads(result.stdout) if e.get("pid") == pid), None)


def wait_listed(
    pid: int,
    ready: Callable[[dict[str, Any]], bool],
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    entry = None
    while time.monotonic() < deadline:
        entry = ps_entry(pid, env)
        if entry is not None and ready(entry):
            return entry
        time.sleep(0.3)
    raise AssertionError(
        f"pid {pid} not listed as wanted after {timeout} s; last: {entry}; "
        + dd("ps", "--json", env=env).stdout[:3000]
    )


def titles(pids: list[int]) -> list[str]:
    return [cmdline(pid) for pid in pids]


def assert_untouched_by_down(entry: dict[str, Any]) -> None:
    """`down --all` and `down ID` (no --external) leave an external server running."""
    pid = entry["pid"]
    everything = dd("down", "--all", "--yes", "--grace", "2")
    assert everything.returncode == 0, everything.stderr
    named = dd("down", entry["id"])
    assert named.returncode == 2
    assert f"{entry['id']} is external" in named.stderr
    assert f"ddconsole down {entry['id']} --external --yes" in named.stderr
    assert "Traceback" not in named.stderr
    unconfirmed = dd("down", entry["id"], "--external")
    assert unconfirmed.returncode == 2
    assert "confirm with --yes" in unconfirmed.stderr
    time.sleep(0.5)
    assert is_running(pid, None)
    assert all(is_running(p, None) for p in entry["scheduler_pids"])


def stop_named(entry: dict[str, Any]) -> None:
    stopped = dd("down", entry["id"], "--external", "--yes", "--grace", "10", "--json")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert json.loads(stopped.stdout)[0]["result"] == "stopped"
    deadline = time.monotonic() + 10
    pids = [entry["pid"], *(p["pid"] for p in entry["processes"])]
    while time.monotonic() < deadline and any(is_running(p, None) for p in pids):
        time.sleep(0.1)
    assert not any(is_running(p, None) for p in pids)


def test_launch_server_leader_is_listed_external_and_stopped_only_when_named(
    fake_sglang: Path,
):
    port = free_port()
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", "org/m"]
    argv += ["--served-model-name", "m", "--port", str(port), "--tp-size", "2"]
    argv += ["--api-key", "sk-very-secret"]
    with leader(argv, fake_sglang) as pid:
        entry = wait_listed(pid, lambda e: e["state"] == "ready" and len(e["scheduler_pids"]) == 2)
        assert entry["external"] is True
        assert entry["id"] == f"ext-{pid}"
        assert entry["found_by"] == "launch_server"
        assert (entry["host"], entry["port"]) == ("127.0.0.1", port)
        assert (entry["model"], entry["served_model_name"]) == ("org/m", "m")
        assert entry["layout"] == "tp2"
        assert titles(entry["scheduler_pids"]) == ["sglang::scheduler_TP0", "sglang::scheduler_TP1"]
        assert "sglang::detokenizer" in [p["title"] for p in entry["processes"]]
        # Only the leader answers NVML nothing here; its schedulers' affinity gives NUMA.
        assert entry["numa_nodes"], entry
        assert "sk-very-secret" not in json.dumps(entry)
        table = dd("ps")
        assert f"ext-{pid}" in table.stdout
        assert f"127.0.0.1:{port}" in table.stdout
        assert_untouched_by_down(entry)
        stop_named(entry)


def test_sglang_serve_with_dp_controller_is_one_server(fake_sglang: Path):
    port = free_port()
    script = str(fake_sglang / "bin" / "sglang")
    argv = [sys.executable, script, "serve", "org/positional", "--dp-size", "2"]
    argv += [f"--port={port}"]
    with leader(argv, fake_sglang) as pid:
        entry = wait_listed(pid, lambda e: e["state"] == "ready" and len(e["scheduler_pids"]) == 2)
        assert entry["found_by"] == "serve"
        assert entry["model"] == "org/positional"
        assert entry["port"] == port
        assert entry["layout"] == "tp1-dp2"
        # The schedulers are the DP controller's children, listed under the leader.
        controller = next(
            p["pid"] for p in entry["processes"] if p["title"] == "sglang::data_parallel_controller"
        )
        for scheduler in entry["scheduler_pids"]:
            info = process_info(scheduler)
            assert info is not None
            assert info.ppid == controller
        assert titles(entry["scheduler_pids"]) == [
            "sglang::scheduler_DP0",
            "sglang::scheduler_DP1",
        ]
        listed = json.loads(dd("ps", "--json").stdout)
        assert [e["id"] for e in listed].count(f"ext-{pid}") == 1
        stop_named(entry)


def test_managed_servers_are_not_external(fake_sglang: Path, isolated_dirs: Path):
    """A leader carrying ddconsole's marker (any state dir's), or named by a spawn record of
    this state dir, is ddconsole's own: only the third, started by hand, is external."""
    base = [sys.executable, "-m", "sglang.launch_server", "--model-path", "org/m", "--port"]
    servers = isolated_dirs / "xdg_state_home" / "ddconsole" / "servers"
    servers.mkdir(parents=True, exist_ok=True)
    with (
        leader(
            [*base, str(free_port())],
            fake_sglang,
            env={"DDCONSOLE_SERVER": "/elsewhere:qwen-tp1-1"},
        ) as marked,
        leader([*base, str(free_port())], fake_sglang) as recorded,
        leader([*base, str(free_port())], fake_sglang) as by_hand,
    ):
        (servers / "qwen-tp1-9.spawn.json").write_text(
            json.dumps({"pid": recorded, "start_ticks": 0, "waiter_pid": 1, "spawned_wall": 0})
        )
        wait_listed(by_hand, lambda e: e["state"] == "ready" and len(e["scheduler_pids"]) == 1)
        for pid in (marked, recorded):
            assert len([c for c in _children(pid) if cmdline(c).startswith("sglang::")]) == 2
        pids = {e.get("pid") for e in json.loads(dd("ps", "--json").stdout)}
        assert by_hand in pids
        assert marked not in pids
        assert recorded not in pids


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def test_argv_defaults_and_forms():
    """SGLang's defaults when argv names no host or port (sglang 0.5.23
    srt/arg_groups/fields/serving.py:65-66), its aliases, and the entry forms."""
    assert (DEFAULT_HOST, DEFAULT_PORT) == ("127.0.0.1", 30000)
    assert parse_args(["python", "-m", "sglang.launch_server", "--model", "a/b"], "x") == {
        "model_path": "a/b"
    }
    assert parse_args(
        ["sglang", "serve", "--model-type", "llm", "a/b", "--tensor-parallel-size=4"], "serve"
    ) == {"model_path": "a/b", "tp_size": "4"}
    assert parse_args(["sglang", "serve", "--model-type=llm", "a/b"], "serve") == {
        "model_path": "a/b"
    }
    assert parse_args(["sglang", "serve", "--port", "1", "a/b"], "serve") == {"port": "1"}
    assert entry_kind(("python3", "-m", "sglang.launch_server", "--port", "1")) == "launch_server"
    assert entry_kind(("/venv/bin/python", "/venv/bin/sglang", "serve", "m")) == "serve"
    assert entry_kind(("python", "-m", "sglang_router.launch_server")) is None
    assert entry_kind(("grep", "sglang.launch_server")) is None
    assert entry_kind(("vim", "/src/sglang/launch_server.py")) is None
    assert entry_kind(("python", "/src/sglang/launch_server.py")) == "launch_server"
    assert entry_kind(("uv", "run", "python", "-u", "-m", "sglang.launch_server")) == (
        "launch_server"
    )


def test_hand_started_simulator_is_external_and_left_alone(tmp_path: Path):
    """The acceptance line: `python -m console.sim ... --tp-size 2`, started by hand, is in
    `ps --json` as external with its port and scheduler pids; `down --all` leaves it."""
    sim = start_sim([*SMALL, "--tp-size", "2"], tmp_path=tmp_path, speed=20)
    try:
        wait_ready(sim)
        entry = wait_listed(
            sim.proc.pid, lambda e: e["state"] == "ready" and len(e["scheduler_pids"]) == 2
        )
        assert entry["external"] is True
        assert entry["port"] == sim.port
        assert entry["found_by"] == "children"
        assert titles(entry["scheduler_pids"]) == ["sglang::scheduler_TP0", "sglang::scheduler_TP1"]
        assert_untouched_by_down(entry)
        assert httpx.get(f"{sim.url}/ready", timeout=5).status_code == 200
        stop_named(entry)
        assert sim.proc.wait(timeout=10) is not None
    finally:
        stop_sim(sim)


def test_gpus_are_those_whose_processes_are_its_schedulers(tmp_path: Path):
    """An external server's GPUs: the GPU backend lists its scheduler pids there (SGLang's
    schedulers own the CUDA contexts, sglang 0.5.23 srt/managers/scheduler.py:6362). The
    simulated host's backend stands in for NVML."""
    from console.core.paths import StatePaths
    from console.hw.simload import SIM_GPU_DIR_ENV
    from console.hw.simulated import SimulatedGpuBackend
    from console.server.external import ExternalScanner
    from console.server.records import Records

    folder = tmp_path / "sim-gpu"
    folder.mkdir()
    env = {SIM_GPU_DIR_ENV: str(folder), "CUDA_VISIBLE_DEVICES": "2,3"}
    sim = start_sim([*SMALL, "--tp-size", "2"], tmp_path=tmp_path, speed=20, env=env)
    backend = SimulatedGpuBackend(folder)
    scanner = ExternalScanner(
        Records(StatePaths(tmp_path / "state")), backend, list(range(8)), probe_timeout=2
    )
    try:
        wait_ready(sim)
        deadline = time.monotonic() + 30
        found = None
        while time.monotonic() < deadline:
            listed = scanner.scan(holders=scanner.gpu_holders())
            found = next((e for e in listed if e.pid == sim.proc.pid), None)
            if found is not None and found.gpus and len(found.scheduler_pids) == 2:
                break
            time.sleep(0.2)
        assert found is not None
        assert found.gpus == (2, 3)
        holders = {p.pid for gpu in (2, 3) for p in backend.compute_processes(gpu)}
        assert holders == set(found.scheduler_pids)
        assert found.state == "ready"
    finally:
        scanner.close()
        stop_sim(sim)


def _load(url: str, stop: threading.Event) -> None:
    """Keep the simulator decoding so its throughput is above zero."""
    with httpx.Client(base_url=url, timeout=60) as client:
        while not stop.is_set():
            with contextlib.suppress(httpx.HTTPError):
                client.post(
                    "/generate",
                    json={"text": "hello", "sampling_params": {"max_new_tokens": 64}},
                )


async def test_dashboard_shows_an_external_servers_throughput(tmp_path: Path):
    from rich.console import Console
    from textual.widgets import DataTable

    from console.cli.services import Services
    from console.telemetry.samples import ServerSample
    from console.tui.app import ConsoleApp
    from console.tui.screens.dashboard import DashboardScreen
    from console.tui.screens.modals import ConfirmScreen
    from console.tui.screens.servers import server_detail
    from console.tui.widgets.pane import Pane
    from tests.tui.conftest import settle, until

    sim = start_sim([*SMALL, "--tp-size", "2"], tmp_path=tmp_path, speed=20)
    stop = threading.Event()
    loader = threading.Thread(target=_load, args=(sim.url, stop), daemon=True)
    try:
        wait_ready(sim)
        loader.start()
        server_id = f"ext-{sim.proc.pid}"
        backend = Services.create(demo=False).live_backend(recordings=None)
        app = ConsoleApp(backend)
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.press("d")
            await until(
                pilot,
                lambda: any(s.id == server_id and s.external for s in backend.servers()),
                60,
                "the external server in the list",
            )
            screen = app.screen
            assert isinstance(screen, DashboardScreen)
            screen.focused_server = server_id

            def decoding() -> bool:
                sample = backend.store.server(server_id)
                return isinstance(sample, ServerSample) and bool(sample.decode_tok_s)

            await until(pilot, decoding, 60, "the external server's tok/s")
            screen.refresh_data()
            await pilot.pause()
            now = screen.query_one("#now", Pane).text.plain
            assert server_id in now
            assert "no metrics yet" not in now
            assert "tok/s -" not in now
            strip = screen.query_one("#strip", Pane).text.plain
            assert server_id in strip
            assert "external" in strip

            # The Servers screen never stops it: `x` on its row says how instead.
            await pilot.press("s")
            await settle(pilot)
            servers = app.screen
            table = servers.query_one("#list", DataTable)
            # By its row key: other workers' simulators come and go in the same list.
            table.move_cursor(row=table.get_row_index(server_id))
            await pilot.press("x")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)
            assert sim.proc.poll() is None
            view = next(s for s in backend.servers() if s.id == server_id)
            printer = Console(width=200, record=True, file=io.StringIO())
            printer.print(server_detail(view))
            detail = printer.export_text()
            assert f"ddconsole down {server_id} --external --yes" in detail
            assert all(str(pid) in detail for pid in view.scheduler_pids)

            # Topology: no plan to compare with, the schedulers' actual nodes.
            await pilot.press("t")
            await settle(pilot)
            topology = app.screen.query_one("#topology", Pane).text.plain
            assert f"{server_id}" in topology
            assert "none (external)" in topology
    finally:
        stop.set()
        stop_sim(sim)
        loader.join(timeout=10)


async def test_a_recording_replays_the_external_server(tmp_path: Path):
    """The flight recorder keeps external servers in its server list, so a replay lists
    them as the live console did (argv secrets masked)."""
    import asyncio

    from console.cli.services import Services
    from console.telemetry.recording import SUFFIX, read_recording
    from console.tui.replay import ReplayBackend

    sim = start_sim([*SMALL, "--api-key", "sk-do-not-record"], tmp_path=tmp_path, speed=20)
    try:
        wait_ready(sim)
        server_id = f"ext-{sim.proc.pid}"
        services = Services.create(demo=False)
        live = services.live_backend(recordings=tmp_path / "rec")
        await live.start()
        try:
            deadline = time.monotonic() + 60
            while not any(s.id == server_id and s.state == "ready" for s in live.servers()):
                assert time.monotonic() < deadline, "the external server never listed ready"
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.5)
        finally:
            await live.stop()
        path = next((tmp_path / "rec").glob(f"*{SUFFIX}"))
        assert b"sk-do-not-record" not in gzip.decompress(path.read_bytes())
        replay = ReplayBackend(read_recording(path), runs_root=tmp_path, playing=False)
        replay.seek(replay.duration_s)
        (view,) = [s for s in replay.servers() if s.id == server_id]
        assert view.external
        assert view.port == sim.port
        assert "***" in view.plan["argv"]
    finally:
        stop_sim(sim)


def _wait_listening(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port} after {timeout} s")


def _wait_children(pid: int, count: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while len([c for c in _descendants(pid) if cmdline(c).startswith("sglang::")]) < count:
        assert time.monotonic() < deadline, f"pid {pid}: fewer than {count} sglang:: children"
        time.sleep(0.1)


def _descendants(pid: int) -> list[int]:
    found = _children(pid)
    for child in list(found):
        found += _descendants(child)
    return found


def test_embedded_engine_has_no_port_and_ps_works_without_nvml(
    fake_sglang: Path, tmp_path: Path
) -> None:
    """A Python process running an embedded `sglang.Engine` has SGLang's children but no HTTP
    server (sglang 0.5.23 srt/entrypoints/engine.py:248-260): found by its children with no
    --port, its port stays unknown (never SGLang's default 30000, where another server's
    /ready and /metrics would be taken for its own). Without --demo and without NVML, `ps`
    lists both servers with no GPUs and no traceback."""
    no_nvml = tmp_path / "no-nvml"
    (no_nvml / "pynvml").mkdir(parents=True)
    (no_nvml / "pynvml" / "__init__.py").write_text('raise ImportError("no NVML here")\n')
    env = {"PYTHONPATH": str(no_nvml)}
    notebook = tmp_path / "notebook.py"
    notebook.write_text(
        "from sglang.launch_server import main\n\nif __name__ == '__main__':\n    main([])\n"
    )
    port = free_port()
    serving = [sys.executable, "-m", "sglang.launch_server", "--model-path", "org/m"]
    with (
        leader([*serving, "--port", str(port)], fake_sglang) as server,
        leader(
            [sys.executable, str(notebook)], fake_sglang, env={"FAKE_SGLANG_HTTP": "none"}
        ) as engine,
    ):
        listed = wait_listed(server, lambda e: e["state"] == "ready", env=env)
        assert listed["gpus"] == []
        entry = wait_listed(engine, lambda e: len(e["scheduler_pids"]) == 1, env=env)
        assert entry["found_by"] == "children"
        assert (entry["port"], entry["url"]) == (None, None)
        assert entry["state"] == "running"
        assert entry["reason"] == NO_PORT
        assert entry["gpus"] == []
        table = dd("ps", env=env)
        assert table.returncode == 0, table.stderr
        assert "Traceback" not in table.stderr
        assert "no HTTP port" in table.stdout
        refused = dd("down", entry["id"], env=env)
        assert refused.returncode == 2
        assert "no HTTP port" in refused.stderr


HUNG_PROBE_S = 120.0
"""The hung external's /ready probe timeout: far beyond the test's wait for the managed
server's ready event, so a watcher that waited on it could not pass."""


async def test_hung_external_does_not_delay_a_managed_servers_ready_event(
    fake_sglang: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An external server that accepts /ready and never answers holds up only the external
    scan: the managed server's ready event arrives as usual. A second external, claiming
    the managed server's port without holding it, is neither probed nor polled."""
    import asyncio

    from console.cli.services import Services
    from console.server.external import ExternalScanner
    from console.server.monitor import Monitor

    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    hung_port, managed_port = free_port(), free_port()
    serving = [sys.executable, "-m", "sglang.launch_server", "--model-path", "org/m", "--port"]
    services = Services.create(demo=True)
    manager = services.manager()
    scanner = ExternalScanner(manager.records, None, probe_timeout=HUNG_PROBE_S)
    monitor = Monitor(
        manager,
        services.gpu_backend,
        services.host_backend,
        services.topology(),
        sync_interval_s=0.25,
        external_scanner=scanner,
    )
    second: Monitor | None = None
    with (
        leader([*serving, str(hung_port)], fake_sglang, env={"FAKE_SGLANG_HTTP": "hang"}) as hung,
        leader(
            [*serving, str(managed_port)], fake_sglang, env={"FAKE_SGLANG_HTTP": "none"}
        ) as squatter,
    ):
        try:
            _wait_listening(hung_port)
            await monitor.start()
            up = await asyncio.to_thread(
                run_cli_subprocess,
                *("up", "qwen3.6-27b", "-l", "tp1", "--port", str(managed_port)),
                *("--no-wait", "--json", "--demo"),
                env=os.environ.copy(),
            )
            assert up.returncode == 0, up.stdout + up.stderr
            server_id = json.loads(up.stdout)["id"]
            deadline = time.monotonic() + 60
            while not any(c.server_id == server_id and c.after == "ready" for c in monitor.changes):
                assert time.monotonic() < deadline, (
                    f"no ready event for {server_id}: {monitor.changes}"
                )
                await asyncio.sleep(0.2)
            # The scan that probes the hung server has not ended: nothing listed yet.
            assert f"ext-{hung}" not in [e.id for e in monitor.watcher.external]  # type: ignore[union-attr]

            # A console with the usual probe timeout: the hung one reads unresponsive, the
            # squatter's port is the managed server's, so only the hung one gets a source.
            _wait_children(squatter, 2)
            second = Monitor(
                services.manager(),
                services.gpu_backend,
                services.host_backend,
                services.topology(),
                external=True,
            )
            await second.sync_externals()
            listed = {e.id: e for e in second.watcher.external}  # type: ignore[union-attr]
            hung_entry, squatter_entry = listed[f"ext-{hung}"], listed[f"ext-{squatter}"]
            assert hung_entry.state == "unresponsive"
            assert any(
                c.server_id == hung_entry.id and c.after == "unresponsive" for c in second.changes
            )
            assert squatter_entry.port_holder == f"managed server {server_id}"
            assert squatter_entry.state == "running"
            assert SourceId.server(hung_entry.id) in second.poller.sources
            assert SourceId.server(squatter_entry.id) not in second.poller.sources
        finally:
            await monitor.stop()
            if second is not None:
                await second.stop()
            await asyncio.to_thread(run_cli_subprocess, "down", "--all", "--grace", "2", "--demo")


def test_a_port_held_by_another_external_is_not_its_own(fake_sglang: Path, tmp_path: Path):
    """Two servers name one --port; the one that listens there is probed, the other (its
    port held by the first, as the kernel's socket table shows) is neither probed nor
    polled."""
    from console.core.paths import StatePaths
    from console.server.external import ExternalScanner
    from console.server.records import Records

    port = free_port()
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", "org/m", "--port"]
    scanner = ExternalScanner(Records(StatePaths(tmp_path / "state")), None)
    with (
        leader([*argv, str(port)], fake_sglang) as holder,
        leader([*argv, str(port)], fake_sglang, env={"FAKE_SGLANG_HTTP": "none"}) as claimer,
    ):
        _wait_listening(port)
        _wait_children(claimer, 2)
        try:
            listed = {e.pid: e for e in scanner.scan()}
        finally:
            scanner.close()
        assert listed[holder].port_holder is None
        assert listed[holder].state == "ready"
        assert listed[claimer].port_holder == f"external ext-{holder}"
        assert listed[claimer].own_url is None
        assert listed[claimer].state == "running"
        assert listed[claimer].reason == (
            f"port {port} is held by external ext-{holder}: not probed, not polled"
        )
