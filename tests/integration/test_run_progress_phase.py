"""A campaign's progress.json says what it waits for between levels (its cell's server
launch, milestone by milestone) and carries a whole-run ETA once a request has finished
(issue 18: a trial saw 12 s of nothing while the sweep launched a server, and an ETA for the
running level only). A real detached campaign against the demo simulator."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from console.bench.listing import Progress, run_row
from console.cli.cmd_runs import _status_text
from tests.conftest import run_cli_subprocess


@pytest.mark.slow
def test_progress_shows_the_launch_and_a_run_eta(
    free_port_profiles: dict[str, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "4")
    spec = tmp_path / "two.toml"
    spec.write_text(
        'name = "two"\nprofile = "qwen3.6-27b"\nlayouts = ["tp1"]\n'
        'variants = ["off", "ddtree-b15"]\nconcurrency = [1]\nrequests = 4\n'
        "input_len = 32\noutput_len = 64\n"
    )
    started = run_cli_subprocess("campaign", str(spec), "--demo", "--detach", "--json")
    assert started.returncode == 0, started.stderr
    run_dir = Path(json.loads(started.stdout)["run_dir"])
    phases: list[str] = []
    etas: list[tuple[str | None, float]] = []
    statuses: list[str] = []
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            row = run_row(run_dir)
            progress = row.progress
            if isinstance(progress, Progress):
                if progress.phase:
                    phases.append(progress.phase)
                if progress.run_eta_s is not None:
                    etas.append((progress.cell, progress.run_eta_s))
                statuses.append(_status_text(row))
            if row.status not in ("running", "starting", "pending"):
                break
            time.sleep(0.1)
    finally:
        run_cli_subprocess("down", "--all", "--grace", "2", "--demo")
    assert row.status == "done", row
    assert any(p.startswith("launching") for p in phases), phases
    # A timed milestone (`launching qwen3.6-27b-tp1-1: weights loaded (2.0 s)`); the last one,
    # `ready`, lasts only until the first level's progress replaces it, too short to poll.
    assert any(p.startswith("launching qwen3.6-27b-tp1-") and p.endswith(" s)") for p in phases), (
        phases
    )
    assert any(status.startswith("running: launching") for status in statuses), statuses
    # The run's ETA exists once requests finish, and covers the second cell while the first
    # one runs (more than the running level's alone).
    assert any(cell == "qwen3.6-27b/tp1/off" for cell, _ in etas), etas
    assert all(eta >= 0 for _, eta in etas)
