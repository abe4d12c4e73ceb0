"""The flight recorder: format round trip, damage, newer schemas, retention, replay == live."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import time
from pathlib import Path

import pytest

from console.cli.services import Services
from console.server.session_recorder import SessionRecorder, server_json
from console.telemetry import recording as recording_module
from console.telemetry.keys import SourceId
from console.telemetry.recording import (
    SUFFIX,
    RecordingError,
    RecordingWriter,
    header,
    prune,
    read_recording,
)
from console.telemetry.run_telemetry import recording_from_run
from console.telemetry.samples import CostSample, GpuSample, SourceState, SourceStatus
from console.telemetry.source import PollResult
from console.tui.app import ConsoleApp
from console.tui.headless import StaticBackend
from console.tui.replay import ReplayBackend
from console.tui.widgets.chart import TimeChart
from console.tui.widgets.pane import Pane
from tests.conftest import REPO, run_cli_subprocess

FIXTURE_RUN = REPO / "tests" / "tui" / "fixtures" / "runs" / "20261129-185811-qwen-ddtree-budgets"


def gpu(t: float, util: float) -> GpuSample:
    return GpuSample(
        t_mono=t,
        source=SourceId.gpu(0),
        index=0,
        name="GPU",
        util_pct=util,
        mem_util_pct=1.5,
        mem_used_bytes=2**30,
        mem_total_bytes=2**34,
        power_w=300.0,
        power_limit_w=600.0,
        temp_c=50.0,
        sm_clock_mhz=1800.0,
        mem_clock_mhz=9000.0,
        pcie_tx_bytes_s=1e6,
        pcie_rx_bytes_s=2e6,
        pcie_gen_current=5,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
        throttle_reasons=("idle",),
        numa_node=0,
    )


def gpu_ok(t: float) -> SourceStatus:
    return SourceStatus(
        name=SourceId.gpu(0), state=SourceState.OK, last_ok_mono=t, last_poll_s=0.001
    )


def cost(t: float) -> CostSample:
    return CostSample(
        t_mono=t,
        source=SourceId.CONSOLE,
        cpu_pct=1.5,
        rss_bytes=2**26,
        poll_ms=((str(SourceId.GPUS), 0.4),),
    )


def write(path: Path, frames: int, t0: float = 100.0) -> None:
    writer = RecordingWriter(
        path, header(demo=True, topology={"gpus": [], "numa_nodes": []}, interval_s=1.0, t0_mono=t0)
    )
    for i in range(frames):
        writer.poll(
            t0 + i, PollResult([gpu(t0 + i, float(i % 100)), cost(t0 + i)], [gpu_ok(t0 + i)])
        )
        writer.flush()
    writer.close()


def test_round_trip_keeps_every_sample(tmp_path: Path):
    path = tmp_path / f"a{SUFFIX}"
    write(path, 5)
    recording = read_recording(path)
    assert recording.damage is None
    assert [f.t for f in recording.frames] == [0.0, 1.0, 2.0, 3.0, 4.0]
    result = recording.poll_result(recording.frames[3])
    assert result.samples[0] == gpu(103.0, 3.0)
    assert result.samples[1] == cost(103.0)
    assert result.statuses == [gpu_ok(103.0)]


def test_a_truncated_recording_replays_up_to_the_damage(tmp_path: Path):
    path = tmp_path / f"t{SUFFIX}"
    write(path, 200)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.6)])
    recording = read_recording(path)
    assert recording.damage is not None
    assert "truncated" in recording.damage
    assert 50 < len(recording.frames) < 200
    replay = ReplayBackend(recording, runs_root=tmp_path, playing=False)
    assert replay.message is not None
    assert "replaying up to" in replay.message
    last = recording.frames[-1].t
    sample = replay.store.gpu(0)
    assert sample is not None
    assert sample.util_pct == float(int(last) % 100)


def test_corrupted_bytes_stop_the_replay_with_a_message(tmp_path: Path):
    path = tmp_path / f"c{SUFFIX}"
    write(path, 200)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = b"\x00" * 64
    path.write_bytes(bytes(data))
    recording = read_recording(path)
    assert recording.damage is not None
    assert "corrupted" in recording.damage or "unreadable frame" in recording.damage
    assert 0 < len(recording.frames) < 200


def test_a_newer_schema_is_refused_clearly(tmp_path: Path):
    path = tmp_path / f"n{SUFFIX}"
    head = header(demo=True, topology={}, interval_s=1.0, t0_mono=0.0)
    head["schema_version"] = 99
    with gzip.open(path, "wt") as handle:
        handle.write(json.dumps(head) + "\n")
    with pytest.raises(RecordingError, match="schema 99 is newer than this ddconsole reads"):
        read_recording(path)
    result = run_cli_subprocess(
        "snapshot",
        "--out",
        str(tmp_path / "s"),
        "--from-recording",
        str(path),
        env=os.environ.copy(),
    )
    assert result.returncode == 1
    assert "newer than this ddconsole reads" in result.stderr
    assert "upgrade" in result.stderr
    not_one = tmp_path / f"x{SUFFIX}"
    not_one.write_bytes(b"plain text")
    with pytest.raises(RecordingError, match="not a ddconsole recording"):
        read_recording(not_one)


def test_retention_deletes_the_oldest_and_keeps_the_current(tmp_path: Path):
    sizes = []
    for index in range(6):
        path = tmp_path / f"s{index}{SUFFIX}"
        write(path, 300)
        os.utime(path, (1000 + index, 1000 + index))
        sizes.append(path.stat().st_size)
    limit = sum(sizes) // 2
    removed = prune(tmp_path, limit, keep=tmp_path / f"s0{SUFFIX}")
    left = sorted(p.name for p in tmp_path.glob(f"*{SUFFIX}"))
    assert f"s0{SUFFIX}" in left
    assert f"s1{SUFFIX}" not in left
    assert f"s5{SUFFIX}" in left
    assert sum((tmp_path / n).stat().st_size for n in left) <= limit + sizes[0]
    assert removed


def test_the_writer_announces_every_byte_before_it_reaches_the_file(tmp_path: Path):
    """The file grows only at a flush or at close, by exactly what `reserve` was told first
    (a keeper of a size limit can make room before the folder is over it)."""
    path = tmp_path / f"r{SUFFIX}"
    announced: list[tuple[int, int]] = []
    writer = RecordingWriter(
        path,
        header(demo=True, topology={}, interval_s=1.0, t0_mono=0.0),
        reserve=lambda size: announced.append((path.stat().st_size, size)),
    )
    grown = [path.stat().st_size]
    for i in range(3000):
        writer.poll(float(i), PollResult([gpu(float(i), float(i * 7 % 100))], [gpu_ok(float(i))]))
        if path.stat().st_size != grown[-1]:
            grown.append(path.stat().st_size)
        if i % 1000 == 999:
            writer.flush()
            grown.append(path.stat().st_size)
    writer.close()
    grown.append(path.stat().st_size)
    assert len(announced) >= 5
    # Every size the file had was announced, from the empty file on, in order.
    assert [before + size for before, size in announced] == grown
    assert [before for before, _ in announced] == [0, *grown[:-1]]
    assert read_recording(path).damage is None
    assert len(read_recording(path).frames) == 3000


ROTATIONS_DEADLINE_S = 120.0


async def test_the_session_recorder_rotates_and_stays_within_its_limit(monkeypatch, tmp_path: Path):
    """8 GPUs polled every 20 ms: many rotations; the folder never outgrows the limit, not at
    a poll nor at any write (every one is checked as it is about to be made)."""
    monkeypatch.setattr(recording_module, "FLUSH_EVERY_S", 0.2)
    services = Services.create(demo=True)
    monitor = services.monitor(interval_s=0.02)
    limit = 48 * 1024
    # A folder of its own, as the state dir's recordings/ is (tmp_path also holds the
    # isolated XDG folders).
    folder = tmp_path / "recordings"
    recorder = SessionRecorder(
        monitor, folder, demo=True, topology=services.topology(), max_bytes=limit
    )

    def folder_bytes() -> int:
        return sum(p.stat().st_size for p in folder.glob("*"))

    writes: list[int] = []
    reserve = SessionRecorder._reserve

    def checked_reserve(self: SessionRecorder, path: Path, size: int) -> None:
        reserve(self, path, size)
        writes.append(folder_bytes() + size)

    monkeypatch.setattr(SessionRecorder, "_reserve", checked_reserve)
    recorder.start()
    sizes: list[int] = []
    monitor.poller.listeners.append(lambda now, result: sizes.append(folder_bytes()))
    await monitor.start()
    # Until six files were written, however slowly a loaded machine polls (about 10 s when
    # idle); the deadline only bounds a recorder that never rotates.
    started = time.monotonic()
    deadline = started + ROTATIONS_DEADLINE_S
    while len(recorder.files) < 6 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    took = time.monotonic() - started
    await monitor.stop()
    recorder.close()
    print(f"{len(recorder.files)} files, {len(sizes)} polls in {took:.1f} s")
    left = list(folder.glob(f"*{SUFFIX}"))
    assert len(recorder.files) >= 6, f"{len(recorder.files)} files after {took:.0f} s"
    assert len(left) < len(recorder.files)
    assert recorder.files[0] not in left
    assert max(sizes) <= limit
    assert max(writes) <= limit
    assert max(writes) > limit * 3 // 4  # the folder did fill up: pruning was needed
    assert sum(p.stat().st_size for p in left) <= limit
    newest = read_recording(recorder.files[-1])
    try:
        assert newest.damage is None
        assert newest.frames
    finally:
        newest.close()


def test_a_run_directory_replays(tmp_path: Path):
    recording = recording_from_run(FIXTURE_RUN)
    assert recording.damage is None
    assert recording.duration_s > 10
    replay = ReplayBackend(recording, runs_root=tmp_path, playing=False)
    assert {s.id for s in replay.servers()} >= {"qwen3.6-27b-tp1-1", "qwen3.6-27b-tp1-2"}
    assert replay.store.window("gpu.0.util_pct").values


def frame(app: ConsoleApp) -> dict[str, str]:
    """The dashboard's visible content, with uptimes masked (they are taken at different
    instants of the watcher's poll, not from the store)."""
    screen = app.screen
    out = {f"#{p.id}": p.text.plain for p in screen.query(Pane)}
    out["#strip"] = re.sub(r"\b\d+(\.\d)?s\b|\b\d+m\d+s\b", "<up>", out["#strip"])
    for chart in screen.query(TimeChart):
        out[f"#{chart.id}"] = chart.plain
    return out


async def render_frame(backend: object) -> dict[str, str]:
    app = ConsoleApp(backend)  # type: ignore[arg-type]
    async with app.run_test(size=(160, 50)) as pilot:
        for _ in range(3):
            await pilot.pause()
            app.refresh_now()
        return frame(app)


@pytest.mark.slow
@pytest.mark.usefixtures("free_port_profiles")
async def test_a_demo_recording_replays_to_the_same_frame_as_live(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    up = run_cli_subprocess(
        "--demo",
        "up",
        "qwen3.6-27b",
        "--layout",
        "tp1",
        "--variant",
        "ddtree-b15",
        env=os.environ.copy(),
        timeout=90,
    )
    assert up.returncode == 0, up.stderr
    try:
        services = Services.create(demo=True)
        live = services.live_backend(recordings=tmp_path)
        await live.start()
        await asyncio.sleep(4)
        assert live.monitor is not None
        assert live.monitor.watcher is not None
        servers = [server_json(s) for s in live.monitor.watcher.current]
        await live.stop()
        path = next(tmp_path.glob(f"*{SUFFIX}"))
        recording = read_recording(path)
        assert recording.damage is None
        instant = recording.t0 + recording.duration_s
        frozen_live = StaticBackend(
            store=live.store,
            now_mono=instant,
            servers=servers,
            topology=services.topology(),
            runs_root=services.state.runs,
            demo=True,
        )
        replayed = ReplayBackend(recording, runs_root=services.state.runs, playing=False)
        assert replayed.now() == pytest.approx(instant)
        live_frame = await render_frame(frozen_live)
        replay_frame = await render_frame(replayed)
        assert "qwen3.6-27b-tp1-1" in live_frame["#strip"]
        assert "no data" not in live_frame["#chart-gpu"]
        assert live_frame == replay_frame
    finally:
        run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=os.environ.copy())


@pytest.mark.slow
def test_record_cli_then_snapshot_of_an_instant(tmp_path: Path):
    out = tmp_path / f"rec{SUFFIX}"
    result = run_cli_subprocess(
        "--demo",
        "record",
        "--duration",
        "3",
        "--out",
        str(out),
        "--json",
        env=os.environ.copy(),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["files"] == [str(out)]
    assert summary["bytes"] > 0
    recording = read_recording(out)
    assert recording.damage is None
    assert recording.duration_s >= 1.5
    snap = run_cli_subprocess(
        "snapshot",
        "--from-recording",
        str(out),
        "--at",
        "1.0",
        "--out",
        str(tmp_path / "s"),
        "--format",
        "json,svg",
        env=os.environ.copy(),
    )
    assert snap.returncode == 0, snap.stderr
    document = json.loads((tmp_path / "s" / "snapshot.json").read_text())
    assert document["source"].endswith("at 1.0 s")
    assert document["reading"]["gpus"]
    assert all(p[0] <= 0 for series in document["history"]["series"].values() for p in series)
    beyond = run_cli_subprocess(
        "snapshot",
        "--from-recording",
        str(out),
        "--at",
        "99",
        "--out",
        str(tmp_path / "t"),
        env=os.environ.copy(),
    )
    assert beyond.returncode == 2
    assert "the recording covers 0 to" in beyond.stderr
