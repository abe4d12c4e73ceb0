"""The store's latest contents as plain JSON: `metrics --json`, snapshots, the recorder."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from console.telemetry.quantile import Quantile, format_quantile
from console.telemetry.samples import GpuSample, ServerSample
from console.telemetry.store import TimeSeriesStore

NOT_LIVE_STATES = frozenset({"stopped", "failed", "exited"})
ENDED_LISTED_S = 3600.0
"""How long a managed server that ended stays in a reading once its telemetry source is gone
(with its state and reason, no figures): another host's console sees why it ended."""
"""Lifecycle states whose server has no live figures: the store's latest sample for it is
what it last served, shown apart (`last`) with the time it was taken, never as now."""

SERVER_FIGURES = (
    "tok_s",
    "finished_tok_s",
    "requests_s",
    "gen_throughput",
    "running",
    "queued",
    "token_usage",
    "accept_length",
    "accept_rate",
    "ttft_p50_s",
    "ttft_p99_s",
    "itl_p50_s",
    "itl_p99_s",
    "e2e_p50_s",
    "e2e_p99_s",
    "latency",
)


def latency_json(sample: ServerSample) -> dict[str, object]:
    """Each latency percentile with its histogram bucket, and what they cover."""
    out: dict[str, object] = {
        "scope": sample.latency_scope,
        "window_s": None if sample.latency_window_s is None else round(sample.latency_window_s, 3),
    }
    for name in ServerSample.LATENCY:
        found = sample.quantile(name)
        out[name.removesuffix("_s")] = None if found is None else found.to_json()
    return out


def latency_pair(entry: dict[str, Any], kind: str) -> str:
    """A reading's server entry's `kind` (ttft, itl, e2e) p50/p99 in ms, each as its
    histogram bucket supports it: `<100/<100`, `38/42`, `40-60/100-200`."""
    latency = entry.get("latency")
    found = [
        Quantile.from_json(latency.get(f"{kind}_{q}")) if isinstance(latency, dict) else None
        for q in ("p50", "p99")
    ]
    return "/".join(format_quantile(q, suffix=False) for q in found)


def latency_scope(entry: dict[str, Any]) -> str:
    """What a reading's server entry's latency percentiles cover, in words ('' unknown)."""
    latency = entry.get("latency")
    if not isinstance(latency, dict) or latency.get("scope") is None:
        return ""
    if latency["scope"] == "since_start":
        return "since server start (no window yet)"
    window = latency.get("window_s")
    return f"last {window:.0f} s" if isinstance(window, int | float) else "window"


def _figures(sample: ServerSample) -> dict[str, object]:
    return {
        "tok_s": sample.decode_tok_s,
        "finished_tok_s": sample.finished_tok_s,
        "requests_s": sample.requests_s,
        "gen_throughput": sample.gen_throughput,
        "running": sample.running,
        "queued": sample.queued,
        "token_usage": sample.token_usage,
        "accept_length": sample.accept_length,
        "accept_rate": sample.accept_rate,
        "ttft_p50_s": sample.ttft_p50_s,
        "ttft_p99_s": sample.ttft_p99_s,
        "itl_p50_s": sample.itl_p50_s,
        "itl_p99_s": sample.itl_p99_s,
        "e2e_p50_s": sample.e2e_p50_s,
        "e2e_p99_s": sample.e2e_p99_s,
        "latency": latency_json(sample),
    }


def store_reading(
    store: TimeSeriesStore,
    lifecycle: dict[str, dict[str, Any]],
    *,
    now_mono: float | None = None,
    now_wall: float | None = None,
) -> dict[str, object]:
    """Everything the store holds now, as plain JSON-able data; `lifecycle` is each managed
    server's status JSON by id (what `ServerStatus.to_json()` gives).

    A server whose lifecycle state is stopped or failed carries no live figures (they are
    null, `live` is false); its last sample is kept apart under `last`, with `at_wall`, the
    wall time it was taken (`now_mono`/`now_wall` map the store's clock to the wall clock;
    the process's own clocks by default)."""
    mono = time.monotonic() if now_mono is None else now_mono
    wall = time.time() if now_wall is None else now_wall
    latest = store.latest_all()
    statuses = store.statuses()
    gpus = []
    for sample in sorted(
        (s for s in latest.values() if isinstance(s, GpuSample)), key=lambda s: s.index
    ):
        data = asdict(sample)
        data.pop("source")
        status = statuses.get(sample.source)
        data["state"] = status.state.value if status else None
        data["reason"] = status.reason if status else None
        gpus.append(data)
    for name, status in sorted(statuses.items()):
        index = name.index
        if index is not None and all(g["index"] != index for g in gpus):
            gpus.append({"index": index, "state": status.state.value, "reason": status.reason})
    host = store.host()
    host_json = None
    if host is not None:
        host_json = {
            "cpu_pct": host.cpu_pct,
            "mem_used_bytes": host.mem_used_bytes,
            "mem_total_bytes": host.mem_total_bytes,
            "load": [host.load1, host.load5, host.load15],
            "numa_nodes": [
                {
                    "node": n.node,
                    "cpu_pct": n.cpu_pct,
                    "cpus": n.cpus,
                    "gpus": sorted(g["index"] for g in gpus if g.get("numa_node") == n.node),
                }
                for n in host.numa
            ],
            "bindings": [
                {
                    "server_id": b.server_id,
                    "intended_nodes": list(b.intended_nodes),
                    "actual_nodes": list(b.actual_nodes),
                    "actual_cpus": b.actual_cpus,
                    "processes": b.processes,
                    "matches": b.matches,
                }
                for b in host.bindings
            ],
        }
    servers = []
    for name, status in sorted(statuses.items()):
        if name.kind != "server":
            continue
        server_id = name.name
        server_sample = store.server(server_id)
        entry: dict[str, object] = {"id": server_id, "metrics_source": status.to_json()}
        life = lifecycle.get(server_id)
        if life is not None:
            entry.update(_identity(life))
        state = life.get("state") if life is not None else None
        live = state not in NOT_LIVE_STATES
        figures = _figures(server_sample) if server_sample is not None else None
        if live:
            if figures is not None:
                entry.update(figures)
            entry["live"] = True
            entry["last"] = None
        else:
            entry.update(dict.fromkeys(SERVER_FIGURES))
            entry["live"] = False
            entry["last"] = (
                None
                if figures is None or server_sample is None
                else dict(figures, at_wall=round(wall - (mono - server_sample.t_mono), 3))
            )
        servers.append(entry)
    listed = {entry["id"] for entry in servers}
    for server_id, life in sorted(lifecycle.items()):
        if server_id not in listed and _recently_ended(life, wall):
            servers.append(_ended_entry(server_id, life))
    cost = store.cost()
    return {
        "gpus": gpus,
        "host": host_json,
        "servers": servers,
        "console": {
            "cpu_pct": cost.cpu_pct,
            "rss_bytes": cost.rss_bytes,
            "poll_ms": dict(cost.poll_ms),
        }
        if cost is not None
        else None,
        "sources": [s.to_json() for _, s in sorted(statuses.items())],
    }


def _identity(life: dict[str, Any]) -> dict[str, object]:
    """What a reading says of a managed server from its lifecycle status."""
    identity: dict[str, object] = {
        "state": life.get("state"),
        "url": life.get("url"),
        "profile": life.get("profile"),
        "layout": life.get("layout"),
        "variant": life.get("variant"),
        "gpus": list(life.get("gpus") or []),
        "numa_nodes": list(life.get("numa_nodes") or []),
        "pid": life.get("pid"),
        "uptime_s": life.get("uptime_s"),
        "log_path": life.get("log_path"),
    }
    if life.get("state") in NOT_LIVE_STATES:
        identity["reason"] = life.get("reason")
        identity["ended_wall"] = life.get("ended_wall")
    return identity


def _recently_ended(life: dict[str, Any], now_wall: float) -> bool:
    ended = life.get("ended_wall")
    return (
        life.get("state") in NOT_LIVE_STATES
        and isinstance(ended, int | float)
        and now_wall - ended <= ENDED_LISTED_S
    )


def _ended_entry(server_id: str, life: dict[str, Any]) -> dict[str, object]:
    """A managed server that ended and is no longer read: its state and reason, no figures."""
    entry: dict[str, object] = {
        "id": server_id,
        "metrics_source": {
            "name": f"server:{server_id}",
            "state": "unavailable",
            "reason": f"the server {life.get('state')}",
            "last_poll_ms": None,
        },
    }
    entry.update(_identity(life))
    entry.update(dict.fromkeys(SERVER_FIGURES))
    entry["live"] = False
    entry["last"] = None
    return entry
