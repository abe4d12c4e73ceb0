"""The store's latest contents as plain JSON: `metrics --json`, snapshots, the recorder."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from console.telemetry.samples import GpuSample
from console.telemetry.store import TimeSeriesStore


def store_reading(
    store: TimeSeriesStore, lifecycle: dict[str, dict[str, Any]]
) -> dict[str, object]:
    """Everything the store holds now, as plain JSON-able data; `lifecycle` is each managed
    server's status JSON by id (what `ServerStatus.to_json()` gives)."""
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
            entry.update(
                {
                    "state": life.get("state"),
                    "url": life.get("url"),
                    "profile": life.get("profile"),
                    "layout": life.get("layout"),
                    "variant": life.get("variant"),
                    "gpus": list(life.get("gpus") or []),
                }
            )
        if server_sample is not None:
            entry.update(
                {
                    "tok_s": server_sample.decode_tok_s,
                    "finished_tok_s": server_sample.finished_tok_s,
                    "requests_s": server_sample.requests_s,
                    "gen_throughput": server_sample.gen_throughput,
                    "running": server_sample.running,
                    "queued": server_sample.queued,
                    "token_usage": server_sample.token_usage,
                    "accept_length": server_sample.accept_length,
                    "accept_rate": server_sample.accept_rate,
                    "ttft_p50_s": server_sample.ttft_p50_s,
                    "ttft_p99_s": server_sample.ttft_p99_s,
                    "itl_p50_s": server_sample.itl_p50_s,
                    "itl_p99_s": server_sample.itl_p99_s,
                    "e2e_p50_s": server_sample.e2e_p50_s,
                    "e2e_p99_s": server_sample.e2e_p99_s,
                }
            )
        servers.append(entry)
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
