"""A run's telemetry: written by the benchmark recorder in the recording format, read back
(with the runs written before it, in `telemetry.jsonl`) by the summary's reader and the
replay, on the wall clock the run's levels are timed on."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import httpx
import pytest

from console.bench.levels import Target
from console.bench.recorder import TelemetryRecorder
from console.bench.results import CellMeta
from console.bench.rundir import RunDir
from console.bench.runmeta import RunMeta
from console.cli.cmd_snapshot import load_recording
from console.core.errors import UsageError
from console.hw.simulated import SimulatedGpuBackend
from console.telemetry import recording as recording_module
from console.telemetry.hub import TelemetryHub
from console.telemetry.keys import SourceId
from console.telemetry.recording import SUFFIX, read_recording
from console.telemetry.run_telemetry import (
    LEGACY_NAME,
    RunTelemetryWriter,
    recording_from_run,
    recording_paths,
    run_gpu_readings,
)
from console.telemetry.samples import GpuSample, ServerSample
from console.tui.replay import ReplayBackend
from tests.conftest import REPO
from tests.simproc import QWEN, running_sim
from tests.unit.test_source_id import poll

LEGACY_RUN = REPO / "tests" / "tui" / "fixtures" / "runs" / "20261129-185811-qwen-ddtree-budgets"
INTERVAL_S = 0.2


def make_run(root: Path, server_id: str, url: str) -> RunDir:
    return RunDir.create(
        root,
        "telemetry",
        RunMeta(
            fingerprint={"demo": True, "gpu_names": ["Sim GPU"] * 8},
            cells=(
                CellMeta(cell_id="qwen", server_id=server_id, url=url, gpus=(0,), profile="qwen"),
            ),
        ),
    )


async def record(run: RunDir, url: str, server_id: str, seconds: float) -> tuple[float, float]:
    """Run the bench recorder against `url` for `seconds`; the wall-clock span it ran in."""
    async with httpx.AsyncClient() as client:
        recorder = TelemetryRecorder(
            run,
            SimulatedGpuBackend(None),
            Target(url=url),
            client,
            interval_s=INTERVAL_S,
            server_id=server_id,
        )
        # The recorder's stack is the composition root's, sharing the campaign's client.
        assert isinstance(recorder.hub, TelemetryHub)
        assert recorder.hub.client is client
        started = time.time()
        await recorder.start()
        await asyncio.sleep(seconds)
        await recorder.stop()
        ended = time.time()
        assert recorder.error is None
        assert not client.is_closed
    return started, ended


def test_a_recorded_run_reads_back_from_the_recording_format(tmp_path: Path) -> None:
    with running_sim(QWEN, tmp_path, speed=10) as sim:
        server_id = "qwen-tp1-1"
        run = make_run(tmp_path / "runs", server_id, sim.url)
        first = asyncio.run(record(run, sim.url, server_id, 1.5))
        second = asyncio.run(record(run, sim.url, server_id, 1.0))
    # Each recorder (a campaign's cell) has its own file; nothing in the legacy form.
    paths = recording_paths(run.path)
    assert [p.name for p in paths] == [f"telemetry-1{SUFFIX}", f"telemetry-2{SUFFIX}"]
    assert not (run.path / LEGACY_NAME).exists()
    for path in paths:
        assert read_recording(path).damage is None

    readings = run_gpu_readings(run.path)
    assert {r.index for r in readings} == set(range(8))
    times = [r.t_wall for r in readings]
    assert times == sorted(times)
    # On the wall clock: inside the span each recorder ran in (a poll's instant is taken
    # just before it is written), from both files.
    tolerance = 0.5
    assert all(
        first[0] - tolerance <= t <= first[1] + tolerance
        or second[0] - tolerance <= t <= second[1] + tolerance
        for t in times
    )
    assert any(t <= first[1] + tolerance for t in times)
    assert any(t >= second[0] - tolerance for t in times)
    assert all(r.util_pct is not None for r in readings)

    replayed = recording_from_run(run.path)
    assert replayed.damage is None
    assert replayed.header["t0_wall"] == pytest.approx(times[0], abs=0.01)
    assert [g["index"] for g in replayed.header["topology"]["gpus"]] == list(range(8))
    assert replayed.header["topology"]["gpus"][0]["name"] == "Sim GPU"
    polls = [replayed.poll_result(f) for f in replayed.frames if f.kind == "poll"]
    samples = [s for result in polls for s in result.samples]
    served = [s for s in samples if isinstance(s, ServerSample)]
    assert served
    assert {s.source for s in served} == {SourceId.server(server_id)}
    # Whole samples are kept now, not the legacy subset.
    gpus = [s for s in samples if isinstance(s, GpuSample)]
    assert all(s.mem_total_bytes is not None and s.name for s in gpus)
    # `ddconsole replay` takes the run's folder or any of its telemetry files.
    for given in (run.path, paths[1]):
        opened = load_recording(str(given))
        assert opened.header["t0_wall"] == replayed.header["t0_wall"]
        # The same frames, after the run itself (its row, and its summary when it has one).
        assert opened.frames[0].kind == "runs"
        listed = [f for f in opened.frames if f.kind not in ("runs", "run_summary")]
        assert len(listed) == len(replayed.frames)
    with pytest.raises(UsageError, match="no run telemetry"):
        load_recording(str(tmp_path / "runs"))
    replay = ReplayBackend(replayed, runs_root=tmp_path, playing=False)
    assert [s.id for s in replay.servers()] == [server_id]
    replay.seek(replayed.duration_s)
    assert replay.store.gpu(0) is not None
    assert replay.store.server(server_id) is not None


LEGACY_KEEP = ("util_pct", "power_w", "pcie_rx_bytes_s", "pcie_tx_bytes_s")


def test_a_run_from_before_the_recording_format_still_reads(tmp_path: Path) -> None:
    rows = [
        json.loads(line)
        for line in (LEGACY_RUN / LEGACY_NAME).read_text().splitlines()
        if line.strip()
    ]
    gpu_rows = [r for r in rows if r.get("kind") == "gpu"]
    assert gpu_rows
    assert not recording_paths(LEGACY_RUN)

    readings = run_gpu_readings(LEGACY_RUN)
    assert len(readings) == len(gpu_rows)
    by_key = {(r.t_wall, r.index): r for r in readings}
    for row in gpu_rows:
        reading = by_key[(float(row["t_wall"]), int(row["index"]))]
        for name in LEGACY_KEEP:
            assert getattr(reading, name) == row.get(name)

    replayed = recording_from_run(LEGACY_RUN / LEGACY_NAME)
    assert replayed.damage is None
    first_wall = min(float(r["t_wall"]) for r in rows)
    assert replayed.header["t0_wall"] == first_wall
    polls = [replayed.poll_result(f) for f in replayed.frames if f.kind == "poll"]
    samples = [s for result in polls for s in result.samples]
    assert sum(isinstance(s, GpuSample) for s in samples) == len(gpu_rows)
    server_rows = [r for r in rows if r.get("kind") == "server" and r.get("server")]
    served = [s for s in samples if isinstance(s, ServerSample)]
    assert len(served) == len(server_rows)
    assert {s.source for s in served} == {SourceId.server(str(r["server"])) for r in server_rows}
    # The recording keeps six decimals.
    for sample, row in zip(served, server_rows, strict=True):
        assert sample.decode_tok_s == (
            None if row.get("tok_s") is None else pytest.approx(row["tok_s"], abs=1e-6)
        )


def test_a_killed_recorder_loses_at_most_the_last_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recording writer is never closed (the benchmark was killed): what was flushed
    still reads, through both readers."""
    monkeypatch.setattr(recording_module, "FLUSH_EVERY_S", 0.0)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    writer = RunTelemetryWriter(run_dir, interval_s=1.0, note="killed", demo=True)
    now = time.monotonic()
    for i in range(5):
        writer.poll(now + i, poll(now + i))
    # No close: the gzip stream has no end.
    readings = run_gpu_readings(run_dir)
    assert len(readings) == 5 * 2
    assert readings[-1].t_wall - readings[0].t_wall == pytest.approx(4.0, abs=0.01)
    replayed = recording_from_run(run_dir)
    assert replayed.damage is not None
    assert "truncated" in replayed.damage
    assert len([f for f in replayed.frames if f.kind == "poll"]) == 5
    writer.close()


def test_an_unwritable_run_folder_is_a_message_not_a_crash(tmp_path: Path) -> None:
    """The run's folder is gone and a file took its name: nothing can be created in it."""
    run_dir = tmp_path / "run"
    run_dir.write_text("not a folder")
    writer = RunTelemetryWriter(run_dir, interval_s=1.0, note="", demo=False)
    writer.poll(time.monotonic(), poll(time.monotonic()))
    writer.close()
    assert writer.error is not None
    assert "cannot write telemetry" in writer.error
    assert run_gpu_readings(run_dir) == []


def test_a_run_resumed_after_the_format_changed_reads_both_kinds(tmp_path: Path) -> None:
    """Cells recorded in telemetry.jsonl before the change and a cell resumed since (a
    recording beside it): every reading counts, in time order, and the replay has both."""
    run_dir = tmp_path / "run"
    shutil.copytree(LEGACY_RUN, run_dir)
    legacy = run_gpu_readings(run_dir)
    assert legacy
    writer = RunTelemetryWriter(run_dir, interval_s=1.0, note="resumed", demo=True)
    now = time.monotonic()
    for i in range(3):
        writer.poll(now + i, poll(now + i))
    writer.close()
    assert recording_paths(run_dir)

    both = run_gpu_readings(run_dir)
    assert len(both) == len(legacy) + 3 * 2
    assert [r.t_wall for r in both] == sorted(r.t_wall for r in both)
    assert set(legacy) <= set(both)
    replayed = recording_from_run(run_dir)
    polls = [replayed.poll_result(f) for f in replayed.frames if f.kind == "poll"]
    gpu_samples = [s for p in polls for s in p.samples if isinstance(s, GpuSample)]
    assert len(gpu_samples) == len(both)


def test_a_run_folder_replay_names_its_gpus(tmp_path: Path) -> None:
    """The fingerprint's "8x NAME" names every GPU (not one character each)."""
    replayed = recording_from_run(LEGACY_RUN)
    names = {g["name"] for g in replayed.header["topology"]["gpus"]}
    assert names == {"NVIDIA RTX PRO 6000 Blackwell Workstation Edition"}
    mixed = tmp_path / "mixed"
    shutil.copytree(LEGACY_RUN, mixed)
    meta = json.loads((mixed / "run.json").read_text())
    meta["fingerprint"]["gpu_names"] = "2x NVIDIA A100, 6x NVIDIA H200"
    (mixed / "run.json").write_text(json.dumps(meta))
    names = {g["name"] for g in recording_from_run(mixed).header["topology"]["gpus"]}
    assert names == {"GPU"}


def test_a_replayed_run_folder_lists_the_run_and_its_summary(tmp_path: Path) -> None:
    """`ddconsole replay RUN` shows the run on the Runs screen, as recorded in its folder."""
    run_dir = tmp_path / LEGACY_RUN.name
    shutil.copytree(LEGACY_RUN, run_dir)
    replay = ReplayBackend(load_recording(str(run_dir)), runs_root=tmp_path, playing=False)
    assert [row.run_id for row in replay.runs()] == [LEGACY_RUN.name]
    summary = replay.run_summary(LEGACY_RUN.name)
    assert summary is not None
    assert [c.variant for c in summary.cells] == ["off", "ddtree-b15", "ddtree-b32", "ddtree-b64"]
