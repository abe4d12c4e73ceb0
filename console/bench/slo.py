"""Requests judged against an SLO: which met it, the share that did, goodput's tokens (pure).

The targets themselves (`Slo`, `parse_slo`) are `console.profiles.slo`'s, so profiles can
carry a default; the rules are SGLang's, cited there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from console.bench.results import RequestResult
from console.profiles.slo import DEFAULT_ATTAINMENT, Slo, check_attainment, parse_slo

__all__ = [
    "DEFAULT_ATTAINMENT",
    "Slo",
    "SloOutcome",
    "check_attainment",
    "evaluate",
    "met",
    "met_by",
    "parse_slo",
]


def met(slo: Slo, result: RequestResult) -> dict[str, bool]:
    """Per set target: whether this request met it (a failed request meets none)."""
    ok = result.error is None
    observed = {
        "ttft": result.ttft_s,
        "itl": _itl(result),
        "e2e": result.e2e_s,
    }
    return {
        name: ok and observed[name] is not None and observed[name] <= target  # type: ignore[operator]
        for name, target in slo.targets().items()
    }


def met_by(slo: Slo, result: RequestResult) -> bool:
    """Whether the request finished and met every target."""
    return all(met(slo, result).values())


def _itl(result: RequestResult) -> float | None:
    if result.itl_s is not None:
        return result.itl_s
    # One token: no inter-token interval, which SGLang counts as 0 (goodput.py:30-33).
    if result.error is None and result.output_tokens is not None and result.output_tokens <= 1:
        return 0.0
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class SloOutcome:
    """A level's requests against the SLO."""

    met: int
    """Requests that finished and met every target."""
    counted: int
    """Requests the level measured, failures included."""
    attainment: float | None
    met_by_metric: dict[str, float]
    """Per target, the share of counted requests that met it."""
    good_output_tokens: int

    def passes(self, slo: Slo) -> bool | None:
        """Whether the share met reaches the SLO's attainment; None when nothing was measured."""
        return None if self.attainment is None else self.attainment >= slo.attainment - 1e-12


def evaluate(slo: Slo, requests: Sequence[RequestResult]) -> SloOutcome:
    """How many of `requests` met the SLO, their output tokens, and the share per target."""
    good = 0
    good_tokens = 0
    per_metric = dict.fromkeys(slo.targets(), 0)
    for request in requests:
        checks = met(slo, request)
        for name, ok in checks.items():
            per_metric[name] += ok
        if all(checks.values()):
            good += 1
            good_tokens += int(request.output_tokens or 0)
    counted = len(requests)
    return SloOutcome(
        met=good,
        counted=counted,
        attainment=good / counted if counted else None,
        met_by_metric={name: n / counted for name, n in per_metric.items()} if counted else {},
        good_output_tokens=good_tokens,
    )
