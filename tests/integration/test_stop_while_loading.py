"""A stop while a campaign's server is still loading (`ddconsole runs stop RUN`, i.e. SIGTERM
to the runner) ends the campaign at once: the server it just launched is stopped ("campaign
stopped"), the cell is interrupted (not failed), the run ends `interrupted` and `--resume`
finishes it. Before, the stop waited for the server to be ready (up to half an hour for a
real model). Demo mode, free ports, a real detached runner and simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.core.net import free_port, port_is_free
from tests.conftest import REPO, run_cli_subprocess

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("free_port_profiles")]

CELL = "qwen3.6-27b/tp1/off"


@pytest.fixture(autouse=True)
def slow_load(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A simulator at real speed with the slow-start fault: its load takes about 38 s here
    (weights alone about 24 s), far longer than the stop below may take; nothing is left
    running whatever the test did."""
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "1")
    monkeypatch.setenv("DDCONSOLE_SIM_FAULT", "slow-start")
    yield
    run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=os.environ.copy())


def servers() -> list[dict[str, object]]:
    listed = run_cli_subprocess("--demo", "ps", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    found: list[dict[str, object]] = json.loads(listed.stdout)
    return found


def wait_for_loading(timeout: float = 60) -> dict[str, object]:
    """The campaign's server once its record says it is loading (launched, not ready)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        loading = [s for s in servers() if s["state"] == "loading"]
        if loading:
            return loading[0]
        time.sleep(0.2)
    raise AssertionError(f"no server loading after {timeout:.0f} s: {servers()}")


def test_runs_stop_while_the_server_loads_stops_the_campaign_and_it_resumes(
    tmp_path: Path,
) -> None:
    source = tmp_path / "one.toml"
    source.write_text(
        'name = "one"\nprofile = "qwen3.6-27b"\nlayouts = ["tp1"]\nvariants = ["off"]\n'
        "concurrency = [1]\nrequests = 4\ninput_len = 64\noutput_len = 64\n"
        f"port = {free_port()}\n"
    )
    started = run_cli_subprocess(
        "--demo", "campaign", str(source), "--detach", "--json", timeout=90
    )
    assert started.returncode == 0, started.stdout + started.stderr
    detached = json.loads(started.stdout)
    run_id, run_dir = str(detached["run_id"]), Path(str(detached["run_dir"]))
    server = wait_for_loading()
    port = int(str(server["port"]))

    # The stop is sent while the weights still load; the wait for it is shorter than what
    # is left of the load, so it only succeeds if the stop does not wait for ready.
    stopped = run_cli_subprocess(
        "--demo", "runs", "stop", run_id, "--yes", "--timeout", "20", "--json", timeout=90
    )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert json.loads(stopped.stdout)["status"] == "interrupted"

    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "interrupted"
    [cell] = meta["cells"]
    assert (cell["cell_id"], cell["status"], cell["reason"]) == (
        CELL,
        "interrupted",
        "campaign stopped",
    )
    assert not (run_dir / "levels.jsonl").exists()
    log = (run_dir / "console.log").read_text()
    assert f"{CELL}: interrupted: {server['id']}: stopped while loading" in log
    assert "FAILED" not in log

    # The server the campaign launched is stopped, by the campaign, before it was ready,
    # and its port is free.
    [after] = servers()
    assert after["id"] == server["id"]
    assert (after["state"], after["reason"]) == ("stopped", "campaign stopped")
    assert port_is_free(port)

    # Resumable: without the fault and faster, the resume runs the cell to the end.
    resumed = subprocess.run(
        [sys.executable, "-m", "console", "--demo", "campaign", str(source),
         "--resume", run_id, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": "40", "DDCONSOLE_SIM_FAULT": ""},
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads(resumed.stdout)
    assert summary["status"] == "done"
    assert [c["status"] for c in summary["cells"]] == ["done"]
