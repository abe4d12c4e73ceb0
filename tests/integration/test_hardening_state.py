"""Stopping never depends on the disk; damaged server state files degrade one server (issue 17).

Real demo servers (`ddconsole up --demo`, simulator processes in their own session). A state
directory that refuses writes is made two ways: RLIMIT_FSIZE=0 in the ddconsole child (every
write of a byte fails with EFBIG, SIGXFSZ ignored), which needs no privilege, and, where this
host lets the test mount, a small tmpfs remounted read-only or filled to the last block.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from console.core.net import free_port, port_is_free
from console.core.paths import StatePaths
from console.hw.discover import Membership, member_processes
from console.hw.procs import live_processes
from console.server.manager import MARKER_ENV
from tests.conftest import REPO

PROFILE = "qwen3.6-27b"


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    dd("down", "--all", "--grace", "2")


def _no_writes() -> None:
    """preexec_fn: no file may grow past 0 bytes; the signal that would kill us is ignored."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))


def dd(
    *args: str, preexec: Callable[[], None] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args, "--demo"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=timeout,
        cwd=REPO,
        check=False,
        preexec_fn=preexec,
    )


def up(port: int) -> dict:
    result = dd("up", PROFILE, "--layout", "tp1", "--port", str(port), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    status = json.loads(result.stdout)
    assert status["state"] == "ready"
    return status


def marked_pids(server_id: str) -> list[int]:
    """Every live process that carries the server's marker or its leader's session, the
    waiter included: after a stop there must be none."""
    paths = StatePaths.for_mode(True)
    try:
        spawn = json.loads((paths.servers / f"{server_id}.spawn.json").read_text())
    except (OSError, ValueError):
        spawn = {}
    if not isinstance(spawn, dict):
        spawn = {}
    pid = spawn.get("pid") if isinstance(spawn.get("pid"), int) else None
    wanted = {
        server_id: Membership(f"{paths.root}:{server_id}", pid, int(spawn.get("start_ticks", 0)))
    }
    return [p.pid for p in member_processes(MARKER_ENV, wanted)[server_id]]


def wait_gone(server_id: str, port: int, timeout: float = 15) -> list[int]:
    deadline = time.monotonic() + timeout
    while (marked_pids(server_id) or not port_is_free(port)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return marked_pids(server_id)


# -- F1: a state dir that refuses writes ---------------------------------------------------


def test_down_stops_a_server_when_no_state_file_can_be_written():
    port = free_port()
    server = up(port)
    assert marked_pids(server["id"])
    result = dd("down", server["id"], "--grace", "5", preexec=_no_writes)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "internal error" not in result.stderr
    out = result.stdout + result.stderr
    assert "SIGTERM to pid" in out
    assert f"warning: the stop could not be recorded in {StatePaths.for_mode(True).servers}" in out
    assert "File too large" in out
    assert wait_gone(server["id"], port, timeout=5) == []
    assert port_is_free(port)


def test_up_on_a_state_dir_that_refuses_writes_is_one_line_and_starts_nothing():
    port = free_port()
    result = dd("up", PROFILE, "--layout", "tp1", "--port", str(port), preexec=_no_writes)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("ddconsole: error: not launching: cannot write the state"), lines
    assert "File too large" in lines[0]
    assert "internal error" not in result.stderr
    assert "Traceback" not in result.stderr
    assert port_is_free(port)
    assert json.loads(dd("ps", "--json").stdout) == []
    marker = str(StatePaths.for_mode(True).root)
    assert not [
        p for p in live_processes() if p.name.startswith("python") and _env_has(p.pid, marker)
    ]


def _env_has(pid: int, text: str) -> bool:
    try:
        return text.encode() in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


CELL_STOP = textwrap.dedent(
    """
    import json, sys
    from console.cli.services import Services
    from console.server.control import ManagedControl

    services = Services.create(True)
    control = ManagedControl(
        services.manager(), services.catalog, services.topology(), demo=True, stop_grace_s=5
    )
    print(json.dumps(control.stop(sys.argv[1])))
    """
)


def stop_cell(server_id: str, preexec: Callable[[], None] | None) -> list[str]:
    """A campaign cell's stop (`CampaignRunner._run_cell` → `ManagedControl.stop`), in a
    child whose writes fail; returns the warnings the campaign prints."""
    result = subprocess.run(
        [sys.executable, "-c", CELL_STOP, server_id],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=90,
        cwd=REPO,
        check=False,
        preexec_fn=preexec,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    warnings: list[str] = json.loads(result.stdout)
    return warnings


def test_a_campaign_cell_stop_stops_its_server_when_no_state_file_can_be_written():
    port = free_port()
    server = up(port)
    warnings = stop_cell(server["id"], _no_writes)
    assert any("the stop could not be recorded" in w for w in warnings), warnings
    assert wait_gone(server["id"], port, timeout=5) == []


@contextmanager
def small_tmpfs(folder: Path, size: str = "4m") -> Iterator[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> None:
    """Write until the filesystem has no block left."""
    with (folder / "filler").open("wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    for number in range(10000):  # the last fragments, and inodes for small files
        try:
            (folder / f"f{number}").write_bytes(b"x" * 512)
        except OSError:
            break


@pytest.mark.parametrize("damage", ["read-only", "full"])
@pytest.mark.parametrize("verb", ["down", "campaign-cell"])
def test_stopping_on_a_read_only_or_full_state_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str, verb: str
):
    with small_tmpfs(tmp_path / "state") as state:
        monkeypatch.setenv("XDG_STATE_HOME", str(state))
        port = free_port()
        server = up(port)
        bound = False
        try:
            if damage == "read-only":
                # The waiter keeps its log open for writing, so the tmpfs cannot be remounted
                # read-only: a read-only bind mount over the same path is what new opens see.
                subprocess.run(["mount", "--bind", str(state), str(state)], check=True)
                bound = True
                subprocess.run(["mount", "-o", "remount,bind,ro", str(state)], check=True)
            else:
                fill(state)
            if verb == "down":
                result = dd("down", "--all", "--grace", "5")
                assert result.returncode == 0, result.stdout + result.stderr
                assert "internal error" not in result.stderr
                assert "warning: the stop could not be recorded" in result.stdout
            else:
                warnings = stop_cell(server["id"], None)
                assert any("the stop could not be recorded" in w for w in warnings), warnings
            assert wait_gone(server["id"], port, timeout=5) == []
        finally:
            if bound:
                subprocess.run(["umount", str(state)], check=False)
            (state / "filler").unlink(missing_ok=True)
            dd("down", "--all", "--grace", "2")


# -- F17 / F12: damaged server state files -------------------------------------------------


def test_an_empty_spawn_record_reads_broken_and_down_sends_sigterm_first():
    port = free_port()
    server = up(port)
    servers = StatePaths.for_mode(True).servers
    spawn_file = servers / f"{server['id']}.spawn.json"
    spawn_file.write_text("")
    listed = {s["id"]: s for s in json.loads(dd("ps", "--json").stdout)}
    entry = listed[server["id"]]
    assert entry["state"] == "failed", entry
    assert "unreadable spawn record" in entry["reason"]
    assert "processes still running" in entry["reason"]
    result = dd("down", server["id"], "--grace", "10")
    assert result.returncode == 0, result.stdout + result.stderr
    sigterm = result.stdout.find("SIGTERM to")
    assert sigterm >= 0, result.stdout
    sigkill = result.stdout.find("SIGKILL")
    assert sigkill == -1 or sigkill > sigterm
    assert wait_gone(server["id"], port) == []
    assert not list(servers.glob(f"{server['id']}.*"))


@pytest.mark.parametrize("damage", ["garbage", "deep"])
def test_down_of_an_unreadable_record_stops_it_and_leaves_no_file(damage: str):
    port = free_port()
    server = up(port)
    servers = StatePaths.for_mode(True).servers
    record = servers / f"{server['id']}.json"
    text = '{"id": "trunc' if damage == "garbage" else "[" * 100_000 + "]" * 100_000
    record.write_text(text)
    listing = dd("ps")
    assert listing.returncode == 0, listing.stderr
    assert "unreadable state file" in listing.stdout + listing.stderr
    result = dd("down", "--all", "--grace", "10")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SIGTERM" in result.stdout
    assert wait_gone(server["id"], port) == []
    time.sleep(0.5)  # a waiter writing ID.exit.json late would do so by now
    assert not list(servers.glob(f"{server['id']}.*")), list(servers.iterdir())


@pytest.mark.parametrize("damage", ["read-only", "full"])
def test_up_on_a_read_only_or_full_state_filesystem_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
):
    with small_tmpfs(tmp_path / "state") as state:
        monkeypatch.setenv("XDG_STATE_HOME", str(state))
        assert dd("ps").returncode == 0  # the state dir exists, as on a used host
        (state / "ddconsole-demo" / "locks").mkdir(parents=True, exist_ok=True)
        if damage == "read-only":
            subprocess.run(["mount", "-o", "remount,ro", str(state)], check=True)
        else:
            fill(state)
        port = free_port()
        try:
            result = dd("up", PROFILE, "--layout", "tp1", "--port", str(port))
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(state)], check=False)
            (state / "filler").unlink(missing_ok=True)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "internal error" not in result.stderr
        first = result.stderr.strip().splitlines()[0]
        assert first.startswith("ddconsole: error: not launching: cannot"), result.stderr
        assert ("Read-only" if damage == "read-only" else "No space left") in first
        assert port_is_free(port)


def test_a_campaign_that_fills_the_state_disk_stops_and_leaves_no_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free_port_profiles: dict[str, int]
):
    """The probe's reproduction: a campaign writing its run into a state filesystem that
    fills up mid-level ends with a clear message, and its server does not outlive it."""
    port = free_port_profiles[PROFILE]
    spec = tmp_path / "fill.toml"
    spec.write_text(
        f'name = "fill"\nprofile = "{PROFILE}"\nlayouts = ["tp1"]\nvariants = ["off"]\n'
        "concurrency = [4]\nrequests = 1000000\ninput_len = 64\noutput_len = 64\n"
    )
    with small_tmpfs(tmp_path / "state", size="16m") as state:
        monkeypatch.setenv("XDG_STATE_HOME", str(state))
        proc = subprocess.Popen(
            [sys.executable, "-m", "console", "campaign", str(spec), "--demo"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
            cwd=REPO,
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                written = [p for p in state.rglob("requests.jsonl") if p.stat().st_size > 0]
                if written:
                    break
                time.sleep(0.2)
            assert proc.poll() is None, proc.communicate()
            assert not port_is_free(port)  # the campaign's server is up and loaded
            fill(state)
            try:
                out, err = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                pytest.fail("the campaign kept running on a full state filesystem")
            assert "Traceback" not in err
            assert "internal error" not in err
            assert proc.returncode != 0, out + err
            assert "No space left on device" in out + err
            deadline = time.monotonic() + 15
            while not port_is_free(port) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert port_is_free(port), "the campaign's server outlived it"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            (state / "filler").unlink(missing_ok=True)
            dd("down", "--all", "--grace", "2")
