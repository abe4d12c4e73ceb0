"""What every telemetry source provides to the poller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from console.telemetry.keys import SourceId
from console.telemetry.samples import Sample, SourceStatus


@dataclass
class PollResult:
    samples: list[Sample] = field(default_factory=list)
    statuses: list[SourceStatus] = field(default_factory=list)


class Source(Protocol):
    name: SourceId
    interval_s: float

    async def poll(self, now: float) -> PollResult: ...

    async def close(self) -> None: ...
