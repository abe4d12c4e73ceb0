"""Two or more runs side by side: cells matched by profile x layout x variant and load
level, each later run's figures against the first's, the differences beyond noise marked.

Noise is estimated from the data (`noise.py`): each figure's standard error within its run,
by batch means over the level's counted requests (consecutive blocks by send time, so
requests that shared batches are not taken for independent draws). A difference from the
first run is beyond noise when it exceeds both `NOISE_Z` times the combined standard error
of the two figures and `NOISE_FLOOR` of the first run's value (a margin for what a rerun
moves that no single run shows: a server restarted, a warmer cache, a busy host). The pair
is a heuristic for run-to-run noise, not a measurement of it. Where a figure's standard
error is unknown (an imported run, a level with too few requests for the blocks, a p99 too
few requests bound) no verdict is given.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass

from console.bench.noise import MAX_BLOCKS, MIN_BLOCK_REQUESTS, MIN_BLOCKS, RunErrors
from console.bench.results import CellSummary, JsonDict, LevelSummary, RunSummary
from console.bench.tables import COLUMNS, COMPARE_METRICS
from console.core.errors import UsageError

SCHEMA_VERSION = 1
"""`runs compare --json`: 1: `runs` (label, id, name), `noise_rule`, per row `metrics`
(values, standard errors, change against the first run, whether beyond noise), `only`;
the two-run keys (`run_a`, `run_b`, `{metric}_a|_b|_delta_pct`, `only_a|b`) kept."""
NOISE_Z = 2.0
NOISE_FLOOR = 0.03
NOISE_RULE = (
    f"a change against run A is marked (*) when it exceeds both {NOISE_Z:g} x the combined "
    "standard error of the two figures and "
    f"{NOISE_FLOOR:.0%} of A's value; each standard error is the figure's within-run "
    "sampling error by batch means (the level's counted requests in "
    f"{MIN_BLOCKS}-{MAX_BLOCKS} consecutive blocks by send time), a heuristic for run-to-run "
    "noise, which no single run measures; no verdict where a standard error is unknown (no "
    f"per-request data, a level under {MIN_BLOCKS * MIN_BLOCK_REQUESTS} counted requests, "
    "too few requests for a p99): repeat the runs to see their spread"
)
LABELS = string.ascii_uppercase
HIGHER_IS_BETTER = frozenset({"output_tok_s", "accept_length"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricValues:
    """One metric of one cell and level in each run (None where a run lacks it), with the
    standard error of each figure where the run's requests gave one."""

    name: str
    values: tuple[float | None, ...]
    errors: tuple[float | None, ...] = ()

    @property
    def a(self) -> float | None:
        return self.values[0]

    @property
    def b(self) -> float | None:
        return self.values[1] if len(self.values) > 1 else None

    def change_pct(self, index: int) -> float | None:
        """Run `index` over the first in percent; None unless both are numbers and the
        first is not zero."""
        first, other = self.values[0], self.values[index]
        if first is None or other is None or not first:
            return None
        return 100.0 * (other - first) / first

    @property
    def delta_pct(self) -> float | None:
        """B over A in percent."""
        return self.change_pct(1) if len(self.values) > 1 else None

    def _error(self, index: int) -> float | None:
        return self.errors[index] if index < len(self.errors) else None

    def beyond_noise(self, index: int) -> bool | None:
        """Whether run `index` differs from the first by more than noise (`NOISE_RULE`);
        None when either figure or either standard error is unknown."""
        first, other = self.values[0], self.values[index]
        se_first, se_other = self._error(0), self._error(index)
        if first is None or other is None or se_first is None or se_other is None:
            return None
        difference = abs(other - first)
        return difference > NOISE_Z * math.hypot(se_first, se_other) and difference > (
            NOISE_FLOOR * abs(first)
        )

    def better(self, index: int) -> bool | None:
        """Whether run `index` is better than the first on this metric (None when equal or
        unknown): more tok/s and acceptance, less time."""
        first, other = self.values[0], self.values[index]
        if first is None or other is None or first == other:
            return None
        return (other > first) == (self.name in HIGHER_IS_BETTER)

    def to_json(self) -> JsonDict:
        runs = range(len(self.values))
        return {
            "values": list(self.values),
            "std_errors": [self._error(i) for i in runs],
            "change_pct": [None if i == 0 else self.change_pct(i) for i in runs],
            "beyond_noise": [None if i == 0 else self.beyond_noise(i) for i in runs],
        }


MetricPair = MetricValues
"""The two-run name of `MetricValues`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareRow:
    cell: str
    concurrency: int | None
    rate: float | None
    metrics: tuple[MetricValues, ...]

    @property
    def load(self) -> int | float | None:
        """The level's concurrency, else its rate."""
        return self.concurrency if self.concurrency is not None else self.rate

    @property
    def load_label(self) -> str:
        return str(self.concurrency) if self.rate is None else f"{self.rate:g}/s"

    def metric(self, name: str) -> MetricValues:
        return next(m for m in self.metrics if m.name == name)

    def to_json(self) -> JsonDict:
        out: JsonDict = {
            "cell": self.cell,
            "concurrency": self.load,
            "rate": self.rate,
            "load": self.load_label,
            "metrics": {m.name: m.to_json() for m in self.metrics},
        }
        for pair in self.metrics:
            out[f"{pair.name}_a"] = pair.a
            out[f"{pair.name}_b"] = pair.b
            out[f"{pair.name}_delta_pct"] = pair.delta_pct
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRef:
    label: str
    run_id: str
    name: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareResult:
    runs: tuple[RunRef, ...]
    rows: tuple[CompareRow, ...]
    only: tuple[tuple[str, tuple[str, ...]], ...]
    """(`cell @ load`, the one run label that has it) for levels no other run has."""

    @property
    def run_a(self) -> str:
        return self.runs[0].run_id

    @property
    def run_b(self) -> str:
        return self.runs[1].run_id

    def only_in(self, label: str) -> tuple[str, ...]:
        return tuple(item for item, labels in self.only if label in labels)

    @property
    def only_a(self) -> tuple[str, ...]:
        return self.only_in("A")

    @property
    def only_b(self) -> tuple[str, ...]:
        return self.only_in("B")

    @property
    def judged(self) -> bool:
        """Whether any difference could be judged against noise."""
        return any(
            m.beyond_noise(i) is not None
            for row in self.rows
            for m in row.metrics
            for i in range(1, len(m.values))
        )

    def to_json(self) -> JsonDict:
        return {
            "schema_version": SCHEMA_VERSION,
            "runs": [{"label": r.label, "run_id": r.run_id, "name": r.name} for r in self.runs],
            "run_a": self.run_a,
            "run_b": self.run_b,
            "noise_rule": {
                "text": NOISE_RULE,
                "baseline": self.runs[0].label,
                "z": NOISE_Z,
                "floor_fraction": NOISE_FLOOR,
                "std_error": {
                    "method": (
                        "batch means: the level's counted requests in k consecutive blocks "
                        f"by send time ({MIN_BLOCKS} <= k <= {MAX_BLOCKS}, at least "
                        f"{MIN_BLOCK_REQUESTS} requests each); the standard deviation of "
                        "the k block values / sqrt(k), times t(k - 1) / 1.96; never under "
                        "the independent-sample error; within-run sampling error, a "
                        "heuristic for run-to-run noise"
                    ),
                    "mean": "the block's mean",
                    "percentile": (
                        "the block's percentile; the independent-sample floor is the 95% "
                        "order-statistic interval width / (2 x 1.96), unknown (no verdict) "
                        "where the level's requests cannot bound it"
                    ),
                    "output_tok_s": (
                        "value x the relative standard error of the blocks' output tokens "
                        "over their summed E2E latencies"
                    ),
                    "min_requests": MIN_BLOCKS * MIN_BLOCK_REQUESTS,
                },
            },
            "rows": [row.to_json() for row in self.rows],
            "only": [{"level": item, "in": list(labels)} for item, labels in self.only],
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
        }


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


LevelKey = tuple[str, int | None, float | None]


def _levels(summary: RunSummary) -> dict[LevelKey, tuple[CellSummary, LevelSummary]]:
    return {
        (cell.key, level.concurrency, level.rate): (cell, level)
        for cell, level in summary.levels()
        if level.status != "interrupted"
    }


def _order(key: LevelKey) -> tuple[str, int, float, float]:
    """Closed-loop levels by concurrency, then open-loop ones by rate."""
    cell, concurrency, rate = key
    return (cell, 0 if rate is None else 1, float(concurrency or 0), rate or 0.0)


def _label(key: LevelKey) -> str:
    cell, concurrency, rate = key
    return f"{cell} @ {concurrency if rate is None else f'{rate:g}/s'}"


def compare_runs(
    *summaries: RunSummary, errors: Sequence[RunErrors] | None = None
) -> CompareResult:
    """The runs' common levels (a level two or more runs have), cell by cell as the runs
    list them, each cell's levels by load;
    `errors` (per run, `noise.run_errors`) lets differences be judged against noise."""
    if len(summaries) < 2:
        raise UsageError("compare needs two runs or more")
    if len(summaries) > len(LABELS):
        raise UsageError(f"compare takes at most {len(LABELS)} runs, not {len(summaries)}")
    tables = [_levels(summary) for summary in summaries]
    noise = list(errors or ()) + [{}] * (len(summaries) - len(errors or ()))
    # Cells in the order the runs list them (A's first), each cell's levels by load.
    first_seen = list(dict.fromkeys(key for table in tables for key in table))
    cell_rank = {cell: n for n, cell in enumerate(dict.fromkeys(k[0] for k in first_seen))}
    keys = sorted(first_seen, key=lambda k: (cell_rank[k[0]], *_order(k)[1:]))
    rows, only = [], []
    for key in keys:
        present = [i for i, table in enumerate(tables) if key in table]
        if len(present) < 2:
            only.append((_label(key), tuple(LABELS[i] for i in present)))
            continue
        metrics = []
        for name in COMPARE_METRICS:
            values: list[float | None] = []
            ses: list[float | None] = []
            for table, run_noise in zip(tables, noise, strict=True):
                found = table.get(key)
                if found is None:
                    values.append(None)
                    ses.append(None)
                    continue
                cell, level = found
                values.append(_number(COLUMNS[name].get(cell, level)))
                ses.append(run_noise.get((cell.cell_id, level.level), {}).get(name))
            metrics.append(MetricValues(name=name, values=tuple(values), errors=tuple(ses)))
        rows.append(
            CompareRow(cell=key[0], concurrency=key[1], rate=key[2], metrics=tuple(metrics))
        )
    return CompareResult(
        runs=tuple(
            RunRef(label=LABELS[i], run_id=s.run_id, name=s.name) for i, s in enumerate(summaries)
        ),
        rows=tuple(rows),
        only=tuple(only),
    )
