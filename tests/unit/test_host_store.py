"""A remote host's store fed from its readings: the reading is one `ddconsole --demo metrics
--once --json` really printed (a demo host with one ready TP1 server on GPU 0), checked
against docs/metrics.schema.json so the fixture cannot drift from what the verb prints."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import jsonschema
import pytest

from console.fleet.host_store import (
    HOST_CAPACITY,
    HOST_MAX_SERIES,
    HOST_MIN_CAPACITY,
    HOSTS_BUDGET_BYTES,
    HostStore,
    HostStores,
    feed,
    host_capacity,
    mark_stale,
    reading_servers,
    reading_topology,
)
from console.fleet.hosts import LOCAL_HOST, Host
from console.fleet.summary import HostSummary
from console.telemetry.keys import SourceId
from console.telemetry.samples import SourceState
from console.telemetry.store import DEFAULT_CAPACITY, TimeSeriesStore
from tests.conftest import REPO

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet

READING = json.loads((REPO / "tests/unit/fixtures/metrics-demo-reading.json").read_text())
SCHEMA = json.loads((REPO / "docs/metrics.schema.json").read_text())
SERVER = "qwen3.6-27b-tp1-1"


@pytest.fixture
def reading() -> dict[str, Any]:
    return copy.deepcopy(READING)


def _store() -> TimeSeriesStore:
    return TimeSeriesStore(HOST_CAPACITY, HOST_MAX_SERIES)


def test_the_fixture_is_a_reading_as_the_schema_defines_it() -> None:
    jsonschema.validate(READING, SCHEMA)


def test_two_readings_make_series_under_the_local_stores_names(reading: dict[str, Any]) -> None:
    store = _store()
    feed(store, READING, 100.0)
    reading["gpus"][0]["util_pct"] = 87.0
    reading["servers"][0]["tok_s"] = 61.5
    reading["servers"][0]["running"] = 4.0
    reading["host"]["numa_nodes"][1]["cpu_pct"] = 12.5
    feed(store, reading, 101.0)

    util = store.window(SourceId.gpu(0).series("util_pct"))
    assert util.times == (100.0, 101.0)
    assert util.values == (0.0, 87.0)
    tok = store.window(SourceId.server(SERVER).series("decode_tok_s"))
    assert tok.values == (0.0, 61.5)
    assert store.window(SourceId.server(SERVER).series("running")).values == (0.0, 4.0)
    assert store.window(SourceId.HOST.series("numa.1.cpu_pct")).values == (2.0, 12.5)
    # Every GPU's charted fields, as the local poller names them.
    for index in range(8):
        for name in ("util_pct", "mem_used_bytes", "power_w", "pcie_rx_bytes_s"):
            assert len(store.window(SourceId.gpu(index).series(name)).times) == 2
    assert store.version == 2

    gpu = store.gpu(0)
    assert gpu is not None
    assert gpu.numa_node == 0
    assert (gpu.pcie_gen_max, gpu.pcie_width_current) == (5, 16)
    assert gpu.throttle_reasons == ("gpu_idle",)
    assert gpu.t_mono == 101.0
    sample = store.server(SERVER)
    assert sample is not None
    assert sample.decode_tok_s == 61.5
    assert sample.latency_scope == "since_start"
    # A percentile whose bucket is too wide (TTFT 5-10 s) keeps its bucket and is no point
    # on a chart; a resolved one (ITL 22-27 ms) is.
    ttft = sample.quantile("ttft_p50_s")
    assert ttft is not None
    assert (ttft.lower_s, ttft.upper_s, ttft.resolved) == (5.0, 10.0, False)
    assert store.window(SourceId.server(SERVER).series("ttft_p50_s")).times == ()
    assert store.window(SourceId.server(SERVER).series("itl_p50_s")).values == (0.0245, 0.0245)
    host = store.host()
    assert host is not None
    assert [(n.node, n.cpus) for n in host.numa] == [(0, 32), (1, 32)]
    assert host.bindings[0].server_id == SERVER
    assert host.bindings[0].matches
    status = store.status(SourceId.server(SERVER))
    assert status is not None
    assert status.state is SourceState.OK
    assert status.last_ok_mono == 101.0


def test_a_host_store_is_bounded_as_the_local_one() -> None:
    assert HOST_CAPACITY == DEFAULT_CAPACITY
    store = TimeSeriesStore(4, 8)
    for step in range(6):
        feed(store, READING, float(step))
    assert store.series_count() == 8
    assert store.dropped_series > 0
    assert len(store.window(SourceId.gpu(0).series("util_pct")).times) == 4


def _with_server(server_id: str) -> dict[str, Any]:
    """The demo reading with its one server (and that server's binding, source state and
    poll time) renamed `server_id`."""
    text = json.dumps(READING).replace(SERVER, server_id)
    return json.loads(text)


def test_servers_coming_and_going_leave_room_for_a_new_ones_series() -> None:
    """100 server ids through one host store, each listed for a few readings: the series of
    servers gone longest are freed as the store fills, so the newest one still gets its
    history, the host's own series keep theirs, and nothing is refused."""
    store = _store()
    t = 0.0
    for number in range(100):
        reading = _with_server(f"churn-{number}")
        for _ in range(3):
            t += 1.0
            feed(store, reading, t)
    assert store.series_count() <= HOST_MAX_SERIES
    assert store.freed_series > 0
    assert store.dropped_series == 0
    feed(store, _with_server("newest"), t + 1)
    feed(store, _with_server("newest"), t + 2)
    tok = store.window(SourceId.server("newest").series("decode_tok_s"))
    assert tok.times == (t + 1, t + 2)
    # A series of this host itself and one of a server still recent are kept whole.
    assert len(store.window(SourceId.gpu(0).series("util_pct")).times) == 302
    assert len(store.window(SourceId.server("churn-99").series("decode_tok_s")).times) == 3
    assert store.window(SourceId.server("churn-0").series("decode_tok_s")).times == ()


def test_a_store_full_of_listed_sources_counts_what_it_refuses() -> None:
    """No source is gone, so nothing can be freed: the new series is refused and counted."""
    store = TimeSeriesStore(4, 20)
    feed(store, READING, 1.0)
    assert store.series_count() == 20
    assert store.dropped_series > 0
    assert store.freed_series == 0


def test_a_server_gone_or_stopped_and_damaged_fields(reading: dict[str, Any]) -> None:
    store = _store()
    feed(store, READING, 1.0)
    entry = reading["servers"][0]
    entry.update(state="stopped", live=False, tok_s=None, running=None)
    reading["gpus"] = reading["gpus"][:4]
    reading["sources"] = [s for s in reading["sources"] if s["name"] not in {"gpu:6", "gpu:7"}]
    reading["host"]["load"] = "high"
    reading["gpus"][1]["util_pct"] = "busy"
    feed(store, reading, 2.0)
    # A stopped server adds no point; its last live figures stay its latest sample.
    assert store.window(SourceId.server(SERVER).series("decode_tok_s")).times == (1.0,)
    last = store.server(SERVER)
    assert last is not None
    assert last.t_mono == 1.0
    # GPUs the reading no longer lists have no latest sample; their history stays.
    assert store.gpu(7) is None
    assert store.window(SourceId.gpu(7).series("util_pct")).times == (1.0,)
    gpu1 = store.gpu(1)
    assert gpu1 is not None
    assert gpu1.util_pct is None
    host = store.host()
    assert host is not None
    assert host.load1 is None

    feed(store, {"gpus": "none", "host": None, "servers": [{"id": 3}], "sources": [7]}, 3.0)
    assert store.gpu(0) is None
    assert store.host() is None


def test_a_stale_host_keeps_its_last_figures_with_the_reason() -> None:
    store = _store()
    feed(store, READING, 1.0)
    mark_stale(store, "connection lost: reset by peer")
    statuses = store.statuses()
    assert statuses
    assert {s.state for s in statuses.values()} == {SourceState.STALE}
    assert {s.reason for s in statuses.values()} == {"connection lost: reset by peer"}
    gpu = store.gpu(0)
    assert gpu is not None
    assert gpu.mem_used_bytes == 88695216537
    feed(store, READING, 2.0)
    status = store.status(SourceId.gpu(0))
    assert status is not None
    assert status.state is SourceState.OK


def test_topology_and_servers_as_a_reading_gives_them() -> None:
    topology = reading_topology(READING)
    assert topology.gpu_indices == tuple(range(8))
    assert [(n.id, n.gpus) for n in topology.numa_nodes] == [(0, (0, 1, 2, 3)), (1, (4, 5, 6, 7))]
    gpu = topology.gpu(5)
    assert gpu is not None
    assert gpu.numa_node == 1
    assert (gpu.pcie_gen_max, gpu.pcie_width_max) == (5, 16)
    # Not in a reading: left unknown, never guessed.
    assert gpu.bus_id is None
    assert gpu.cpu_affinity == ()
    assert topology.numa_nodes[0].cpus == ()
    assert topology.driver_version is None
    assert topology.gpu_status is None

    (server,) = reading_servers(READING)
    assert server["id"] == SERVER
    assert server["state"] == "ready"
    assert server["gpus"] == [0]
    assert server["numa_nodes"] == [0]
    assert server["port"] == 31777
    assert server["external"] is False

    empty = reading_topology(None)
    assert empty.gpus == ()
    assert empty.gpu_status == "no reading from this host yet"
    assert reading_servers(None) == []


class OneHostFleet:
    """A fleet of `local` and `alpha` as HostStores reads one (hosts, summary, reading,
    subscribe): the test sets alpha's link state and latest reading, then tells listeners."""

    def __init__(self) -> None:
        self.hosts = [LOCAL_HOST, Host("alpha", "tester@alpha:22")]
        self.state = "connecting"
        self.reason: str | None = None
        self.latest: dict[str, Any] | None = None
        self.listeners: list[Callable[[HostSummary], None]] = []

    def summary(self, name: str) -> HostSummary:
        return HostSummary(
            name, "tester@alpha:22", self.state, self.reason, None, None, (), 0, None, (), None,
            None,
        )  # fmt: skip

    def reading(self, name: str) -> dict[str, Any] | None:
        return self.latest

    def subscribe(self, listener: Callable[[HostSummary], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def tell(self, state: str, reason: str | None = None) -> None:
        self.state, self.reason = state, reason
        for listener in list(self.listeners):
            listener(self.summary("alpha"))


def _stale_reason(host: HostStore) -> str | None:
    """Read afresh (an assert on the attribute would narrow its type for the rest)."""
    return host.stale_reason


def _states(store: TimeSeriesStore) -> set[SourceState]:
    return {status.state for status in store.statuses().values()}


def test_a_host_store_goes_up_stale_and_up_again_with_its_link() -> None:
    fleet = OneHostFleet()
    clock = iter(float(t) for t in range(100, 200))
    stores = HostStores(cast("Fleet", fleet), clock=lambda: next(clock))
    assert stores.names() == ["alpha"]
    alpha = stores.get("alpha")
    assert alpha is not None
    assert alpha.reading is None
    assert alpha.store.statuses() == {}

    fleet.latest = copy.deepcopy(READING)
    fleet.tell("up")
    assert alpha.fed_mono == 100.0
    assert _states(alpha.store) == {SourceState.OK}
    version = alpha.store.version
    fleet.tell("up")  # the same reading again: not written twice
    assert alpha.store.version == version
    assert alpha.store.window(SourceId.gpu(0).series("util_pct")).times == (100.0,)

    fleet.tell("stale", "connection lost: reset by peer")
    assert alpha.stale_reason == "connection lost: reset by peer"
    assert _states(alpha.store) == {SourceState.STALE}
    assert {s.reason for s in alpha.store.statuses().values()} == {"host alpha stale"}
    version = alpha.store.version
    fleet.tell("stale", "connection lost: reset by peer")  # marked once per reason
    assert alpha.store.version == version
    gpu = alpha.store.gpu(0)
    assert gpu is not None
    assert gpu.t_mono == 100.0  # the last figures stay

    fleet.latest = copy.deepcopy(READING)  # a new reading once the link is back
    fleet.tell("up")
    assert _stale_reason(alpha) is None
    assert alpha.fed_mono == 101.0
    assert _states(alpha.store) == {SourceState.OK}
    assert alpha.store.window(SourceId.gpu(0).series("util_pct")).times == (100.0, 101.0)

    stores.close()
    assert fleet.listeners == []


def test_many_hosts_keep_a_shorter_history_within_one_budget() -> None:
    # Up to 8 hosts each keep the hour; with more, the stores together stay in the budget.
    assert host_capacity(1) == host_capacity(8) == HOST_CAPACITY
    for hosts in (9, 16, 32, 64):
        capacity = host_capacity(hosts)
        assert HOST_MIN_CAPACITY <= capacity < HOST_CAPACITY
        assert hosts * HOST_MAX_SERIES * capacity * 16 <= HOSTS_BUDGET_BYTES
    assert host_capacity(16) > host_capacity(32) > host_capacity(64)
    # However many, a host keeps its five minutes.
    assert host_capacity(10_000) == HOST_MIN_CAPACITY

    fleet = OneHostFleet()
    fleet.hosts = [LOCAL_HOST, *(Host(f"h{i}", f"tester@h{i}:22") for i in range(32))]
    stores = HostStores(cast("Fleet", fleet))
    assert stores.capacity == host_capacity(32)
    fleet.latest = copy.deepcopy(READING)
    stores._take("h0", fleet.summary("h0"))
    host = stores.get("h0")
    assert host is not None
    ring = host.store.window(SourceId.gpu(0).series("util_pct"))
    assert len(ring.times) == 1
    assert host.store.capacity == host_capacity(32)
