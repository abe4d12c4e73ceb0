"""Prometheus' HTTP API as the console reads it: instant and range queries, target health.

Every answer is an envelope, `{"status": "success", "data": ...}` or `{"status": "error",
"errorType": ..., "error": ...}` (prometheus.io/docs/prometheus/latest/querying/api/); the
parsers here are pure, so what a damaged or unexpected answer turns into is tested without a
server. Values arrive as strings ("NaN", "+Inf" included) and become floats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from console.core.http import (
    JSON_MAX_BYTES,
    BodyTooLarge,
    DeadlineExceeded,
    connection_refused,
    get_capped,
)

QUERY_MAX_BYTES = 4 * JSON_MAX_BYTES
"""One query's answer: every series of a few metrics over a fleet is a few hundred kB."""


class PrometheusError(Exception):
    """Prometheus could not be asked, or refused the question; the message says which."""


@dataclass(frozen=True, slots=True)
class Series:
    """One series of an instant vector: its labels (`__name__` included when kept) and value."""

    labels: Mapping[str, str]
    value: float
    t_wall: float
    """The evaluation time Prometheus reported (wall-clock seconds)."""


@dataclass(frozen=True, slots=True)
class RangeSeries:
    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]
    """(wall-clock seconds, value), oldest first."""


@dataclass(frozen=True, slots=True)
class Target:
    """One scrape target of /api/v1/targets (its active list)."""

    instance: str
    job: str
    health: str
    """`up`, `down` or `unknown` (not scraped yet)."""
    last_error: str
    scrape_url: str
    scrape_interval_s: float | None
    labels: Mapping[str, str] = field(default_factory=dict)
    """Every target label after relabelling (what a matcher set is applied to)."""


def _data(body: object) -> Any:
    """The `data` of a success envelope; PrometheusError with Prometheus' own words else."""
    if not isinstance(body, dict):
        raise PrometheusError("not a Prometheus API answer (no JSON object)")
    status = body.get("status")
    if status == "error":
        kind = body.get("errorType") or "error"
        raise PrometheusError(f"Prometheus refused the query ({kind}): {body.get('error', '')}")
    if status != "success" or "data" not in body:
        raise PrometheusError(f"not a Prometheus API answer (status {status!r})")
    return body["data"]


def _number(text: object) -> float:
    if not isinstance(text, str):
        raise PrometheusError(f"a sample value is {type(text).__name__}, not a string")
    try:
        return float(text)  # "NaN", "+Inf" and "-Inf" parse as Python reads them
    except ValueError:
        raise PrometheusError(f"a sample value is not a number: {text[:40]!r}") from None


def _pair(pair: object) -> tuple[float, float]:
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], int | float):
        raise PrometheusError(f"a sample is not [time, value]: {str(pair)[:60]}")
    return float(pair[0]), _number(pair[1])


def _labels(item: object) -> dict[str, str]:
    if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
        raise PrometheusError("a result has no `metric` labels")
    return {str(k): str(v) for k, v in item["metric"].items()}


def parse_vector(body: object) -> list[Series]:
    """An instant query's answer (`resultType` vector or scalar)."""
    data = _data(body)
    if not isinstance(data, dict):
        raise PrometheusError("query answer without a data object")
    kind = data.get("resultType")
    result = data.get("result")
    if kind == "scalar":
        t, value = _pair(result)
        return [Series({}, value, t)]
    if kind != "vector" or not isinstance(result, list):
        raise PrometheusError(f"expected an instant vector, got {kind!r}")
    out = []
    for item in result:
        t, value = _pair(item.get("value") if isinstance(item, dict) else None)
        out.append(Series(_labels(item), value, t))
    return out


def parse_matrix(body: object) -> list[RangeSeries]:
    """A range query's answer (`resultType` matrix)."""
    data = _data(body)
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise PrometheusError(f"expected a range matrix, got {kind!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError("range answer without a result list")
    out = []
    for item in result:
        values = item.get("values") if isinstance(item, dict) else None
        if not isinstance(values, list):
            raise PrometheusError("a range series has no `values`")
        out.append(RangeSeries(_labels(item), tuple(_pair(p) for p in values)))
    return out


def parse_duration_s(text: object) -> float | None:
    """A Prometheus duration (`15s`, `1m`, `1m30s`, `500ms`) in seconds; None if unreadable."""
    if not isinstance(text, str) or not text:
        return None
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
    total, number = 0.0, ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = "ms" if text.startswith("ms", i) else ch
        if unit not in units or not number:
            return None
        total += float(number) * units[unit]
        number = ""
        i += len(unit)
    return None if number else total


def parse_targets(body: object) -> list[Target]:
    """/api/v1/targets' active targets."""
    data = _data(body)
    active = data.get("activeTargets") if isinstance(data, dict) else None
    if not isinstance(active, list):
        raise PrometheusError("targets answer without `activeTargets`")
    out = []
    for item in active:
        if not isinstance(item, dict):
            continue
        raw_labels = item.get("labels")
        labels = raw_labels if isinstance(raw_labels, dict) else {}
        out.append(
            Target(
                instance=str(labels.get("instance", "")),
                job=str(labels.get("job", "")),
                health=str(item.get("health", "unknown")),
                last_error=str(item.get("lastError") or ""),
                scrape_url=str(item.get("scrapeUrl", "")),
                scrape_interval_s=parse_duration_s(item.get("scrapeInterval")),
                labels={str(k): str(v) for k, v in labels.items()},
            )
        )
    return out


class PrometheusApi:
    """Asks one Prometheus server; every failure is a PrometheusError naming the URL."""

    def __init__(self, url: str, client: httpx.AsyncClient, *, deadline_s: float = 2.0) -> None:
        self.url = url.rstrip("/")
        self.client = client
        self.deadline_s = deadline_s

    async def _get(self, path: str, params: dict[str, str] | None = None) -> object:
        try:
            response = await get_capped(
                self.client,
                f"{self.url}{path}",
                params=params,
                # The capped reader keeps the body as sent: ask Prometheus not to gzip it.
                headers={"Accept-Encoding": "identity"},
                deadline_s=self.deadline_s,
                max_bytes=QUERY_MAX_BYTES,
            )
        except BodyTooLarge as exc:
            raise PrometheusError(f"{self.url}{path}: {exc}") from None
        except DeadlineExceeded:
            raise PrometheusError(
                f"Prometheus at {self.url}: no answer within {self.deadline_s:g} s"
            ) from None
        except httpx.HTTPError as exc:
            if connection_refused(exc):
                raise PrometheusError(
                    f"Prometheus at {self.url}: connection refused (is it running?)"
                ) from None
            raise PrometheusError(
                f"Prometheus at {self.url}: {type(exc).__name__}: {exc}"
            ) from None
        try:
            body = response.json()
        except ValueError:
            raise PrometheusError(
                f"{self.url}{path}: HTTP {response.status_code}, not JSON "
                "(is this a Prometheus server?)"
            ) from None
        # Prometheus answers bad queries with 400/422 and an error envelope: its words win.
        if response.status_code != 200 and not (
            isinstance(body, dict) and body.get("status") == "error"
        ):
            raise PrometheusError(f"{self.url}{path}: HTTP {response.status_code}")
        return body

    async def query(self, expr: str, at_wall: float | None = None) -> list[Series]:
        params = {"query": expr}
        if at_wall is not None:
            params["time"] = f"{at_wall:.3f}"
        return parse_vector(await self._get("/api/v1/query", params))

    async def query_range(
        self, expr: str, start_wall: float, end_wall: float, step_s: float
    ) -> list[RangeSeries]:
        params = {
            "query": expr,
            "start": f"{start_wall:.3f}",
            "end": f"{end_wall:.3f}",
            "step": f"{max(step_s, 0.001):g}",
        }
        return parse_matrix(await self._get("/api/v1/query_range", params))

    async def targets(self) -> list[Target]:
        return parse_targets(await self._get("/api/v1/targets", {"state": "active"}))


def finite_or_none(value: float) -> float | None:
    return None if math.isnan(value) or math.isinf(value) else value
