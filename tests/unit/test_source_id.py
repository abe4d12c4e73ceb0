"""One typed source id: its text and series keys, and its round trip through the store and a
recording."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.telemetry.keys import SourceId
from console.telemetry.poller import write_result
from console.telemetry.recording import RecordingWriter, header, read_recording
from console.telemetry.samples import (
    GpuSample,
    HostSample,
    NumaLoad,
    Sample,
    ServerSample,
    SourceState,
    SourceStatus,
)
from console.telemetry.source import PollResult
from console.telemetry.store import TimeSeriesStore


def gpu(t: float, index: int, util: float) -> GpuSample:
    return GpuSample(
        t_mono=t,
        source=SourceId.gpu(index),
        index=index,
        name="GPU",
        util_pct=util,
        mem_util_pct=None,
        mem_used_bytes=2**30,
        mem_total_bytes=2**34,
        power_w=300.0,
        power_limit_w=600.0,
        temp_c=50.0,
        sm_clock_mhz=None,
        mem_clock_mhz=None,
        pcie_tx_bytes_s=1e6,
        pcie_rx_bytes_s=2e6,
        pcie_gen_current=5,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
        throttle_reasons=(),
        numa_node=0,
    )


def server(t: float, server_id: str, tok_s: float) -> ServerSample:
    return ServerSample(
        t_mono=t,
        source=SourceId.server(server_id),
        server_id=server_id,
        decode_tok_s=tok_s,
        finished_tok_s=None,
        requests_s=None,
        gen_throughput=None,
        running=1.0,
        queued=0.0,
        token_usage=None,
        accept_length=4.5,
        accept_rate=None,
        ttft_p50_s=None,
        ttft_p99_s=None,
        itl_p50_s=None,
        itl_p99_s=None,
        e2e_p50_s=None,
        e2e_p99_s=None,
        spec_verify_s=None,
    )


def host(t: float) -> HostSample:
    return HostSample(
        t_mono=t,
        source=SourceId.HOST,
        cpu_pct=12.0,
        numa=(NumaLoad(node=0, cpu_pct=20.0, cpus=8), NumaLoad(node=1, cpu_pct=4.0, cpus=8)),
        mem_used_bytes=2**33,
        mem_total_bytes=2**35,
        load1=1.0,
        load5=1.0,
        load15=1.0,
        bindings=(),
    )


def ok(source: SourceId, t: float) -> SourceStatus:
    return SourceStatus(name=source, state=SourceState.OK, last_ok_mono=t)


# A managed server, a URL-only server (host:port holds a colon) and a DP-style id.
SERVER_IDS = ("qwen3.6-27b-tp1-1", "127.0.0.1:30123", "ext-4242")


def poll(t: float) -> PollResult:
    samples: list[Sample] = [gpu(t, 0, 10.0 + t), gpu(t, 3, 90.0), host(t)]
    samples += [server(t, s, 100.0 + t) for s in SERVER_IDS]
    statuses = [ok(s.source, t) for s in samples] + [ok(SourceId.GPUS, t)]
    return PollResult(samples, statuses)


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (SourceId.gpu(0), "gpu:0"),
        (SourceId.gpu(12), "gpu:12"),
        (SourceId.GPUS, "gpu"),
        (SourceId.HOST, "host"),
        (SourceId.CONSOLE, "console"),
        (SourceId.server("qwen3.6-27b-tp1-1"), "server:qwen3.6-27b-tp1-1"),
        (SourceId.url("http://127.0.0.1:30123/"), "server:127.0.0.1:30123"),
    ],
)
def test_the_text_form_is_the_one_every_output_shows_and_parses_back(
    source: SourceId, text: str
) -> None:
    assert str(source) == text
    assert SourceId.parse(text) == source


@pytest.mark.parametrize("text", ["", "gpu:x", "disk:0", "server", "server:", "gpu0"])
def test_anything_else_is_not_a_source_id(text: str) -> None:
    with pytest.raises(ValueError, match="not a telemetry source id"):
        SourceId.parse(text)


def test_series_keys_come_from_the_id() -> None:
    assert SourceId.gpu(0).series("util_pct") == "gpu.0.util_pct"
    assert SourceId.server("s-1").series("decode_tok_s") == "server.s-1.decode_tok_s"
    assert SourceId.HOST.series("cpu_pct") == "host.cpu_pct"
    assert SourceId.gpu(2).index == 2
    assert SourceId.GPUS.index is None
    assert SourceId.server("7").index is None


def test_samples_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        SourceStatus(SourceId.HOST, SourceState.OK)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        NumaLoad(0, 1.0, 8)  # type: ignore[call-arg]


def check_store(store: TimeSeriesStore, t: float) -> None:
    assert store.gpu(0) == gpu(t, 0, 10.0 + t)
    assert store.gpu(3) is not None
    assert store.gpu(1) is None
    assert store.host() == host(t)
    for server_id in SERVER_IDS:
        sample = store.server(server_id)
        assert sample is not None
        assert sample.source == SourceId.server(server_id)
        assert store.latest_value(sample.source.series("decode_tok_s")) == 100.0 + t
    assert store.latest_value(SourceId.HOST.series("numa.1.cpu_pct")) == 4.0
    statuses = store.statuses()
    assert set(statuses) == {
        SourceId.gpu(0),
        SourceId.gpu(3),
        SourceId.GPUS,
        SourceId.HOST,
        *(SourceId.server(s) for s in SERVER_IDS),
    }
    assert all(isinstance(name, SourceId) for name in statuses)


def test_the_id_round_trips_through_the_store() -> None:
    store = TimeSeriesStore(8)
    for t in (1.0, 2.0):
        write_result(store, poll(t))
        store.commit()
    check_store(store, 2.0)
    assert store.window(SourceId.gpu(0).series("util_pct")).values == (11.0, 12.0)


def test_only_charted_fields_become_series() -> None:
    """Static facts (memory total, power limit, link maxima) are read from the latest
    sample: a ring of 3600 slots each would hold the same number."""
    store = TimeSeriesStore(8)
    write_result(store, poll(1.0))
    assert store.keys("gpu.0.") == sorted(SourceId.gpu(0).series(f) for f in GpuSample.SERIES)
    assert store.window("gpu.0.mem_total_bytes").times == ()
    assert store.keys("host.") == ["host.cpu_pct", "host.numa.0.cpu_pct", "host.numa.1.cpu_pct"]
    # A field without a value adds no point (accept_length is set, ttft is not).
    server_keys = store.keys(SourceId.server("ext-4242").series(""))
    assert server_keys == sorted(
        SourceId.server("ext-4242").series(f)
        for f in ("decode_tok_s", "running", "queued", "accept_length")
    )


def test_the_id_round_trips_through_a_recording(tmp_path: Path) -> None:
    path = tmp_path / "ids.ddrec.gz"
    writer = RecordingWriter(path, header(demo=True, topology={}, interval_s=1.0, t0_mono=100.0))
    for t in (101.0, 102.0):
        writer.poll(t, poll(t))
    writer.close()
    recording = read_recording(path)
    assert recording.damage is None
    results = [recording.poll_result(f) for f in recording.frames if f.kind == "poll"]
    assert results[-1].samples == poll(102.0).samples
    assert results[-1].statuses == poll(102.0).statuses
    store = TimeSeriesStore(8)
    for result in results:
        write_result(store, result)
    check_store(store, 102.0)
