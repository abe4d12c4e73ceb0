"""The per-DP-rank pieces on their own: the simulator's dispatcher and DP faults, the
`meta_info` rank, rank figures from /metrics text, the dashboard's rank lines, and
recordings with and without the per-rank field."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from console.sim.dispatch import Dispatcher, meta_dp_rank, slow_ranks, starved_ranks
from console.sim.options import OptionsError, parse
from console.telemetry.dp_ranks import decode_counters, rank_figures
from console.telemetry.keys import SourceId
from console.telemetry.prometheus import parse as parse_metrics
from console.telemetry.recording import (
    RecordingWriter,
    SeriesReader,
    header,
    read_recording,
)
from console.telemetry.samples import RankFigures, ServerSample
from console.telemetry.source import PollResult
from console.tui.widgets.rank_rows import rank_lines, rank_marks

QWEN = ["--model-path", "Qwen/Qwen3.6-27B"]


@dataclass
class FakeRank:
    """A DP rank's load as the dispatcher reads it."""

    rank: int
    running: list[object] = field(default_factory=list)
    waiting: list[object] = field(default_factory=list)
    used_tokens: int = 0


def test_round_robin_walks_the_ranks_and_skips_a_starved_one():
    ranks = [FakeRank(0), FakeRank(1), FakeRank(2)]
    plain = Dispatcher()
    assert [plain.pick(ranks) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    starved = Dispatcher(starved=frozenset({1}))
    assert [starved.pick(ranks) for _ in range(4)] == [0, 2, 0, 2]


def test_health_checks_keep_their_own_counter():
    """data_parallel_controller.py:846-862: a health check does not move the requests' turn."""
    ranks = [FakeRank(0), FakeRank(1)]
    dispatcher = Dispatcher()
    assert dispatcher.pick(ranks) == 0
    assert dispatcher.pick(ranks, "HEALTH_CHECK_1") == 0
    assert dispatcher.pick(ranks) == 1
    assert dispatcher.pick(ranks, "HEALTH_CHECK_2") == 1


def test_total_requests_and_total_tokens_pick_the_least_loaded_rank():
    ranks = [
        FakeRank(0, running=[1, 2], waiting=[3], used_tokens=100),
        FakeRank(1, running=[1], used_tokens=900),
    ]
    assert Dispatcher("total_requests").pick(ranks) == 1
    assert Dispatcher("total_tokens").pick(ranks) == 0


def test_dp_faults_parse_and_name_their_rank():
    options = parse([*QWEN, "--dp-size", "2", "--sim-fault", "dp-starve:1,dp-slow:0:3"])
    assert starved_ranks(options) == {1}
    assert slow_ranks(options) == {0: 3.0}
    assert slow_ranks(parse([*QWEN, "--dp-size", "2", "--sim-fault", "dp-slow:1"])) == {1: 4.0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dp-size", "2", "--sim-fault", "dp-slow"], "dp-slow needs a DP rank (dp-slow:RANK)"),
        (["--sim-fault", "dp-starve:1"], "dp-starve:1 names no rank of a server with --dp-size 1"),
        (
            ["--dp-size", "2", "--sim-fault", "dp-slow:1:x"],
            "dp-slow:1:x: the factor must be a positive number",
        ),
        (
            ["--dp-size", "2", "--sim-fault", "dp-starve:0,dp-starve:1"],
            "dp-starve cannot take every DP rank out of dispatch",
        ),
    ],
)
def test_bad_dp_faults_are_refused_with_the_flag_named(args: list[str], message: str):
    with pytest.raises(OptionsError) as refused:
        parse([*QWEN, *args])
    assert str(refused.value) == f"argument --sim-fault: {message}"


def test_load_balance_method_is_modeled():
    options = parse([*QWEN, "--dp-size", "2", "--load-balance-method", "total_requests"])
    assert "--load-balance-method" not in options.unmodeled


def test_meta_info_rank_is_null_without_a_dp_controller():
    """output_streamer.py:719-723 stamps every output with the scheduler's DP rank (None at
    dp 1), tokenizer_manager.py:2616-2617 copies it when the list is non-empty."""
    assert json.loads("{" + meta_dp_rank(0, 1)[1:] + "}") == {"dp_rank": None}
    assert json.loads("{" + meta_dp_rank(1, 2)[1:] + "}") == {"dp_rank": 1}


# The scheduler series of a dp2 server, with a dp-1-looking tokenizer series and a priority
# breakdown that must not count twice (metrics_collector.py:1417-1430).
METRICS = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0",dp_rank="0",priority=""} 3.0
sglang:num_running_reqs{model_name="m",tp_rank="0",dp_rank="0",priority="5"} 3.0
sglang:num_running_reqs{model_name="m",tp_rank="0",dp_rank="1",priority=""} 5.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",tp_rank="0",dp_rank="0",priority=""} 0.0
sglang:num_queue_reqs{model_name="m",tp_rank="0",dp_rank="1",priority=""} 2.0
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m",tp_rank="0",dp_rank="0",priority=""} 3.5
sglang:spec_accept_length{model_name="m",tp_rank="0",dp_rank="1",priority=""} 0.0
# TYPE sglang:realtime_tokens_total counter
sglang:realtime_tokens_total{model_name="m",tp_rank="0",dp_rank="0",mode="decode"} 1300.0
sglang:realtime_tokens_total{model_name="m",tp_rank="0",dp_rank="0",mode="prefill_compute"} 9.0
sglang:realtime_tokens_total{model_name="m",tp_rank="0",dp_rank="1",mode="decode"} 700.0
"""


def test_rank_figures_from_dp_rank_labelled_series():
    snapshot = parse_metrics(METRICS)
    now = decode_counters(snapshot)
    assert now == {0: 1300.0, 1: 700.0}
    figures = rank_figures(snapshot, now, {0: 1000.0, 1: 600.0}, 2.0, speculative=True)
    assert figures == (
        RankFigures(0, 150.0, 3.0, 0.0, 3.5),
        RankFigures(1, 50.0, 5.0, 2.0, None),
    )
    # The first reading has no rate yet; a dp-1 server has no ranks at all.
    assert rank_figures(snapshot, now, None, 0.0, speculative=True)[0].decode_tok_s is None
    plain = parse_metrics('sglang:num_running_reqs{model_name="m",tp_rank="0"} 3.0\n')
    assert rank_figures(plain, decode_counters(plain), None, 1.0, speculative=False) == ()


def _sample(ranks: tuple[RankFigures, ...] = ()) -> ServerSample:
    return ServerSample(
        t_mono=100.0,
        source=SourceId.server("dp2"),
        server_id="dp2",
        decode_tok_s=80.0,
        finished_tok_s=None,
        requests_s=None,
        gen_throughput=None,
        running=8.0,
        queued=0.0,
        token_usage=0.1,
        accept_length=None,
        accept_rate=None,
        ttft_p50_s=None,
        ttft_p99_s=None,
        itl_p50_s=None,
        itl_p99_s=None,
        e2e_p50_s=None,
        e2e_p99_s=None,
        spec_verify_s=None,
        dp_ranks=ranks,
    )


HEALTHY = (RankFigures(0, 60.0, 2.0, 0.0, 3.2), RankFigures(1, 58.0, 2.0, 0.0, 3.1))
SLOW = (RankFigures(0, 60.0, 2.0, 0.0, None), RankFigures(1, 20.0, 6.0, 1.0, None))
STARVED = (RankFigures(0, 90.0, 4.0, 2.0, None), RankFigures(1, 0.0, 0.0, 0.0, None))


def test_rank_marks_name_a_lagging_or_starving_rank_only():
    assert rank_marks(HEALTHY) == {}
    assert rank_marks(SLOW) == {1: "lags"}
    assert rank_marks(STARVED) == {1: "starves"}  # its peer has requests waiting
    draining = (RankFigures(0, 90.0, 4.0, 0.0, None), RankFigures(1, 0.0, 0.0, 0.0, None))
    assert rank_marks(draining) == {1: "idle"}


@pytest.mark.parametrize("width", [78, 198])
def test_rank_lines_fit_the_width(width: int):
    lines = rank_lines(_sample(SLOW), width)
    plain = [line.plain for line in lines]
    assert all(len(p) <= width for p in plain)
    assert plain[0].startswith("  dp0  tok/s 60.0 (75%)")
    assert any(p.strip().startswith("dp1") for p in plain)
    assert "lags" in "\n".join(plain)
    if width > 100:
        assert len(lines) == 2  # one line per rank when there is room
    assert rank_lines(_sample(), width) == []


def _write(path: Path, sample: ServerSample) -> None:
    writer = RecordingWriter(
        path, header(demo=True, topology={}, interval_s=1.0, t0_mono=sample.t_mono - 1)
    )
    writer.poll(sample.t_mono, PollResult([sample], []))
    writer.close()


def _poll_sample(path: Path) -> ServerSample:
    recording = read_recording(path)
    frames = [recording.frames[i] for i in range(len(recording.frames))]
    (poll,) = [f for f in frames if f.kind == "poll"]
    (sample,) = recording.poll_result(poll).samples
    assert isinstance(sample, ServerSample)
    assert SeriesReader(recording).points(poll)  # the charted series read back too
    return sample


def test_rank_figures_survive_a_recording(tmp_path: Path):
    path = tmp_path / "new.ddrec.gz"
    _write(path, _sample(SLOW))
    assert _poll_sample(path).dp_ranks == SLOW


def test_a_recording_from_before_rank_figures_still_replays(tmp_path: Path):
    """The header names each kind's fields: one written before `dp_ranks` existed has
    neither the name nor the value, and reads back with no ranks."""
    path = tmp_path / "new.ddrec.gz"
    _write(path, _sample(SLOW))
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    head = json.loads(lines[0])
    at = head["fields"]["server"].index("dp_ranks")
    del head["fields"]["server"][at]
    old_lines = [json.dumps(head)]
    for line in lines[1:]:
        frame = json.loads(line)
        for kind, values in frame.get("s", ()):
            if kind == "server":
                del values[at]
        old_lines.append(json.dumps(frame, separators=(",", ":")))
    old = tmp_path / "old.ddrec.gz"
    old.write_bytes(gzip.compress(("\n".join(old_lines) + "\n").encode()))
    sample = _poll_sample(old)
    assert sample.dp_ranks == ()
    assert sample.running == 8.0


def test_an_idle_rank_shows_no_acceptance():
    """The gauge keeps its last window after the rank goes idle (new-user trial F25)."""
    idle = (RankFigures(0, 40.0, 2.0, 0.0, 3.2), RankFigures(1, 0.0, 0.0, 0.0, 3.1))
    lines = [line.plain for line in rank_lines(_sample(idle), 198)]
    assert lines[0].endswith("accept 3.20")
    assert "accept -" in lines[1]
