"""Per-worker figures of a benchmark run through SGLang's model gateway.

The gateway (`smg`) re-exposes every worker's `/metrics` on its own `/engine_metrics`, each
series labelled `worker_addr` with the worker's URL. Counters read before and after a run
give each worker's share: output tokens (`sglang:generation_tokens_total`) and finished
requests (`sglang:num_requests_total`). A server that is no gateway answers 404 there, and
the run then has no per-worker table.

The readings bracket the whole run, so the figures hold every level merged, each level's
warm-up requests, and a rate over the run's wall time (prompt making, flushes and idle time
included). They say so, and carry beside them what the run itself measured (its requests'
output tokens over its levels' seconds) to compare with.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from console.telemetry.prometheus import MetricsParseError, parse

WORKERS_FILE = "workers.json"
OUTPUT_TOKENS = "sglang:generation_tokens_total"
REQUESTS = "sglang:num_requests_total"
WORKER_LABEL = "worker_addr"


@dataclass(frozen=True)
class WorkerCounters:
    """One worker's counters at one moment (summed over its label sets)."""

    output_tokens: float
    requests: float


@dataclass(frozen=True)
class GatewayReading:
    url: str
    monotonic: float
    workers: dict[str, WorkerCounters]


@dataclass(frozen=True)
class WorkerFigures:
    worker: str
    output_tokens: int
    requests: int
    output_tok_s: float
    share: float
    """This worker's part of all output tokens, 0-1."""

    def to_json(self) -> dict[str, Any]:
        return {
            "worker_addr": self.worker,
            "output_tokens": self.output_tokens,
            "requests": self.requests,
            "output_tok_s": round(self.output_tok_s, 3),
            "share": round(self.share, 4),
        }


def counters_by_worker(text: str) -> dict[str, WorkerCounters]:
    """Each `worker_addr`'s counters in `/engine_metrics` text."""
    snapshot = parse(text, {OUTPUT_TOKENS, REQUESTS})
    workers: set[str] = set()
    for name in (OUTPUT_TOKENS, REQUESTS):
        workers |= {
            labels[WORKER_LABEL]
            for labels, _ in snapshot.samples.get(name, [])
            if WORKER_LABEL in labels
        }
    return {
        worker: WorkerCounters(
            snapshot.total(OUTPUT_TOKENS, **{WORKER_LABEL: worker}) or 0.0,
            snapshot.total(REQUESTS, **{WORKER_LABEL: worker}) or 0.0,
        )
        for worker in sorted(workers)
    }


def read_gateway(
    url: str, headers: Mapping[str, str] | None = None, timeout: float = 5.0
) -> GatewayReading | None:
    """The gateway's per-worker counters now; None when `url` is no gateway (or does not
    answer, or answers something unreadable)."""
    try:
        response = httpx.get(
            url.rstrip("/") + "/engine_metrics", headers=dict(headers or {}), timeout=timeout
        )
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        workers = counters_by_worker(response.text)
    except MetricsParseError:
        return None
    if not workers:
        return None
    return GatewayReading(url, time.monotonic(), workers)


def _increase(then: float, now: float) -> float:
    """A counter's increase; one lower than before was reset (its replica restarted), so all
    of it counts, as Prometheus's increase() takes it."""
    return now - then if now >= then else now


def per_worker(before: GatewayReading, after: GatewayReading) -> list[WorkerFigures]:
    """Each worker's output tokens and requests between two readings, and its rate over
    that time. A worker that left the gateway in between counts to its last reading (none);
    one that joined counts from zero."""
    seconds = max(after.monotonic - before.monotonic, 1e-9)
    deltas = {}
    for worker, now in after.workers.items():
        then = before.workers.get(worker, WorkerCounters(0.0, 0.0))
        deltas[worker] = (
            _increase(then.output_tokens, now.output_tokens),
            _increase(then.requests, now.requests),
        )
    total = sum(tokens for tokens, _ in deltas.values())
    return [
        WorkerFigures(
            worker,
            round(tokens),
            round(requests),
            tokens / seconds,
            tokens / total if total else 0.0,
        )
        for worker, (tokens, requests) in deltas.items()
    ]


SCOPE = (
    "whole run: every level merged, with its warm-up requests, over the run's wall time "
    "(flushes, prompt making and idle time included)"
)


@dataclass(frozen=True)
class Measured:
    """What the run itself measured: its requests' output tokens and its levels' seconds."""

    output_tokens: int
    requests: int
    seconds: float

    @property
    def output_tok_s(self) -> float:
        return self.output_tokens / self.seconds if self.seconds > 0 else 0.0


def measured(run_dir: Path) -> Measured | None:
    """The run folder's measured requests (`requests.jsonl`) and levels' wall seconds
    (`levels.jsonl`); None when it has no requests."""
    from console.bench.rundir import RunDir

    run = RunDir(run_dir)
    rows = run.read_jsonl("requests.jsonl")
    if not rows:
        return None
    tokens = sum(int(row["output_tokens"]) for row in rows if _number(row.get("output_tokens")))
    seconds = sum(
        float(row["wall_s"]) for row in run.read_jsonl("levels.jsonl") if _number(row.get("wall_s"))
    )
    return Measured(tokens, len(rows), seconds)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class LevelWorkers:
    """One level's per-worker figures through a gateway, from the level's own counters (read
    just before and after it: no warm-up), over the level's wall seconds."""

    cell: str
    level: int
    label: str
    seconds: float
    workers: list[WorkerFigures]

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell,
            "level": self.level,
            "label": self.label,
            "seconds": round(self.seconds, 3),
            "workers": [f.to_json() for f in self.workers],
        }


def level_workers(run_dir: Path) -> list[LevelWorkers]:
    """Each level through a gateway whose counters name the same workers before and after
    it, none of them restarted in between; a level that cannot say is left out."""
    from console.bench.results import LevelRecord
    from console.bench.rundir import RunDir

    found = []
    for raw in RunDir(run_dir).read_jsonl("levels.jsonl"):
        try:
            record = LevelRecord.from_json(raw)
        except ValueError:
            continue
        before, after = record.counters_before, record.counters_after
        if before is None or after is None or not before.workers:
            continue
        names = before.workers
        counts = (
            before.worker_generation_tokens,
            after.worker_generation_tokens,
            before.worker_requests,
            after.worker_requests,
        )
        if after.workers != names or any(len(c) != len(names) for c in counts):
            continue
        tokens = [b - a for a, b in zip(counts[0], counts[1], strict=True)]
        requests = [b - a for a, b in zip(counts[2], counts[3], strict=True)]
        if any(value < 0 for value in (*tokens, *requests)):
            continue  # a worker restarted during the level
        seconds = record.wall_s or 0.0
        total = sum(tokens)
        found.append(
            LevelWorkers(
                record.cell,
                record.level,
                record.label or f"level {record.level + 1}",
                seconds,
                [
                    WorkerFigures(
                        name,
                        round(count),
                        round(done),
                        count / seconds if seconds > 0 else 0.0,
                        count / total if total else 0.0,
                    )
                    for name, count, done in zip(names, tokens, requests, strict=True)
                ],
            )
        )
    return found


def level_table(levels: list[LevelWorkers]) -> str | None:
    """Per level, each worker's output tokens, requests, tok/s and share (None: no level
    through a gateway could say)."""
    if not levels:
        return None
    lines = ["per worker, each level (its own counters, no warm-up; TOK/S over its wall time):"]
    for level in levels:
        parts = [
            f"{w.worker} {w.output_tokens} tok {w.requests} req {w.output_tok_s:.1f} tok/s "
            f"{100 * w.share:.0f}%"
            for w in level.workers
        ]
        lines.append(f"  {level.cell} {level.label}: " + " | ".join(parts))
    return "\n".join(lines)


@dataclass(frozen=True)
class WorkersReport:
    """A run's per-worker figures through one gateway: what `workers.json` holds."""

    gateway: str
    seconds: float
    workers: list[WorkerFigures]
    measured: Measured | None = None
    levels: list[LevelWorkers] = field(default_factory=list)

    @property
    def total_output_tokens(self) -> int:
        return sum(f.output_tokens for f in self.workers)

    @property
    def total_output_tok_s(self) -> float:
        return sum(f.output_tok_s for f in self.workers)

    def to_json(self) -> dict[str, Any]:
        return {
            "gateway": self.gateway,
            "seconds": round(self.seconds, 3),
            "source": "the gateway's /engine_metrics, before and after the run",
            "scope": SCOPE,
            "total_output_tokens": self.total_output_tokens,
            "total_output_tok_s": round(self.total_output_tok_s, 3),
            "measured_output_tokens": None
            if self.measured is None
            else self.measured.output_tokens,
            "measured_requests": None if self.measured is None else self.measured.requests,
            "measured_seconds": None if self.measured is None else round(self.measured.seconds, 3),
            "measured_output_tok_s": (
                None if self.measured is None else round(self.measured.output_tok_s, 3)
            ),
            "workers": [f.to_json() for f in self.workers],
            "levels": [level.to_json() for level in self.levels],
        }


def workers_report(
    before: GatewayReading, after: GatewayReading, run: Measured | None = None
) -> WorkersReport:
    return WorkersReport(
        after.url, after.monotonic - before.monotonic, per_worker(before, after), run
    )


def save(run_dir: Path, report: WorkersReport) -> Path:
    """`workers.json` in the run folder, written whole."""
    path = run_dir / WORKERS_FILE
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    os.replace(temp, path)
    return path


def table(report: WorkersReport) -> str:
    """The per-worker lines a run prints after its summary."""
    rows = [("WORKER", "OUTPUT TOK", "REQUESTS", "TOK/S", "SHARE")]
    for worker in report.workers:
        rows.append(
            (
                worker.worker,
                str(worker.output_tokens),
                str(worker.requests),
                f"{worker.output_tok_s:.1f}",
                f"{100 * worker.share:.0f}%",
            )
        )
    rows.append(
        ("total", str(report.total_output_tokens), "", f"{report.total_output_tok_s:.1f}", "")
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        )
        for row in rows
    ]
    head = (
        f"per worker through the gateway {report.gateway}, whole run ({report.seconds:.1f} s of "
        "wall time, every level with its warm-up; TOK/S over that time):"
    )
    foot = []
    run = report.measured
    if run is not None:
        foot.append(
            f"the run measured {run.output_tokens} of these output tokens in {run.requests} "
            f"requests over {run.seconds:.1f} s of levels ({run.output_tok_s:.1f} tok/s); "
            f"the other {report.total_output_tokens - run.output_tokens} were warm-up or "
            "other traffic"
        )
    per_level = level_table(report.levels)
    return "\n".join([head, *lines, *foot, *([per_level] if per_level else [])])


def finish(
    before: GatewayReading | None, run_dir: Path, headers: Mapping[str, str] | None = None
) -> str | None:
    """After a run through a gateway (`before` read at its start): `workers.json` in the run
    folder and the table to print; None when the run was not through a gateway."""
    if before is None:
        return None
    after = read_gateway(before.url, headers)
    if after is None:
        return None
    report = replace(
        workers_report(before, after, measured(run_dir)), levels=level_workers(run_dir)
    )
    try:
        save(run_dir, report)
    except OSError as exc:
        return table(report) + f"\n(not saved: {run_dir / WORKERS_FILE}: {exc.strerror or exc})"
    return table(report)
