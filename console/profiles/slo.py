"""Latency targets (SLOs): the `--slo` text, a profile's `[bench] slo`, a campaign's `slo`.

Requests are judged against one in `console.bench.slo`. A request is good when it finished
without an error and met every target, each inclusive (`<=`), as SGLang's benchmark counts
it (sglang 0.5.23 benchmark/goodput.py:25-52: TTFT, TPOT and end-to-end latency; a failed
request is never good; a single-token response has an inter-token latency of 0). Our `itl`
is SGLang's `tpot`: (last token - first token) / (output tokens - 1), per request (DESIGN 4).
Attainment is good requests over every request the level measured, failures included, as
SGLang's `slo_attainment`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from console.core.errors import UsageError

DEFAULT_ATTAINMENT = 0.95
"""The share of requests that must meet the SLO for a level to pass, unless given."""

METRICS = ("ttft", "itl", "e2e")
# SGLang's `--goodput` names (benchmark/goodput.py:12) mean the same quantities.
ALIASES = {"tpot": "itl", "e2el": "e2e"}
_UNITS_S = {"ms": 1e-3, "s": 1.0, "us": 1e-6}
_TARGET = re.compile(r"^\s*([a-z0-9]+)\s*(?:=|:|<=|<)\s*([0-9.eE+-]+)\s*(ms|s|us)?\s*$")
LIMIT_S = 86400.0
"""No latency target above a day: a typo (`ttft=200s` meant as ms is still allowed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Slo:
    """Per-request latency targets in seconds (None: no target on that metric) and the
    share of requests that must meet all of them for a level to pass."""

    ttft_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None
    attainment: float = DEFAULT_ATTAINMENT

    def targets(self) -> dict[str, float]:
        """The set targets by metric name, in seconds."""
        values = {"ttft": self.ttft_s, "itl": self.itl_s, "e2e": self.e2e_s}
        return {name: value for name, value in values.items() if value is not None}

    def label(self) -> str:
        """`TTFT ≤ 200 ms, ITL ≤ 40 ms` (the attainment is said separately)."""
        return ", ".join(
            f"{name.upper()} ≤ {_duration(value)}" for name, value in self.targets().items()
        )

    def describe(self) -> str:
        """`TTFT ≤ 200 ms for 95% of requests`."""
        return f"{self.label()} for {self.attainment * 100:g}% of requests"

    def spec(self) -> str:
        """The flag's own text, `ttft=200ms,itl=40ms`, which `parse_slo` reads back."""
        return ",".join(
            f"{name}={_duration(value, sep='')}" for name, value in self.targets().items()
        )

    def to_json(self) -> dict[str, float | None]:
        return {
            "ttft_s": self.ttft_s,
            "itl_s": self.itl_s,
            "e2e_s": self.e2e_s,
            "attainment": self.attainment,
        }

    @classmethod
    def from_json(cls, data: object) -> Slo | None:
        """The SLO `to_json` wrote; None when `data` is not one (an older run has none)."""
        if not isinstance(data, Mapping):
            return None
        values = {name: _positive(data.get(f"{name}_s")) for name in METRICS}
        if not any(v is not None for v in values.values()):
            return None
        attainment = _positive(data.get("attainment"))
        return cls(
            ttft_s=values["ttft"],
            itl_s=values["itl"],
            e2e_s=values["e2e"],
            attainment=attainment
            if attainment is not None and attainment <= 1
            else DEFAULT_ATTAINMENT,
        )


def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number > 0 else None


def _duration(seconds: float, sep: str = " ") -> str:
    if seconds < 1.0:
        return f"{seconds * 1000:g}{sep}ms"
    return f"{seconds:g}{sep}s"


def parse_slo(text: str, where: str = "--slo", attainment: float | None = None) -> Slo:
    """`ttft=200ms,itl=40ms,e2e=20s` (also `ttft:200` in ms, SGLang's spelling, and `tpot`/
    `e2el` for `itl`/`e2e`); UsageError naming `where` and the part that is wrong."""
    targets: dict[str, float] = {}
    parts = [part for part in text.split(",") if part.strip()]
    if not parts:
        raise UsageError(f"{where}: give at least one target, e.g. ttft=200ms,itl=40ms")
    for part in parts:
        found = _TARGET.match(part.lower())
        if found is None:
            raise UsageError(
                f"{where}: {part.strip()!r} is not a target like ttft=200ms (metrics: "
                f"{', '.join(METRICS)}; units ms, s)"
            )
        name = ALIASES.get(found[1], found[1])
        if name not in METRICS:
            raise UsageError(f"{where}: unknown metric {found[1]!r} (use {', '.join(METRICS)})")
        if name in targets:
            raise UsageError(f"{where}: {name} is given twice")
        try:
            number = float(found[2])
        except ValueError:
            raise UsageError(f"{where}: {found[2]!r} is not a number") from None
        # A bare number is milliseconds, as SGLang's `--goodput ttft:200`.
        seconds = number * _UNITS_S[found[3] or "ms"]
        if not math.isfinite(seconds) or seconds <= 0:
            raise UsageError(f"{where}: {name} must be a positive duration")
        if seconds > LIMIT_S:
            raise UsageError(f"{where}: {name} must be at most a day")
        targets[name] = seconds
    chosen = DEFAULT_ATTAINMENT if attainment is None else attainment
    check_attainment(chosen, "--attainment" if where == "--slo" else f"{where} attainment")
    return Slo(
        ttft_s=targets.get("ttft"),
        itl_s=targets.get("itl"),
        e2e_s=targets.get("e2e"),
        attainment=chosen,
    )


def check_attainment(value: float, where: str) -> float:
    if not math.isfinite(value) or not 0.0 < value <= 1.0:
        raise UsageError(f"{where}: {value:g} is not a share in (0, 1], e.g. 0.95")
    return value


def checked_slo_text(value: str | None) -> str | None:
    """A file's `slo` key as given, or ValueError saying why it does not parse (for a
    pydantic field validator, which names the file and key)."""
    if value is not None:
        try:
            parse_slo(value, "slo")
        except UsageError as exc:
            raise ValueError(exc.message.removeprefix("slo: ")) from None
    return value
