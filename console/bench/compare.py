"""Two runs side by side: cells matched by profile x layout x variant and level."""

from __future__ import annotations

from dataclasses import dataclass

from console.bench.results import CellSummary, JsonDict, LevelSummary, RunSummary
from console.bench.tables import COLUMNS, COMPARE_METRICS


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricPair:
    """One metric of one cell and level in run A and run B."""

    name: str
    a: float | None
    b: float | None

    @property
    def delta_pct(self) -> float | None:
        """B over A in percent; None unless both are numbers and A is not zero."""
        if self.a is None or self.b is None or not self.a:
            return None
        return 100.0 * (self.b - self.a) / self.a


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareRow:
    cell: str
    load: int | float | None
    """The level's concurrency, else its rate."""
    metrics: tuple[MetricPair, ...]

    def metric(self, name: str) -> MetricPair:
        return next(m for m in self.metrics if m.name == name)

    def to_json(self) -> JsonDict:
        out: JsonDict = {"cell": self.cell, "concurrency": self.load}
        for pair in self.metrics:
            out[f"{pair.name}_a"] = pair.a
            out[f"{pair.name}_b"] = pair.b
            out[f"{pair.name}_delta_pct"] = pair.delta_pct
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareResult:
    run_a: str
    run_b: str
    rows: tuple[CompareRow, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]

    def to_json(self) -> JsonDict:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "rows": [row.to_json() for row in self.rows],
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
        }


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _levels(
    summary: RunSummary,
) -> dict[tuple[str, int | float | None], tuple[CellSummary, LevelSummary]]:
    return {
        (cell.key, level.concurrency or level.rate): (cell, level)
        for cell, level in summary.levels()
    }


def compare_runs(a: RunSummary, b: RunSummary) -> CompareResult:
    left, right = _levels(a), _levels(b)
    rows = []
    for key in sorted(set(left) & set(right), key=lambda k: (k[0], k[1] or 0)):
        rows.append(
            CompareRow(
                cell=key[0],
                load=key[1],
                metrics=tuple(
                    MetricPair(
                        name=name,
                        a=_number(COLUMNS[name].get(*left[key])),
                        b=_number(COLUMNS[name].get(*right[key])),
                    )
                    for name in COMPARE_METRICS
                ),
            )
        )
    return CompareResult(
        run_a=a.run_id,
        run_b=b.run_id,
        rows=tuple(rows),
        only_a=tuple(f"{k[0]} @ {k[1]}" for k in sorted(set(left) - set(right), key=str)),
        only_b=tuple(f"{k[0]} @ {k[1]}" for k in sorted(set(right) - set(left), key=str)),
    )
