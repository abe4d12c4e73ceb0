"""A cell's knee: the highest load that met the SLO, from the levels it measured (pure).

The knee is the highest passing load below the lowest failing one: a pass above a failure
(noise on a level near the limit) does not raise it. Levels cut short by a stop say nothing
and are left out, as are closed-loop levels that sent fewer requests than their concurrency
(they never had that many in flight); a level a saturation search stopped early because it
had already failed counts as failing.
"""

from __future__ import annotations

from collections.abc import Sequence

from console.bench.results import Knee, LevelSummary
from console.bench.slo import Slo


def level_load(level: LevelSummary) -> tuple[str, float] | None:
    """(`concurrency` | `rate`, the load) of a level; None when it names neither."""
    if level.rate is not None:
        return "rate", level.rate
    if level.concurrency is not None:
        return "concurrency", float(level.concurrency)
    return None


def knee_of(levels: Sequence[LevelSummary], slo: Slo, *, searched: bool = False) -> Knee | None:
    """The knee of one cell's levels of one kind of load; None with loads of both kinds, or
    fewer than two judged loads (one is enough for a saturation search, which may fail at
    its first load)."""
    judged: list[tuple[float, bool]] = []
    kinds = set()
    order: list[float] = []
    for level in levels:
        load = level_load(level)
        if load is None or level.status == "interrupted" or _never_reached(level):
            continue
        kinds.add(load[0])
        order.append(load[1])
        if level.status == "failed":
            judged.append((load[1], False))
        elif level.slo_pass is not None:
            judged.append((load[1], level.slo_pass))
    if len(kinds) != 1 or len({value for value, _ in judged}) < (1 if searched else 2):
        return None
    failing = sorted(value for value, passed in judged if not passed)
    first_failing = failing[0] if failing else None
    passing = [
        value
        for value, passed in judged
        if passed and (first_failing is None or value < first_failing)
    ]
    kind = kinds.pop()
    value = max(passing) if passing else None
    return Knee(
        kind=kind,
        value=value,
        first_failing=first_failing,
        attainment=slo.attainment,
        slo=slo.label(),
        loads=tuple(order),
        achieved=_achieved_at(levels, value) if kind == "rate" else None,
    )


def _achieved_at(levels: Sequence[LevelSummary], rate: float | None) -> float | None:
    """The completions per second the last passing level at `rate` measured."""
    measured = [
        level.achieved_rate
        for level in levels
        if level.rate == rate and level.slo_pass and level.achieved_rate is not None
    ]
    return measured[-1] if measured else None


def _never_reached(level: LevelSummary) -> bool:
    """A finished closed-loop level that sent fewer requests than its streams (a sweep's
    `--requests` below its `--concurrency`): its load was never in flight. A level that
    records no request at all (a summary without counts) is taken as it says."""
    if level.rate is not None or level.concurrency is None or level.early_stop is not None:
        return False
    return level.status == "done" and 0 < level.requests + level.errors < level.concurrency
