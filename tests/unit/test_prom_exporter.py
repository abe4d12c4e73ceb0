"""`export --prometheus`: the families built from the store and the latest run, rendered in
Prometheus' text format and read back with prometheus_client's own parser."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from console.bench.results import CellSummary, LevelSummary, RunSummary
from console.core.errors import UsageError
from console.export.prom_exporter import Exposition, families, registry_of
from console.telemetry.keys import SourceId
from console.telemetry.samples import Binding, HostSample, SourceState, SourceStatus
from console.telemetry.store import TimeSeriesStore


def _store() -> TimeSeriesStore:
    store = TimeSeriesStore(10)
    store.put_latest(
        HostSample(
            t_mono=1.0,
            source=SourceId.HOST,
            cpu_pct=10.0,
            numa=(),
            mem_used_bytes=None,
            mem_total_bytes=None,
            load1=None,
            load5=None,
            load15=None,
            bindings=(
                Binding(
                    server_id="qwen-tp4-1",
                    intended_nodes=(0,),
                    actual_nodes=(0,),
                    actual_cpus=32,
                    processes=4,
                ),
                Binding(
                    server_id="kimi-tp8-1",
                    intended_nodes=(1,),
                    actual_nodes=(0, 1),
                    actual_cpus=64,
                    processes=8,
                ),
            ),
        )
    )
    store.set_status(SourceStatus(name=SourceId.server("qwen-tp4-1"), state=SourceState.OK))
    store.set_status(
        SourceStatus(name=SourceId.server("kimi-tp8-1"), state=SourceState.STALE, reason="x")
    )
    return store


def _summary() -> RunSummary:
    return RunSummary(
        run_id="20261202-010000-ddtree",
        run_dir="/runs/20261202-010000-ddtree",
        name="ddtree",
        status="done",
        cells=(
            CellSummary(
                cell_id="qwen-tp1-ddtree-b15",
                levels=(
                    LevelSummary(
                        level=0, label="concurrency 1", accept_length=14.8, output_tok_s=173.4
                    ),
                    LevelSummary(
                        level=1, label="concurrency 4", accept_length=None, output_tok_s=400.0
                    ),
                ),
            ),
        ),
    )


def _values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _render(store: TimeSeriesStore, summary: RunSummary | None) -> dict:
    exposition = Exposition()
    exposition.update(families(store, summary))
    return _values(generate_latest(registry_of(exposition)).decode())


def test_numa_binding_truth():
    values = _render(_store(), None)
    assert values[("ddconsole_numa_binding_matches", (("server", "qwen-tp4-1"),))] == 1
    assert values[("ddconsole_numa_binding_matches", (("server", "kimi-tp8-1"),))] == 0
    info = (
        "ddconsole_numa_binding_info",
        (("actual_nodes", "0,1"), ("intended_nodes", "1"), ("server", "kimi-tp8-1")),
    )
    assert values[info] == 1
    assert values[("ddconsole_numa_binding_cpus", (("server", "kimi-tp8-1"),))] == 64


def test_source_states_one_hot():
    values = _render(_store(), None)
    stale = {
        state: values[
            ("ddconsole_source_state", (("source", "server:kimi-tp8-1"), ("state", state)))
        ]
        for state in ("ok", "degraded", "stale", "stalled", "unavailable")
    }
    assert stale == {"ok": 0, "degraded": 0, "stale": 1, "stalled": 0, "unavailable": 0}


def test_acceptance_per_level_of_the_latest_run():
    values = _render(_store(), _summary())
    run = ("run_id", "20261202-010000-ddtree")
    cell = ("cell", "qwen-tp1-ddtree-b15")
    level0 = tuple(sorted([cell, ("level", "0"), ("load", "concurrency 1"), run]))
    level1 = tuple(sorted([cell, ("level", "1"), ("load", "concurrency 4"), run]))
    assert values[("ddconsole_run_level_accept_length", level0)] == 14.8
    assert ("ddconsole_run_level_accept_length", level1) not in values  # no acceptance known
    assert values[("ddconsole_run_level_output_tok_s", level1)] == 400.0
    info = ("ddconsole_run_info", (("name", "ddtree"), ("run_id", run[1]), ("status", "done")))
    assert values[info] == 1


def test_empty_store_and_no_run_still_render():
    values = _render(TimeSeriesStore(10), None)
    assert values == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (":9400", ("127.0.0.1", 9400)),
        ("localhost:9", ("127.0.0.1", 9)),
        ("127.0.0.1:1", ("127.0.0.1", 1)),
    ],
)
def test_listen_addresses(text, expected):
    from console.cli.cmd_export import listen_address

    assert listen_address(text) == expected


@pytest.mark.parametrize("text", ["9400", ":0", ":70000", "0.0.0.0:9400", "example.com:9400", ":x"])
def test_bad_listen_addresses_are_usage_errors(text):
    from console.cli.cmd_export import listen_address

    with pytest.raises(UsageError, match="--prometheus"):
        listen_address(text)
