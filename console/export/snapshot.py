"""The headless snapshot: what the console shows, as one JSON document and a Markdown report.

The JSON follows `docs/snapshot.schema.json` (`schema_version` 3): host and topology, the
servers with their plans, a complete metrics reading, the last minutes of history of the
series the dashboard charts, the state of every source, and the latest run's summary.
Secrets are masked (`***`) before anything is returned.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from console import __version__
from console.bench.results import RunSummary
from console.bench.tables import (
    ACCEPTANCE_NOTE,
    acceptance_lines,
    headers,
    judged,
    knee_lines,
    scaling_tables,
    slo_rows,
    slo_title,
    slo_view,
)
from console.core.redact import redact_json, secret_values
from console.telemetry.keys import SourceId
from console.telemetry.reading import latency_pair, latency_scope, store_reading
from console.telemetry.samples import GpuSample, HostSample, ServerSample
from console.telemetry.store import TimeSeriesStore

SCHEMA_VERSION = 3
"""2: stopped/failed servers carry no live figures; their last ones are under `last`."""
HISTORY_S = 300.0


def history(
    store: TimeSeriesStore, now: float, seconds: float, server_ids: list[str], gpus: list[int]
) -> dict[str, Any]:
    """`{series key: [[seconds before now, value], ...]}` over the last `seconds`."""
    keys = [SourceId.server(s).series(n) for s in server_ids for n in ServerSample.SERIES]
    keys += [SourceId.gpu(g).series(n) for g in gpus for n in GpuSample.SERIES]
    keys += [SourceId.HOST.series(n) for n in HostSample.SERIES]
    out: dict[str, Any] = {}
    for key in keys:
        window = store.window(key, now - seconds)
        points = [
            [round(t - now, 3), v]
            for t, v in zip(window.times, window.values, strict=True)
            if v is not None and t <= now
        ]
        if points:
            out[key] = points
    return {"seconds": seconds, "series": out}


def build_snapshot(
    *,
    store: TimeSeriesStore,
    now_mono: float,
    servers: list[dict[str, Any]],
    topology: dict[str, Any],
    latest_run: RunSummary | None,
    demo: bool,
    source: str,
    history_s: float = HISTORY_S,
    secret_env: list[str] | None = None,
    now_wall: float | None = None,
) -> dict[str, Any]:
    """`now_wall` is the wall-clock time of `now_mono` (a recording's instant); the time the
    snapshot is taken by default. It dates a stopped server's last figures."""
    lifecycle = {str(s.get("id")): s for s in servers}
    gpus = [int(g["index"]) for g in topology.get("gpus", [])]
    created = time.time()
    document = {
        "schema_version": SCHEMA_VERSION,
        "generator": f"ddconsole {__version__}",
        "created_wall": created,
        "source": source,
        "demo": demo,
        "host": {"hostname": socket.gethostname()},
        "topology": topology,
        "servers": servers,
        "reading": store_reading(
            store, lifecycle, now_mono=now_mono, now_wall=created if now_wall is None else now_wall
        ),
        "history": history(store, now_mono, history_s, list(lifecycle), gpus),
        "latest_run": None if latest_run is None else latest_run.to_json(),
    }
    names = list(secret_env or [])
    names += [
        str(s["plan"]["api_key_env"]) for s in servers if s.get("plan", {}).get("api_key_env")
    ]
    masked: dict[str, Any] = redact_json(document, secret_values(names=names))
    return masked


def is_empty(snapshot: dict[str, Any]) -> bool:
    """No GPUs, no servers and no runs: nothing worth a report."""
    return (
        not snapshot["topology"].get("gpus")
        and not snapshot["servers"]
        and not snapshot["latest_run"]
    )


def _fmt(value: Any, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value * scale:{spec}}"


def _cell(value: object) -> str:
    """A table cell's text: pipes escaped and line breaks flattened, so a reason taken from a
    log line cannot split or end its row."""
    text = "" if value is None else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def _clock(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall))


def to_markdown(
    snapshot: dict[str, Any],
    run: RunSummary | None = None,
    run_table: str | None = None,
    *,
    unreadable_runs: list[tuple[str, str]] | None = None,
) -> str:
    """The report; `snapshot` is the document `build_snapshot` made (JSON, read back here),
    `run` the latest run it holds, `unreadable_runs` (run id, reason) for each run that
    could not be read (listed with its reason, so damage shows where the reader looks)."""
    created = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(snapshot["created_wall"]))
    lines = [
        f"# ddconsole snapshot: {snapshot['host']['hostname']}",
        "",
        f"{created} · {snapshot['generator']} · source: {snapshot['source']}"
        + (" · **demo mode** (simulated host and servers)" if snapshot["demo"] else ""),
        "",
        "## Servers",
        "",
    ]
    if snapshot["servers"]:
        lines += [
            "| id | profile | layout | variant | state | port | GPUs | reason |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for s in snapshot["servers"]:
            cells = [
                s.get("id"),
                s.get("profile"),
                s.get("layout"),
                s.get("variant"),
                s.get("state"),
                s.get("port"),
                ",".join(map(str, s.get("gpus") or [])),
                s.get("reason"),
            ]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    else:
        lines.append("No managed servers.")
    reading = snapshot["reading"]
    metrics = [s for s in reading["servers"] if s.get("tok_s") is not None]
    if metrics:
        lines += [
            "",
            "## Server metrics (now)",
            "",
            "| server | output tok/s | accept length | running | queued | TTFT p50/p99 ms "
            "| ITL p50/p99 ms | latency over |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for s in metrics:
            lines.append(
                f"| {s['id']} | {_fmt(s.get('tok_s'), '.1f')} | "
                f"{_fmt(s.get('accept_length'), '.2f')} | {_fmt(s.get('running'), '.0f')} | "
                f"{_fmt(s.get('queued'), '.0f')} | {_cell(latency_pair(s, 'ttft'))} | "
                f"{_cell(latency_pair(s, 'itl'))} | {_cell(latency_scope(s) or '-')} |"
            )
        lines += [
            "",
            "Latency percentiles come from SGLang's histogram buckets: a value is shown where "
            "its bucket resolves it, else the bucket (`<100` is under SGLang's first bound).",
        ]
    stopped = [s for s in reading["servers"] if s.get("live") is False]
    if stopped:
        lines += ["", "## Stopped servers (last values, not live)", ""]
        for s in stopped:
            last = s.get("last")
            state = s.get("state")
            if last:
                lines.append(
                    f"- {s['id']} ({state}): last {_fmt(last.get('tok_s'), '.1f')} tok/s, "
                    f"running {_fmt(last.get('running'), '.0f')}, "
                    f"queued {_fmt(last.get('queued'), '.0f')}, "
                    f"TTFT p50/p99 {latency_pair(last, 'ttft')} ms at {_clock(last['at_wall'])}"
                )
            else:
                why = f": {s['reason']}" if s.get("reason") else ""
                lines.append(f"- {s['id']} ({state}{why}): no figures held from before it ended")
    lines += ["", "## GPUs", ""]
    gpus = reading["gpus"]
    if gpus:
        lines += [
            "| GPU | NUMA | util | memory | power | temp | PCIe RX | PCIe TX | link now/max |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for g in gpus:
            lines.append(
                f"| {g.get('index')} | {g.get('numa_node', '-')} "
                f"| {_fmt(g.get('util_pct'), '.0f')}% "
                f"| {_fmt(g.get('mem_used_bytes'), '.1f', 2**-30)}/"
                f"{_fmt(g.get('mem_total_bytes'), '.0f', 2**-30)} GiB "
                f"| {_fmt(g.get('power_w'), '.0f')} W | {_fmt(g.get('temp_c'), '.0f')} C "
                f"| {_fmt(g.get('pcie_rx_bytes_s'), '.2f', 1e-9)} GB/s "
                f"| {_fmt(g.get('pcie_tx_bytes_s'), '.2f', 1e-9)} GB/s "
                f"| Gen{g.get('pcie_gen_current')} x{g.get('pcie_width_current')} / "
                f"Gen{g.get('pcie_gen_max')} x{g.get('pcie_width_max')} |"
            )
    else:
        lines.append(snapshot["topology"].get("gpu_status") or "No GPUs.")
    host = reading.get("host")
    if host:
        lines += [
            "",
            "## Host",
            "",
            f"CPU {_fmt(host.get('cpu_pct'), '.0f')}%; per NUMA node: "
            + ", ".join(
                f"node {n['node']} {_fmt(n.get('cpu_pct'), '.0f')}% "
                f"(GPUs {','.join(map(str, n.get('gpus') or [])) or '-'})"
                for n in host.get("numa_nodes", [])
            ),
        ]
        for b in host.get("bindings", []):
            lines.append(
                f"- {b['server_id']}: intended NUMA {b['intended_nodes']}, actual "
                f"{b['actual_nodes']} ({'ok' if b['matches'] else 'MISMATCH'})"
            )
    lines += ["", "## Sources", ""]
    for source in reading["sources"]:
        reason = f" ({source['reason']})" if source.get("reason") else ""
        lines.append(f"- {source['name']}: {source['state']}{reason}")
    lines += ["", "## Latest run", ""]
    if run is not None:
        lines.append(f"{run.run_id} · {run.name} · {run.status}")
        if run_table:
            lines += ["", run_table.strip()]
        if judged(run):
            view = slo_view(run)
            lines += ["", f"{slo_title(run)}:", ""]
            lines += ["| " + " | ".join(headers(view)) + " |", "|" + " --- |" * len(view)]
            lines += ["| " + " | ".join(map(_cell, row)) + " |" for row in slo_rows(run)]
            lines += [f"- {line}" for line in knee_lines(run)]
        for side in scaling_tables(run):
            lines += ["", f"{side.title}:", ""]
            lines += ["| " + " | ".join(side.headers) + " |", "|" + " --- |" * len(side.headers)]
            lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in side.rows]
        for finding in run.findings:
            lines += ["", f"**{finding.kind}**: {finding.message}"]
        acceptance = acceptance_lines(run)
        if acceptance:
            lines += ["", ACCEPTANCE_NOTE, ""]
            lines += [f"- {line}" for line in acceptance]
    else:
        lines.append("No readable runs." if unreadable_runs else "No runs yet.")
    if unreadable_runs:
        lines += [
            "",
            "## Runs that could not be read",
            "",
            "| run | reason |",
            "| --- | --- |",
        ]
        lines += [f"| {_cell(run_id)} | {_cell(reason)} |" for run_id, reason in unreadable_runs]
    lines += [
        "",
        f"History: the last {snapshot['history']['seconds']:.0f} s of "
        f"{len(snapshot['history']['series'])} series are in snapshot.json.",
        "",
    ]
    return "\n".join(lines)
