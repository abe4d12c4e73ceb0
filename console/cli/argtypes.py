"""Argparse types for numeric flags: one policy for every verb.

Each rejects NaN, infinities, values below its minimum and absurd values above its maximum
with a one-line `ArgumentTypeError` (argparse names the flag: `argument --duration: ...`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

DAY_S = 86400.0


def _number(text: str, kind: type[float] | type[int]) -> float:
    try:
        value = kind(text.strip())
    except (ValueError, OverflowError):
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def bounded_float(
    low: float, high: float, *, low_open: bool = False, unit: str = ""
) -> Callable[[str], float]:
    """A finite float in [low, high] ((low, high] with `low_open`)."""

    def convert(text: str) -> float:
        value = float(_number(text, float))
        too_low = value <= low if low_open else value < low
        if too_low:
            relation = "more than" if low_open else "at least"
            raise argparse.ArgumentTypeError(f"{text} must be {relation} {low:g}{unit}")
        if value > high:
            raise argparse.ArgumentTypeError(f"{text} must be at most {high:g}{unit}")
        return value

    convert.__name__ = "number"
    return convert


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An integer in [low, high]."""

    def convert(text: str) -> int:
        value = int(_number(text, int))
        if value < low:
            raise argparse.ArgumentTypeError(f"{text} must be at least {low}")
        if value > high:
            raise argparse.ArgumentTypeError(f"{text} must be at most {high}")
        return value

    convert.__name__ = "integer"
    return convert


def finite_float(text: str) -> float:
    """Any finite number (NaN and infinities refused)."""
    return float(_number(text, float))


# The shared policies (seconds unless named otherwise).
duration_s = bounded_float(0.0, 30 * DAY_S, low_open=True, unit=" s")
"""A benchmark level's or a recording's length: more than 0, at most 30 days."""
grace_s = bounded_float(0.0, DAY_S, unit=" s")
"""How long to wait after SIGTERM before SIGKILL: 0 to one day."""
timeout_s = bounded_float(0.0, 7 * DAY_S, low_open=True, unit=" s")
"""How long to wait for readiness: more than 0, at most a week."""
interval_s = bounded_float(0.05, 3600.0, unit=" s")
"""Seconds between telemetry readings: 0.05 to an hour."""
history_s = bounded_float(0.0, 30 * DAY_S, low_open=True, unit=" s")
at_s = bounded_float(0.0, 10 * 365 * DAY_S, unit=" s")
speed = bounded_float(0.0, 10_000.0, low_open=True)
warmup = bounded_int(0, 100_000)
"""Uncounted requests before each level."""
record_max_mb = bounded_int(1, 16 * 1024 * 1024)
requests = bounded_int(1, 10**12)
token_count = bounded_int(1, 2_000_000)
"""A prompt's or an output's length in tokens (no model has a longer context)."""
vocab_size = bounded_int(2, 2**32)
rate_max = 1e6
"""Requests per second: far beyond any server. The same bound as a campaign file's
(console.bench.spec.RATE_MAX), not imported from there: pydantic would then load with every
command."""


def positive_float_list(text: str) -> list[float]:
    """Comma-separated rates, each finite, more than 0 and at most `rate_max`."""
    values: list[float] = []
    for part in text.split(","):
        if not part.strip():
            continue
        try:
            value = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"rates must be positive finite numbers: {text!r}")
        if value > rate_max:
            raise argparse.ArgumentTypeError(f"rate {part.strip()} is over {rate_max:g}/s")
        values.append(value)
    if not values:
        raise argparse.ArgumentTypeError(f"rates must be positive: {text!r}")
    return values
