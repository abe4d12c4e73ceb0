"""Replaying a campaign's run folder tells the truth at each instant: one cell's server at a
time, stopped after its cell, and every dashboard chart with points where the header has a
figure (issue 16). The run is a real two-cell demo campaign on simulators (free ports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli.cmd_snapshot import load_recording
from console.telemetry.keys import SourceId
from console.telemetry.recording import Recording
from console.telemetry.samples import ServerSample, SourceState
from console.tui.app import ConsoleApp
from console.tui.replay import ReplayBackend
from console.tui.screens.dashboard import DashboardScreen
from console.tui.widgets.chart import TimeChart
from console.tui.widgets.pane import Pane
from tests.conftest import REPO
from tests.tui.conftest import settle, until

CAMPAIGN = (
    'name = "states"\nprofile = "qwen3.6-27b"\nlayouts = ["tp1"]\n'
    'variants = ["ddtree-b15", "ddtree-b32"]\nconcurrency = [2]\nrequests = 24\n'
    "input_len = 64\noutput_len = 128\nwarmup = 0\n"
)


def dd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": "10"},
        timeout=300,
        cwd=REPO,
        check=False,
    )


@pytest.fixture
def run_dir(tmp_path: Path, free_port_profiles: dict[str, int]) -> Iterator[Path]:
    campaign = tmp_path / "states.toml"
    campaign.write_text(CAMPAIGN)
    try:
        result = dd("campaign", str(campaign), "--demo", "--json")
        assert result.returncode == 0, result.stderr[-3000:]
        yield Path(json.loads(result.stdout)["run_dir"])
    finally:
        dd("down", "--all", "--grace", "2", "--demo")


def last_poll_of(recording: Recording, server_id: str) -> float:
    """The recording time of the last poll that read the server (a sample of it)."""
    source = SourceId.server(server_id)
    times = [
        frame.t
        for frame in recording.frames
        if frame.kind == "poll"
        and any(sample.source == source for sample in recording.poll_result(frame).samples)
    ]
    assert times, f"no poll of {server_id}"
    return times[-1]


def states(replay: ReplayBackend) -> dict[str, str]:
    return {server.id: server.state for server in replay.servers()}


async def charts_at(recording: Recording, at: float, server_id: str) -> None:
    """The dashboard at `at` focuses the ready server, and each chart has points for every
    figure its header line and the store's latest sample have."""
    replay = ReplayBackend(recording, runs_root=Path("/nonexistent"), position_s=at, playing=False)
    app = ConsoleApp(replay, mode="dashboard")
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        await until(pilot, lambda: screen.focused_server == server_id, what="the ready server")
        charts = {c.id: c for c in screen.query(TimeChart)}
        await until(pilot, lambda: all(c.draws for c in charts.values()), what="every chart drawn")
        header = screen.query_one("#now", Pane).text.plain
        sample = replay.store.server(server_id)
        assert isinstance(sample, ServerSample)
        derived = replay.store.latest_value(SourceId.server(server_id).series("decode_tok_s"))
        figures = {
            "chart-tok": ("tok/s", derived),
            "chart-accept": ("accept", sample.accept_length),
            "chart-queue": ("running", sample.running),
        }
        for chart_id, (label, value) in figures.items():
            if value is not None:
                latest = charts[chart_id].latest
                assert label in latest, f"{chart_id}: no points for {label} at {at} s ({header})"
                assert latest[label] == pytest.approx(value), chart_id
        assert sample.running is not None
        assert f"running {sample.running:.0f}" in header
        # The GPU chart: the server's GPU's utilisation, as the GPU table shows it.
        assert "util" in charts["chart-gpu"].latest, f"no GPU chart at {at} s"


async def test_a_campaign_replays_one_server_at_a_time_with_its_charts(run_dir: Path) -> None:
    meta = json.loads((run_dir / "run.json").read_text())
    first, second = (cell["server_id"] for cell in meta["cells"])
    recording = load_recording(str(run_dir))
    times = [frame.t for frame in recording.frames]
    assert times == sorted(times)
    early = last_poll_of(recording, first)
    late = last_poll_of(recording, second)
    assert early < late

    replay = ReplayBackend(recording, runs_root=run_dir.parent, position_s=early, playing=False)
    # Cell 1 runs; cell 2's server is not launched yet.
    assert states(replay) == {first: "ready"}
    replay.seek(late)
    assert states(replay) == {first: "stopped", second: "ready"}
    # After the campaign: both stopped, by the campaign, with no failure.
    replay.seek(replay.duration_s)
    assert states(replay) == {first: "stopped", second: "stopped"}
    assert all(s.reason is None for s in replay.servers())
    # Their sources are no longer polled, and say so.
    for server_id in (first, second):
        status = replay.store.status(SourceId.server(server_id))
        assert status is not None
        assert status.state == SourceState.UNAVAILABLE

    await charts_at(recording, early, first)
    await charts_at(recording, late, second)
