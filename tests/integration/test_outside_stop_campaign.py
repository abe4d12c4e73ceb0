"""A campaign whose server is stopped from outside (`ddconsole down ID` from another process)
records that cell as `interrupted: server stopped by user` and stops: the cell is not scored,
no further cell runs, no server is left. A crash keeps its own handling (test_bench.py's
crash test). Demo mode, free ports, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.core.net import free_port
from console.core.paths import StatePaths
from tests.conftest import REPO, run_cli_subprocess

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("free_port_profiles")]

OUTSIDE = "server stopped by user"


@pytest.fixture(autouse=True)
def cleanup(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=os.environ.copy())


def start_campaign(tmp_path: Path, speed: str) -> subprocess.Popen[str]:
    source = tmp_path / "two.toml"
    source.write_text(
        'name = "two"\nprofile = "qwen3.6-27b"\nlayouts = ["tp1"]\n'
        'variants = ["off", "ddtree-b15"]\nconcurrency = [2]\nrequests = 40\n'
        f"input_len = 64\noutput_len = 64\nport = {free_port()}\n"
    )
    return subprocess.Popen(
        [sys.executable, "-m", "console", "--demo", "campaign", str(source), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": speed},
    )


def servers() -> list[dict[str, object]]:
    listed = run_cli_subprocess("--demo", "ps", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    found: list[dict[str, object]] = json.loads(listed.stdout)
    return found


def wait_for(condition: object, what: str, timeout: float = 120) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"no {what} after {timeout:.0f} s")


def the_run() -> Path:
    runs = sorted(StatePaths.for_mode(True).runs.iterdir())
    assert len(runs) == 1
    return runs[0]


def down(server_id: str) -> None:
    stopped = run_cli_subprocess("--demo", "down", server_id, "--grace", "5", timeout=90)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def check_stopped_campaign(proc: subprocess.Popen[str], server_id: str) -> dict[str, object]:
    """What both cases share: exit 1 naming the cell and the cause, the first cell
    interrupted with that reason, the second never started, one server ever launched
    and none left running."""
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"campaign stopped: qwen3.6-27b/tp1/off: {OUTSIDE}; "), last
    assert "--resume" in last
    run_dir = the_run()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "interrupted"
    first, second = meta["cells"]
    assert (first["status"], first.get("reason")) == ("interrupted", OUTSIDE)
    assert second["status"] == "pending"
    launched = servers()
    assert [s["id"] for s in launched] == [server_id]
    assert launched[0]["state"] == "stopped"
    assert "ddtree-b15: launching" not in err
    # The stopper owns that server now: the campaign does not stop it a second time.
    assert f"stopping {server_id}" not in err
    summary: dict[str, object] = json.loads(out)
    return summary


def test_down_of_a_campaigns_server_mid_level_stops_the_campaign(tmp_path: Path) -> None:
    proc = start_campaign(tmp_path, speed="4")
    try:
        wait_for(
            lambda: any((p / "requests.jsonl").exists() for p in _runs()),
            "request finished",
        )
        server_id = str(servers()[0]["id"])
        down(server_id)
        summary = check_stopped_campaign(proc, server_id)
    finally:
        proc.kill()
        proc.wait()
    levels = [json.loads(x) for x in (the_run() / "levels.jsonl").read_text().splitlines()]
    assert [(lv["cell"], lv["status"], lv["error"]) for lv in levels] == [
        ("qwen3.6-27b/tp1/off", "interrupted", OUTSIDE)
    ]
    # Not scored: the level says why it ended, and it is no one's best.
    cells = summary["cells"]
    assert isinstance(cells, list)
    level = cells[0]["levels"][0]
    assert (level["status"], level["reason"]) == ("interrupted", OUTSIDE)
    assert summary["best"] == []
    assert cells[1]["levels"] == []


def test_down_of_a_campaigns_server_while_it_loads_stops_the_campaign(tmp_path: Path) -> None:
    proc = start_campaign(tmp_path, speed="1")
    try:
        wait_for(lambda: any(s["state"] in ("starting", "loading") for s in servers()), "loading")
        server_id = str(servers()[0]["id"])
        down(server_id)
        check_stopped_campaign(proc, server_id)
    finally:
        proc.kill()
        proc.wait()
    assert not (the_run() / "levels.jsonl").exists()


def _runs() -> list[Path]:
    root = StatePaths.for_mode(True).runs
    return sorted(root.iterdir()) if root.is_dir() else []
