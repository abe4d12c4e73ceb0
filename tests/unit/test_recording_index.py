"""A recording's index is correct: a replay that seeks in any order to an instant shows what
a replay that went there frame by frame shows (store series over the replay's history, latest
values, source states, server and run lists), however far the seek, and the spool leaves
nothing behind."""

from __future__ import annotations

import asyncio
import math
import os
import random
from pathlib import Path
from typing import Any

from console.telemetry.keys import SourceId
from console.telemetry.recording import (
    SUFFIX,
    Frames,
    RecordingWriter,
    header,
    read_recording,
)
from console.telemetry.samples import (
    CostSample,
    GpuSample,
    HostSample,
    NumaLoad,
    ServerSample,
    SourceState,
    SourceStatus,
)
from console.telemetry.source import PollResult
from console.tui.replay import ReplayBackend

HISTORY_S = 40.0
"""A short history, so that most seeks land far beyond what the store holds."""


def gpu(t: float, index: int, rng: random.Random) -> GpuSample:
    return GpuSample(
        t_mono=t,
        source=SourceId.gpu(index),
        index=index,
        name="H200",
        util_pct=round(rng.uniform(0, 100), 1) if rng.random() > 0.1 else None,
        mem_util_pct=None,
        mem_used_bytes=rng.randint(0, 10**11),
        mem_total_bytes=10**11,
        power_w=round(rng.uniform(80, 700), 1),
        power_limit_w=700.0,
        temp_c=50.0,
        sm_clock_mhz=None,
        mem_clock_mhz=None,
        pcie_tx_bytes_s=rng.uniform(0, 1e9),
        pcie_rx_bytes_s=rng.uniform(0, 1e9),
        pcie_gen_current=5,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
        throttle_reasons=(),
        numa_node=0,
    )


def server(t: float, server_id: str, rng: random.Random) -> ServerSample:
    def value() -> float:
        return round(rng.uniform(0, 10), 3)

    p50, p99 = value() + 1, value() + 1
    return ServerSample(
        t_mono=t,
        source=SourceId.server(server_id),
        server_id=server_id,
        decode_tok_s=value(),
        finished_tok_s=None,
        requests_s=None,
        gen_throughput=None,
        running=value(),
        queued=value(),
        token_usage=None,
        accept_length=value() if rng.random() > 0.2 else None,
        accept_rate=None,
        ttft_p50_s=p50,
        ttft_p99_s=p99,
        itl_p50_s=value(),
        itl_p99_s=value(),
        e2e_p50_s=None,
        e2e_p99_s=None,
        spec_verify_s=None,
        # TTFT p50 in a narrow bucket (charted), p99 in a wide one (no point) half the time.
        latency_bounds=(
            ("ttft_p50_s", p50 * 0.95, p50 * 1.05),
            ("ttft_p99_s", 0.0, 40.0) if rng.random() > 0.5 else ("ttft_p99_s", p99, p99 * 1.1),
        ),
    )


def ok(name: SourceId, t: float) -> SourceStatus:
    return SourceStatus(name=name, state=SourceState.OK, last_ok_mono=t, last_poll_s=0.01)


def write(path: Path, seconds: int) -> None:
    """Per second: a GPU frame (2 GPUs), a host frame every 3 s, server `a` throughout and
    server `b` only in the first third (a source that goes away), the console's cost; server
    and run lists now and then, events, a poll with a status only."""
    rng = random.Random(17)
    writer = RecordingWriter(path, header(demo=True, topology={}, interval_s=1.0, t0_mono=1000.0))
    for second in range(seconds):
        t = 1000.0 + second + rng.uniform(0, 0.01)
        if second % 97 == 0:
            listed = [{"id": "a", "state": "ready", "uptime_s": second}]
            if second < seconds // 3:
                listed.append({"id": "b", "state": "ready", "uptime_s": second})
            writer.servers(t, listed)
        if second % 131 == 5:
            rows = [{"run_id": f"r{second}", "status": "running", "cells": 3}]
            writer.runs(t, rows)
            writer.event(t, f"run r{second} started")
        writer.poll(t, PollResult([gpu(t, 0, rng), gpu(t, 1, rng)], [ok(SourceId.GPUS, t)]))
        if second % 3 == 0:
            host = HostSample(
                t_mono=t + 0.001,
                source=SourceId.HOST,
                cpu_pct=rng.uniform(0, 100),
                numa=(
                    NumaLoad(node=0, cpu_pct=rng.uniform(0, 100), cpus=4),
                    NumaLoad(node=1, cpu_pct=None, cpus=4),
                ),
                mem_used_bytes=1,
                mem_total_bytes=2,
                load1=None,
                load5=None,
                load15=None,
                bindings=(),
            )
            writer.poll(t + 0.001, PollResult([host], [ok(SourceId.HOST, t)]))
        writer.poll(t + 0.002, PollResult([server(t, "a", rng)], [ok(SourceId.server("a"), t)]))
        if second < seconds // 3:
            sample = server(t, "b", rng)
            writer.poll(t + 0.002, PollResult([sample], [ok(SourceId.server("b"), t)]))
        elif second == seconds // 3:
            gone = SourceStatus(name=SourceId.server("b"), state=SourceState.UNAVAILABLE)
            writer.poll(t + 0.002, PollResult([], [gone]))
        cost = CostSample(
            t_mono=t + 0.003,
            source=SourceId.CONSOLE,
            cpu_pct=1.0,
            rss_bytes=5,
            poll_ms=(("gpu", rng.uniform(1, 5)), ("host", 2.0)),
        )
        writer.poll(t + 0.003, PollResult([cost], [ok(SourceId.CONSOLE, t)]))
    writer.close()


def state(replay: ReplayBackend) -> dict[str, Any]:
    store = replay.store

    def values(key: str) -> tuple[tuple[float, ...], tuple[float | None, ...]]:
        window = store.window(key, replay.now() - HISTORY_S)
        return window.times, window.values

    # Every point of the history the replay keeps (points older than that stay in a linear
    # replay's rings only when a series had gaps; no chart reaches back that far).
    series = {key: values(key) for key in store.keys("")}
    return {
        "series": {key: points for key, points in series.items() if points[0]},
        "latest": store.latest_all(),
        "statuses": store.statuses(),
        "servers": list(replay.servers()),
        "raw_servers": replay.raw_servers(),
        "runs": replay.runs(),
        "summaries": dict(replay._state.summaries),
    }


def test_seeks_in_any_order_match_a_replay_frame_by_frame(tmp_path: Path) -> None:
    path = tmp_path / f"index{SUFFIX}"
    write(path, 1200)
    recording = read_recording(path)
    assert recording.damage is None
    assert recording.frames.is_spooled
    assert len(recording.frames) > 4000
    runs = tmp_path / "runs"
    linear = ReplayBackend(
        recording, runs_root=runs, position_s=0.0, playing=False, history_s=HISTORY_S
    )
    seeking = ReplayBackend(
        recording, runs_root=runs, position_s=0.0, playing=False, history_s=HISTORY_S
    )
    rng = random.Random(4)
    targets = sorted(rng.uniform(0, recording.duration_s) for _ in range(25))
    targets += [recording.duration_s, 0.0, 400.0, 400.5]  # the ends; the b server's end
    targets = sorted(set(targets))
    expected: dict[float, dict[str, Any]] = {}
    for target in targets:
        # Frame by frame: forward steps shorter than the history, never a rebuild.
        while linear.position_s < target:
            linear.seek(min(target, linear.position_s + 7.0))
        expected[target] = state(linear)
    assert any(len(e["series"]) == 0 for e in expected.values())  # 0: nothing yet
    # The data covers every kind of point a poll adds: NUMA loads (one always missing),
    # poll times, and latency percentiles whose bucket resolves them or not.
    final = expected[recording.duration_s]["series"]
    assert {"host.numa.0.cpu_pct", "host.numa.1.cpu_pct", "console.poll_ms.gpu"} <= set(final)
    assert 0 < len(final["server.a.ttft_p99_s"][0]) < len(final["server.a.ttft_p50_s"][0])
    assert any(SourceId.server("b") in e["statuses"] for e in expected.values())
    shuffled = list(targets)
    rng.shuffle(shuffled)
    for target in [*shuffled, recording.duration_s, 3.0]:
        seeking.seek(target)
        got = state(seeking)
        want = expected.get(target)
        if want is None:
            continue
        assert got["series"].keys() == want["series"].keys(), target
        for key, (times, values) in want["series"].items():
            got_times, got_values = got["series"][key]
            assert got_times == times, (target, key)
            assert [v if v is None or not math.isnan(v) else None for v in got_values] == [
                v if v is None or not math.isnan(v) else None for v in values
            ], (target, key)
        for name in ("latest", "statuses", "servers", "raw_servers", "runs", "summaries"):
            assert got[name] == want[name], (target, name)


def test_frames_read_back_and_the_spool_is_gone_when_closed(tmp_path: Path) -> None:
    path = tmp_path / f"small{SUFFIX}"
    write(path, 60)
    recording = read_recording(path)
    frames = recording.frames
    assert frames.is_spooled
    as_list = list(frames)
    assert [f.t for f in as_list] == [frames.t_at(i) for i in range(len(frames))]
    assert [f.kind for f in as_list] == [frames.kind_at(i) for i in range(len(frames))]
    assert frames[-1] == as_list[-1]
    assert frames[2:5] == as_list[2:5]
    assert frames == as_list
    assert [i for i, f in enumerate(as_list) if f.kind == "poll"] == list(frames.indices("poll"))
    fd = frames._fd
    assert fd is not None
    os.fstat(fd)  # open, though no name in any folder
    recording.close()
    assert len(frames) == 0
    try:
        os.fstat(fd)
        closed = False
    except OSError:
        closed = True
    assert closed
    # Built in memory (a run's telemetry): changing it works as a list does.
    built = Frames(as_list[:3])
    built[:0] = as_list[3:4]
    built.append(as_list[4])
    built.sort(key=lambda f: f.t)
    assert [f.t for f in built] == sorted(f.t for f in as_list[:5])


def test_step_moves_to_the_neighbouring_poll_instants(tmp_path: Path) -> None:
    path = tmp_path / f"step{SUFFIX}"
    write(path, 90)
    recording = read_recording(path)
    times = sorted({f.t for f in recording.frames if f.kind == "poll"})
    replay = ReplayBackend(recording, runs_root=tmp_path, position_s=30.5, playing=False)
    replay.step(1)
    assert replay.position_s == min(t for t in times if t > 30.5)
    replay.step(3)
    assert replay.position_s == times[times.index(min(t for t in times if t > 30.5)) + 3]
    replay.step(-2)
    assert replay.position_s == times[times.index(min(t for t in times if t > 30.5)) + 1]
    replay.seek(recording.duration_s)
    replay.step(1)
    assert replay.position_s == times[-1]
    replay.seek(0.0)
    replay.step(-1)
    assert replay.position_s == times[0]


def test_a_seek_in_the_app_rebuilds_on_a_worker_thread(tmp_path: Path) -> None:
    """With an event loop running (the app), a seek back returns at once and the screens
    keep showing the old instant until the rebuild ends; seeks made meanwhile coalesce into
    the last one; the result equals a seek done in place."""
    path = tmp_path / f"offloop{SUFFIX}"
    write(path, 600)
    recording = read_recording(path)
    runs = tmp_path / "runs"
    reference = ReplayBackend(
        recording, runs_root=runs, position_s=0.0, playing=False, history_s=HISTORY_S
    )

    async def scenario() -> tuple[bool, float, dict[str, Any], dict[str, Any]]:
        replay = ReplayBackend(recording, runs_root=runs, playing=False, history_s=HISTORY_S)
        shown_before = replay.now()
        replay.seek(100.0)
        started_in_background = replay.seeking and replay.now() == shown_before
        for target in (200.0, 50.0, 321.5):
            replay.seek(target)
        assert replay.position_s == 321.5
        await replay.settled()
        # Widening the history rebuilds at the position with the wider store.
        replay.keep_history(3 * HISTORY_S)
        assert replay.seeking
        await replay.settled()
        wide = state(replay)
        return started_in_background, replay.now() - recording.t0, state(replay), wide

    started_in_background, shown_s, got, wide = asyncio.run(scenario())
    assert started_in_background
    assert shown_s == 321.5
    reference.seek(321.5)
    want = state(reference)
    assert got["series"].keys() == want["series"].keys()
    for name in ("latest", "statuses", "servers", "raw_servers", "runs", "summaries"):
        assert got[name] == want[name], name
    wider = ReplayBackend(
        recording, runs_root=runs, position_s=321.5, playing=False, history_s=3 * HISTORY_S
    )
    gpu_key = wider.store.keys("gpu")[0]
    times = wider.store.window(gpu_key).times
    assert times[-1] - times[0] > 2 * HISTORY_S  # the wider store really holds more
    assert wide["series"] == state(wider)["series"]
