"""The console's own readings as Prometheus metrics: what no exporter has.

DCGM's and SGLang's exporters already publish GPUs and servers; this publishes what only the
console knows (documented in docs/prometheus-export.md):

- `ddconsole_numa_binding_matches{server}`: 1 when every scheduler of the server runs on its
  plan's NUMA nodes, 0 when one strays; `ddconsole_numa_binding_info{server,
  intended_nodes, actual_nodes}` (always 1) says where; `ddconsole_numa_binding_cpus{server}`
  counts the CPUs its schedulers may run on.
- `ddconsole_source_state{source, state}`: 1 for each telemetry source's current state, 0
  for its other states (ok, degraded, stale, stalled, unavailable), so an alert can say
  `ddconsole_source_state{state="stale"} == 1`.
- The latest benchmark run with a summary: `ddconsole_run_info{run_id, name, status}` (1),
  and per level `ddconsole_run_level_accept_length{run_id, cell, level, load}` (tokens
  committed per verify step, bonus token included) and
  `ddconsole_run_level_output_tok_s{run_id, cell, level, load}`.

Families are built on the event loop from the store (its single writer's side) and handed
whole to the HTTP server's thread, which only serves the last list.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from console.bench.results import RunSummary
from console.telemetry.samples import SourceState
from console.telemetry.store import TimeSeriesStore

PREFIX = "ddconsole_"


def _nodes(nodes: Sequence[int]) -> str:
    return ",".join(str(n) for n in nodes)


def binding_families(store: TimeSeriesStore) -> list[Metric]:
    matches = GaugeMetricFamily(
        f"{PREFIX}numa_binding_matches",
        "1 when every scheduler of the server runs on its plan's NUMA nodes, else 0",
        labels=["server"],
    )
    info = GaugeMetricFamily(
        f"{PREFIX}numa_binding_info",
        "Where a server's schedulers may run (actual_nodes) against its plan (intended_nodes)",
        labels=["server", "intended_nodes", "actual_nodes"],
    )
    cpus = GaugeMetricFamily(
        f"{PREFIX}numa_binding_cpus",
        "CPUs the server's schedulers may run on",
        labels=["server"],
    )
    host = store.host()
    for binding in host.bindings if host is not None else ():
        matches.add_metric([binding.server_id], 1.0 if binding.matches else 0.0)
        info.add_metric(
            [binding.server_id, _nodes(binding.intended_nodes), _nodes(binding.actual_nodes)], 1.0
        )
        cpus.add_metric([binding.server_id], float(binding.actual_cpus))
    return [matches, info, cpus]


def source_families(store: TimeSeriesStore) -> list[Metric]:
    state = GaugeMetricFamily(
        f"{PREFIX}source_state",
        "1 for the telemetry source's current state, 0 for its other states",
        labels=["source", "state"],
    )
    for name, status in sorted(store.statuses().items()):
        for each in SourceState:
            state.add_metric([str(name), each.value], 1.0 if status.state is each else 0.0)
    return [state]


def run_families(summary: RunSummary | None) -> list[Metric]:
    info = GaugeMetricFamily(
        f"{PREFIX}run_info",
        "The latest benchmark run with a summary (always 1)",
        labels=["run_id", "name", "status"],
    )
    accept = GaugeMetricFamily(
        f"{PREFIX}run_level_accept_length",
        "Tokens committed per verify step (bonus token included) of each level of the latest "
        "run, from counter deltas taken before and after the level",
        labels=["run_id", "cell", "level", "load"],
    )
    tok_s = GaugeMetricFamily(
        f"{PREFIX}run_level_output_tok_s",
        "Output tokens per second of each level of the latest run",
        labels=["run_id", "cell", "level", "load"],
    )
    if summary is not None:
        info.add_metric([summary.run_id, summary.name or "", summary.status], 1.0)
        for cell in summary.cells:
            for level in cell.levels:
                labels = [summary.run_id, cell.cell_id, str(level.level), level.label or ""]
                if level.accept_length is not None:
                    accept.add_metric(labels, level.accept_length)
                if level.output_tok_s is not None:
                    tok_s.add_metric(labels, level.output_tok_s)
    return [info, accept, tok_s]


def families(store: TimeSeriesStore, summary: RunSummary | None) -> list[Metric]:
    return [*binding_families(store), *source_families(store), *run_families(summary)]


class Exposition(Collector):
    """The last families built; what the HTTP server's thread serves."""

    def __init__(self) -> None:
        self._families: list[Metric] = []

    def update(self, built: list[Metric]) -> None:
        self._families = built  # one reference swap: the server thread sees old or new

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def registry_of(exposition: Exposition) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exposition)
    return registry
