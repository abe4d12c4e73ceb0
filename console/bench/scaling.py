"""Findings that compare cells of one run: how DDTree acceptance scales with the budget on
each model (`budget-scaling`), and how much of a single stream's throughput each extra
concurrent request adds (`batching-efficiency`).

`budget-scaling` answers "would the other model be easier?": with DDTree budget sweeps on
two or more models (or layouts) at one concurrency, it says per model whether acceptance
collapses as the tree widens (the hybrid-GDN signature) or holds, and which variant is best
on each. `batching-efficiency` is aggregate tok/s at a cell's highest concurrency over that
many single streams: near 1 when a step costs about the same for a batch (Kimi K2.6 on
eight GPUs), near 1/N when it grows with it (Qwen3.6-27B on one).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from console.bench.facts import (
    DDTREE_FLAG,
    CellFacts,
    FindingJson,
    FindingKind,
    LevelFacts,
    finding_json,
    tree_label,
    tree_of,
)

# Acceptance trends over growing budgets. Collapse: the largest budget's acceptance is
# below 85% of the smallest's and no budget step raises it by more than 2% (the thresholds
# of the acceptance-collapse finding). Holds: no budget step lowers it by more than 2%;
# rises: holds and the largest budget's is at least 5% above the smallest's.
COLLAPSE_RATIO = 0.85
NOISE = 0.02
RISE_RATIO = 1.05

# Batching efficiency bands, on the gain over a flat server rescaled to 0..1: (efficiency -
# 1/N) / (1 - 1/N), since a server whose aggregate does not grow at all scores 1/N (0.5 at
# N=2, 0.03 at N=32). At least this much of the linear gain is near-linear, at most this
# much near-flat.
NEAR_LINEAR = 0.8
NEAR_FLAT = 0.3

Trend = Literal["collapses", "falls", "holds", "rises", "mixed"]
Verdict = Literal["near-linear", "partial", "near-flat"]


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _closed_loop(cell: CellFacts, concurrency: int) -> LevelFacts | None:
    """The cell's closed-loop level at this concurrency (an open-loop level's concurrency
    is only a cap)."""
    return next(
        (lv for lv in cell.levels if lv.concurrency == concurrency and lv.rate is None), None
    )


def trend(accepts: Sequence[float]) -> Trend:
    """How acceptance moves over budgets in increasing order."""
    first, last = accepts[0], accepts[-1]
    steps = list(itertools.pairwise(accepts))
    if last < first * COLLAPSE_RATIO and all(b <= a * (1 + NOISE) for a, b in steps):
        return "collapses"
    if all(b >= a * (1 - NOISE) for a, b in steps):
        return "rises" if last >= first * RISE_RATIO else "holds"
    if all(b <= a * (1 + NOISE) for a, b in steps):
        return "falls"
    return "mixed"


@dataclass(frozen=True, kw_only=True)
class ModelScaling:
    """One model's (profile and layout's) DDTree budgets at one concurrency."""

    profile: str | None
    layout: str | None
    architecture: str | None
    algorithm: str | None
    tree_flag: str
    """The flag that passed the budgets (`--speculative-ddtree-budget` for DDTree)."""
    budgets: tuple[int, ...]
    accept_lengths: tuple[float, ...]
    trend: Trend
    best_variant: str | None
    best_tok_s: float | None
    best_speedup: float | None
    """The best variant's tok/s over the `off` cell's at the same concurrency (None without
    an `off` cell)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelScaling:
        found = str(data.get("trend"))
        return cls(
            profile=_opt_str(data.get("profile")),
            layout=_opt_str(data.get("layout")),
            architecture=_opt_str(data.get("architecture")),
            algorithm=_opt_str(data.get("algorithm")),
            tree_flag=str(data.get("tree_flag") or DDTREE_FLAG),
            budgets=tuple(int(b) for b in data.get("budgets") or ()),
            accept_lengths=tuple(float(a) for a in data.get("accept_lengths") or ()),
            trend=found if found in ("collapses", "falls", "holds", "rises") else "mixed",  # type: ignore[arg-type]
            best_variant=_opt_str(data.get("best_variant")),
            best_tok_s=_opt_float(data.get("best_tok_s")),
            best_speedup=_opt_float(data.get("best_speedup")),
        )

    def describe(self) -> str:
        budgets = " -> ".join(str(b) for b in self.budgets)
        accepts = " -> ".join(f"{a:.1f}" for a in self.accept_lengths)
        verb = {"collapses": "collapses", "falls": "falls", "holds": "holds", "rises": "rises"}
        what = verb.get(self.trend, "moves unevenly")
        label = tree_label(self.algorithm, self.tree_flag)
        tree = "budgets" if self.tree_flag == DDTREE_FLAG else f"{label}s"
        return (
            f"acceptance {what} on {self.profile} {self.layout} ({self.architecture or 'unknown'}"
            f" architecture; {tree} {budgets}: {accepts} accepted tokens per step)"
        )

    def best(self) -> str:
        if self.best_variant is None or self.best_tok_s is None:
            return f"{self.profile}: none measured"
        speedup = "" if self.best_speedup is None else f", {self.best_speedup:.1f}x off"
        return f"{self.profile} {self.best_variant} ({self.best_tok_s:.0f} tok/s{speedup})"


@dataclass(frozen=True, kw_only=True)
class BudgetScaling:
    """DDTree budget sweeps on two or more models at one concurrency, compared."""

    kind: ClassVar[FindingKind] = "budget-scaling"
    concurrency: int
    models: tuple[ModelScaling, ...]
    message: str

    def to_json(self) -> FindingJson:
        return finding_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BudgetScaling:
        return cls(
            concurrency=int(data["concurrency"]),
            models=tuple(ModelScaling.from_json(m) for m in data.get("models") or ()),
            message=str(data.get("message") or ""),
        )


def _best(
    cells: Sequence[CellFacts], concurrency: int
) -> tuple[str | None, float | None, float | None]:
    """The variant with the highest output tok/s at this concurrency, its tok/s and its
    speedup over `off`."""
    measured = [
        (cell, level.output_tok_s)
        for cell in cells
        if (level := _closed_loop(cell, concurrency)) is not None and level.output_tok_s
    ]
    if not measured:
        return None, None, None
    cell, tok_s = max(measured, key=lambda item: item[1] or 0.0)
    # Only a cell known to be autoregressive is the baseline (None: the server did not say).
    off = next((t for c, t in measured if (c.algorithm or "").lower() in ("off", "none")), None)
    speedup = tok_s / off if off and tok_s else None
    return cell.variant, tok_s, speedup


def budget_scalings(cells: Iterable[CellFacts]) -> list[BudgetScaling]:
    """One finding per concurrency at which two or more models (profile and layout, per
    tree-drafting algorithm) each have at least two tree budgets with an acceptance length."""
    groups: dict[tuple[str | None, str | None], list[CellFacts]] = defaultdict(list)
    for cell in cells:
        if cell.status != "failed":
            groups[(cell.profile, cell.layout)].append(cell)
    trees = {id(cell): tree for g in groups.values() for cell in g if (tree := tree_of(cell))}
    concurrencies = sorted(
        {lv.concurrency for g in groups.values() for c in g for lv in c.levels if lv.concurrency}
    )
    found: list[BudgetScaling] = []
    for concurrency in concurrencies:
        models: list[ModelScaling] = []
        for (profile, layout), group in groups.items():
            sweeps: dict[tuple[str | None, str], list[tuple[int, float, str | None]]] = defaultdict(
                list
            )
            for cell in group:
                tree = trees.get(id(cell))
                level = _closed_loop(cell, concurrency)
                if tree is not None and level is not None and level.accept_length:
                    sweeps[(cell.algorithm, tree[1])].append(
                        (tree[0], level.accept_length, cell.architecture)
                    )
            best_variant, best_tok_s, best_speedup = _best(group, concurrency)
            for (algorithm, flag), found_points in sweeps.items():
                points = sorted(found_points)
                if len(points) < 2:
                    continue
                accepts = tuple(accept for _, accept, _ in points)
                models.append(
                    ModelScaling(
                        profile=profile,
                        layout=layout,
                        architecture=points[0][2],
                        algorithm=algorithm,
                        tree_flag=flag,
                        budgets=tuple(budget for budget, _, _ in points),
                        accept_lengths=accepts,
                        trend=trend(accepts),
                        best_variant=best_variant,
                        best_tok_s=best_tok_s,
                        best_speedup=best_speedup,
                    )
                )
        if len(models) < 2:
            continue
        message = (
            f"budget scaling at concurrency {concurrency}: "
            + "; ".join(m.describe() for m in models)
            + ". Best variant per model: "
            + "; ".join(m.best() for m in models)
            + "."
        )
        found.append(BudgetScaling(concurrency=concurrency, models=tuple(models), message=message))
    return found


@dataclass(frozen=True, kw_only=True)
class CellBatching:
    """One cell's aggregate throughput at its highest concurrency against single streams."""

    profile: str | None
    layout: str | None
    variant: str | None
    single_tok_s: float
    tok_s: float
    efficiency: float
    """tok_s / (N x single_tok_s), N the requests in flight: 1 is linear, 1/N is flat."""
    verdict: Verdict
    concurrency: int | None = None
    """The level's concurrency (more than N when the level had fewer requests)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellBatching:
        verdict = str(data.get("verdict"))
        return cls(
            profile=_opt_str(data.get("profile")),
            layout=_opt_str(data.get("layout")),
            variant=_opt_str(data.get("variant")),
            single_tok_s=float(data["single_tok_s"]),
            tok_s=float(data["tok_s"]),
            efficiency=float(data["efficiency"]),
            verdict=verdict if verdict in ("near-linear", "near-flat") else "partial",  # type: ignore[arg-type]
            concurrency=_opt_int(data.get("concurrency")),
        )


@dataclass(frozen=True, kw_only=True)
class BatchingEfficiency:
    """Aggregate tok/s at concurrency N over N single streams, for each cell swept to N."""

    kind: ClassVar[FindingKind] = "batching-efficiency"
    concurrency: int
    cells: tuple[CellBatching, ...]
    message: str

    def to_json(self) -> FindingJson:
        return finding_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BatchingEfficiency:
        return cls(
            concurrency=int(data["concurrency"]),
            cells=tuple(CellBatching.from_json(c) for c in data.get("cells") or ()),
            message=str(data.get("message") or ""),
        )


def _cell_name(*parts: str | None) -> str:
    """`qwen3.6-27b tp1 off`; `the server` for a server given by URL (no profile)."""
    return " ".join(part for part in parts if part) or "the server"


def _verdict(efficiency: float, streams: int) -> Verdict:
    """How much of the linear gain N streams got: 0 for a flat server, 1 for a linear one."""
    flat = 1 / streams
    gain = (efficiency - flat) / (1 - flat)
    if gain >= NEAR_LINEAR:
        return "near-linear"
    if gain <= NEAR_FLAT:
        return "near-flat"
    return "partial"


def batching_efficiencies(cells: Iterable[CellFacts]) -> list[BatchingEfficiency]:
    """One finding per highest concurrency that cells were swept to from a single stream."""
    by_top: dict[int, list[CellBatching]] = defaultdict(list)
    for cell in cells:
        if cell.status == "failed":
            continue
        single = _closed_loop(cell, 1)
        # A level of fewer requests than its concurrency never had that many in flight.
        swept = [
            (min(lv.concurrency, lv.requests or lv.concurrency), lv.concurrency, lv.output_tok_s)
            for lv in cell.levels
            if lv.rate is None and lv.concurrency and lv.concurrency > 1 and lv.output_tok_s
        ]
        swept = [level for level in swept if level[0] > 1]
        if single is None or not single.output_tok_s or not swept:
            continue
        streams, concurrency, tok_s = max(swept)
        efficiency = tok_s / (streams * single.output_tok_s)
        by_top[streams].append(
            CellBatching(
                profile=cell.profile,
                layout=cell.layout,
                variant=cell.variant,
                single_tok_s=single.output_tok_s,
                tok_s=tok_s,
                efficiency=efficiency,
                verdict=_verdict(efficiency, streams),
                concurrency=concurrency,
            )
        )
    found: list[BatchingEfficiency] = []
    for concurrency, measured in sorted(by_top.items()):
        parts = [
            f"{_cell_name(c.profile, c.layout, c.variant)} {c.efficiency:.2f}, {c.verdict} "
            f"({c.tok_s:.0f} tok/s against {c.single_tok_s:.1f} single)"
            for c in measured
        ]
        asked = sorted({c.concurrency for c in measured if c.concurrency})
        where = (
            f"at concurrency {concurrency}"
            if asked in ([], [concurrency])
            else f"with {concurrency} requests in flight (concurrency "
            f"{', '.join(map(str, asked))}, fewer requests than that)"
        )
        message = (
            f"batching efficiency {where} (aggregate tok/s over "
            f"{concurrency} x a single stream): " + "; ".join(parts) + "."
        )
        found.append(
            BatchingEfficiency(concurrency=concurrency, cells=tuple(measured), message=message)
        )
    return found
