"""Immutable readings: a monotonic timestamp, the source, typed fields with units in names.

`None` wherever a value is unavailable (unsupported, failed, not yet rated). Every record is
keyword-only: a field added anywhere cannot shift the others' values at a construction site.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, ClassVar, NamedTuple

from console.telemetry.keys import SourceId
from console.telemetry.quantile import Quantile


class SourceState(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    """Answering, but part of what it said was unusable (NaN, a missing series)."""
    STALE = "stale"
    """No fresh reading for several intervals."""
    STALLED = "stalled"
    """A call is still running past its deadline; ticks are skipped until it returns."""
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceStatus:
    name: SourceId
    state: SourceState
    reason: str | None = None
    last_ok_mono: float | None = None
    last_poll_s: float | None = None
    """How long the last poll took (the source's share of the console's cost)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": str(self.name),
            "state": self.state.value,
            "reason": self.reason,
            "last_poll_ms": None if self.last_poll_s is None else self.last_poll_s * 1000,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSample:
    SERIES: ClassVar[tuple[str, ...]] = (
        "util_pct",
        "mem_used_bytes",
        "power_w",
        "pcie_rx_bytes_s",
        "pcie_tx_bytes_s",
    )
    """The fields charted over time (the dashboard, snapshots' history); the rest, static
    facts among them, are read from the latest sample."""

    t_mono: float
    source: SourceId
    index: int
    name: str | None
    util_pct: float | None
    mem_util_pct: float | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    power_w: float | None
    power_limit_w: float | None
    temp_c: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    pcie_tx_bytes_s: float | None
    pcie_rx_bytes_s: float | None
    pcie_gen_current: int | None
    pcie_gen_max: int | None
    pcie_width_current: int | None
    pcie_width_max: int | None
    throttle_reasons: tuple[str, ...] | None
    numa_node: int | None

    @property
    def link_narrowed(self) -> bool:
        """The PCIe link runs on fewer lanes than it has now (a generation drop at idle is
        normal power saving, not this)."""
        return (
            self.pcie_width_current is not None
            and self.pcie_width_max is not None
            and self.pcie_width_current < self.pcie_width_max
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class NumaLoad:
    node: int
    cpu_pct: float | None
    cpus: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Binding:
    """Where a server's schedulers may run (the layout truth) vs where they should. Only the
    schedulers are measured: SGLang NUMA-binds them alone (sglang 0.5.23
    srt/utils/numa_utils.py:28-68); its leader and detokenizer may run on every CPU."""

    server_id: str
    intended_nodes: tuple[int, ...]
    actual_nodes: tuple[int, ...]
    actual_cpus: int
    processes: int
    """How many scheduler processes were measured."""

    @property
    def matches(self) -> bool:
        return set(self.actual_nodes) <= set(self.intended_nodes)


@dataclass(frozen=True, slots=True, kw_only=True)
class HostSample:
    SERIES: ClassVar[tuple[str, ...]] = ("cpu_pct",)
    """Charted over time, with each NUMA node's CPU share (kept by the poller)."""

    t_mono: float
    source: SourceId
    cpu_pct: float | None
    numa: tuple[NumaLoad, ...]
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    load1: float | None
    load5: float | None
    load15: float | None
    bindings: tuple[Binding, ...]


class RankFigures(NamedTuple):
    """One DP rank's scheduler figures (its `dp_rank`-labelled series). A tuple, so a
    recording writes it as a plain list (console.telemetry.recording)."""

    rank: int
    decode_tok_s: float | None
    """Rate of this rank's realtime_tokens_total{mode="decode"}."""
    running: float | None
    queued: float | None
    accept_length: float | None
    """This rank's spec_accept_length gauge; None when speculative decoding is off."""


def _rank_figures(value: Any) -> RankFigures:
    """A rank's figures from a `RankFigures` or from the list a recording read back."""
    if isinstance(value, RankFigures):
        return value
    rank, tok_s, running, queued, accept = value
    return RankFigures(int(rank), tok_s, running, queued, accept)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSample:
    SERIES: ClassVar[tuple[str, ...]] = (
        "decode_tok_s",
        "accept_length",
        "running",
        "queued",
        "ttft_p50_s",
        "ttft_p99_s",
        "itl_p50_s",
        "itl_p99_s",
    )
    """The fields charted over time (the dashboard, snapshots' history)."""

    t_mono: float
    source: SourceId
    server_id: str
    decode_tok_s: float | None
    """Rate of sglang:realtime_tokens_total{mode="decode"} (moves every step)."""
    finished_tok_s: float | None
    """Rate of sglang:generation_tokens_total (moves when requests finish)."""
    requests_s: float | None
    gen_throughput: float | None
    running: float | None
    queued: float | None
    token_usage: float | None
    accept_length: float | None
    accept_rate: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    e2e_p50_s: float | None
    e2e_p99_s: float | None
    spec_verify_s: float | None
    """Verify steps per second (from spec_verify_calls_total; finished requests)."""
    latency_scope: str | None = None
    """What the latency percentiles cover: `window` (the last `latency_window_s`) or
    `since_start` (every request since the server started: no window exists yet)."""
    latency_window_s: float | None = None
    latency_bounds: tuple[tuple[str, float, float | None], ...] = ()
    """(field, lower_s, upper_s) of each latency percentile's histogram bucket; upper None
    above the highest finite bound. A percentile without bounds is an exact value."""
    dp_ranks: tuple[RankFigures, ...] = ()
    """Per DP rank, in rank order, for a server whose scheduler series carry `dp_rank`
    (dp > 1); empty otherwise, and in recordings made before the field existed."""

    def __post_init__(self) -> None:
        ranks = self.dp_ranks or ()  # None: a sample built field by field with no ranks
        if (
            ranks is not self.dp_ranks
            or not isinstance(ranks, tuple)
            or not all(isinstance(r, RankFigures) for r in ranks)
        ):
            # Decoded from a recording: lists, however many (none included).
            object.__setattr__(
                self,
                "dp_ranks",
                tuple(r if isinstance(r, RankFigures) else _rank_figures(r) for r in ranks),
            )

    LATENCY: ClassVar[tuple[str, ...]] = (
        "ttft_p50_s",
        "ttft_p99_s",
        "itl_p50_s",
        "itl_p99_s",
        "e2e_p50_s",
        "e2e_p99_s",
    )

    def quantile(self, name: str) -> Quantile | None:
        """Latency percentile `name` (e.g. `ttft_p99_s`) with its bucket."""
        value = getattr(self, name)
        if value is None:
            return None
        for field_name, lower, upper in self.latency_bounds:
            if field_name == name:
                return Quantile(value_s=value, lower_s=lower, upper_s=upper)
        return Quantile.exact(value)

    def resolves(self, name: str) -> bool:
        """Whether a series field's value is a number the data supports (latency
        percentiles only when their bucket resolves them)."""
        if name not in self.LATENCY:
            return True
        found = self.quantile(name)
        return found is not None and found.resolved


@dataclass(frozen=True, slots=True, kw_only=True)
class CostSample:
    SERIES: ClassVar[tuple[str, ...]] = ("cpu_pct", "rss_bytes")
    """Charted over time, with each source's poll time (kept by the poller)."""

    t_mono: float
    source: SourceId
    cpu_pct: float | None
    """The console process's CPU time over wall time, % of one core."""
    rss_bytes: int | None
    poll_ms: tuple[tuple[str, float], ...]


Sample = GpuSample | HostSample | ServerSample | CostSample

NUMERIC = (int, float)


def series_values(sample: Sample) -> dict[str, float]:
    """The values of a sample's SERIES fields, the ones the store keeps as time series; a
    field without a value, or a latency percentile its bucket does not resolve, adds no
    point."""
    out = {}
    for name in sample.SERIES:
        value = getattr(sample, name)
        if isinstance(sample, ServerSample) and not sample.resolves(name):
            continue  # a bucket-wide percentile is no point on a chart
        if isinstance(value, NUMERIC) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def to_json(sample: Any) -> dict[str, Any]:
    return asdict(sample)
