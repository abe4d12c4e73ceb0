"""A host's summary from its latest `metrics --watch --json` reading (docs/metrics.schema.json):
GPUs busy of total, servers and their states, tok/s, the telemetry sources' states.

The reading comes from another machine, possibly another ddconsole version: every field is
checked, and a missing or malformed one reads as unknown, never as an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

BUSY_UTIL_PCT = 10.0
"""A GPU no live server holds is busy from this utilisation up (someone else's work)."""
LIVE_STATES = frozenset({"starting", "loading", "warming", "ready", "stopping"})
ENDED_STATES = frozenset({"stopped", "failed", "exited"})
"""A managed server that ended: a reading lists it for a while with its reason, no figures."""


@dataclass(frozen=True)
class ServerBrief:
    id: str
    state: str
    tok_s: float | None
    gpus: tuple[int, ...]
    url: str | None
    external: bool
    reason: str | None = None
    """Why it ended, for one that did."""

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "tok_s": self.tok_s,
            "gpus": list(self.gpus),
            "url": self.url,
            "external": self.external,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class SourceBrief:
    name: str
    state: str
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "reason": self.reason}


@dataclass(frozen=True)
class ReadingFigures:
    """What a fleet row shows of one reading."""

    gpus_busy: int | None = None
    gpus_total: int | None = None
    servers: tuple[ServerBrief, ...] = ()
    tok_s: float | None = None
    sources: tuple[SourceBrief, ...] = ()


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _text(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _server(raw: object) -> ServerBrief | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        return None
    gpus = tuple(g for g in _list(raw.get("gpus")) if isinstance(g, int) and g >= 0)
    url = raw.get("url")
    return ServerBrief(
        id=raw["id"],
        state=_text(raw.get("state"), "unknown"),
        tok_s=_number(raw.get("tok_s")),
        gpus=gpus,
        url=url if isinstance(url, str) else None,
        external=raw.get("external") is True or raw["id"].startswith("ext-"),
        reason=_reason(raw.get("reason")),
    )


def figures(reading: dict[str, Any]) -> ReadingFigures:
    """The fleet figures of one reading; whatever is missing or malformed is left unknown."""
    servers = tuple(s for s in map(_server, _list(reading.get("servers"))) if s is not None)
    listed = isinstance(reading.get("gpus"), list)  # anything else: the GPUs are unknown
    gpus = [g for g in _list(reading.get("gpus")) if isinstance(g, dict)]
    held = {gpu for s in servers if s.state in LIVE_STATES for gpu in s.gpus}
    busy = 0
    for gpu in gpus:
        util = _number(gpu.get("util_pct"))
        if gpu.get("index") in held or (util is not None and util >= BUSY_UTIL_PCT):
            busy += 1
    rates = [s.tok_s for s in servers if s.tok_s is not None]
    sources = tuple(
        SourceBrief(raw["name"], _text(raw.get("state"), "unknown"), _reason(raw.get("reason")))
        for raw in _list(reading.get("sources"))
        if isinstance(raw, dict) and isinstance(raw.get("name"), str)
    )
    return ReadingFigures(
        gpus_busy=busy if listed else None,
        gpus_total=len(gpus) if listed else None,
        servers=servers,
        tok_s=sum(rates) if rates else None,
        sources=sources,
    )


def _reason(value: object) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class HostSummary:
    """One host in the fleet: its link's state and its latest reading's figures (a stale
    host keeps the last ones it had)."""

    name: str
    target: str
    state: str
    """"up", "connecting" (no reading yet) or "stale" (see `reason`)."""
    reason: str | None
    gpus_busy: int | None
    gpus_total: int | None
    servers: tuple[ServerBrief, ...]
    servers_ready: int
    tok_s: float | None
    sources: tuple[SourceBrief, ...]
    age_s: float | None
    """Seconds since the latest reading arrived (None: none yet)."""
    updated_wall: float | None
    parse_errors: int = 0
    """Telemetry lines that could not be read (each one skipped)."""
    next_try_s: float | None = None
    """A stale host: seconds until its stream is tried again (None: not waiting)."""

    @property
    def servers_total(self) -> int:
        """The servers that have not ended (the ready ones' whole)."""
        return sum(1 for s in self.servers if not s.ended)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": self.target,
            "state": self.state,
            "reason": self.reason,
            "gpus_busy": self.gpus_busy,
            "gpus_total": self.gpus_total,
            "servers": [s.to_json() for s in self.servers],
            "servers_ready": self.servers_ready,
            "servers_total": self.servers_total,
            "tok_s": self.tok_s,
            "sources": [s.to_json() for s in self.sources],
            "age_s": self.age_s,
            "updated_wall": self.updated_wall,
            "parse_errors": self.parse_errors,
            "next_try_s": self.next_try_s,
        }
