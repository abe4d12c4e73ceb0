"""One Prometheus split between hosts, and managed servers found among its targets: the
matcher set parsed and applied as Prometheus applies it, ANDed into every query the source
sends, and scrape instances mapped to this host's managed servers."""

from __future__ import annotations

import httpx
import pytest

from console.telemetry.prom_api import parse_targets
from console.telemetry.prom_match import (
    ManagedEndpoint,
    map_targets,
    parse_matchers,
    scoped,
    split_hostport,
)
from console.telemetry.prom_source import (
    PrometheusSource,
    bucket_query,
    gauges_query,
    gpu_history_query,
    history_queries,
    history_query,
)

GPU2 = '{instance=~"gpu2(:[0-9]+)?"}'
URL = "http://prom.lan:9090"


def test_matchers_are_parsed_and_written_back_as_promql() -> None:
    found = parse_matchers(" { instance =~ 'gpu2(:[0-9]+)?' , job!=\"node\", env=`a\\b` } ")
    assert [(m.label, m.op, m.value) for m in found.matchers] == [
        ("instance", "=~", "gpu2(:[0-9]+)?"),
        ("job", "!=", "node"),
        ("env", "=", "a\\b"),
    ]
    assert found.text == '{instance=~"gpu2(:[0-9]+)?", job!="node", env="a\\\\b"}'
    assert parse_matchers(found.text) == found  # the text is its own fixed point
    assert parse_matchers('job="a",').text == '{job="a"}'  # braces optional, trailing comma


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{}", "no matcher"),
        ('{instance=~"gpu2"', "not closed"),
        ('{instance="gpu2}', "not closed"),
        ("{instance=gpu2}", "quoted"),
        ('{instance~"gpu2"}', "expected one of"),
        ('{1nstance="gpu2"}', "label name"),
        ('{job="a" job="b"}', "','"),
        ('{instance=~"(gpu2"}', "bad regex"),
        ('{instance=~".*"}', "select everything"),
        ('{job="a\\q"}', "escape"),
    ],
)
def test_a_bad_matcher_set_says_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_matchers(text)


def test_matchers_select_as_prometheus_selects() -> None:
    gpu2 = parse_matchers(GPU2)
    assert gpu2.matches({"instance": "gpu2"})
    assert gpu2.matches({"instance": "gpu2:9400"})
    assert not gpu2.matches({"instance": "gpu20:9400"})  # anchored at both ends
    assert not gpu2.matches({"instance": "xgpu2:9400"})
    assert not gpu2.matches({})
    absent = parse_matchers('{job="sglang", rack!~"r[12]"}')
    assert absent.matches({"job": "sglang"})  # a missing label is the empty string
    assert not absent.matches({"job": "sglang", "rack": "r1"})


def test_the_matchers_are_anded_into_every_selector_sent() -> None:
    m = parse_matchers(GPU2)
    assert scoped("sglang:num_running_reqs", m) == f"sglang:num_running_reqs{GPU2}"
    assert scoped('x{mode="decode"}', m) == 'x{mode="decode", instance=~"gpu2(:[0-9]+)?"}'
    assert scoped("x{}", m) == f"x{GPU2}"
    assert scoped('x{mode="decode"}', None) == 'x{mode="decode"}'
    body = 'instance=~"gpu2(:[0-9]+)?"'
    queries = [
        gauges_query(m),
        history_query(m),
        gpu_history_query(m),
        bucket_query("sglang:time_to_first_token_seconds", 10, m),
        *history_queries(4, m).values(),
    ]
    for query in queries:
        assert query.count(body) == 1, query
        assert query.count("{") == query.count("}") == 1, query
    assert body not in gauges_query() + history_query() + "".join(history_queries(4).values())


async def test_the_matchers_select_targets_by_their_labels() -> None:

    body = {
        "status": "success",
        "data": {
            "activeTargets": [
                {
                    "labels": {"instance": f"{host}:{port}", "job": job},
                    "scrapeUrl": f"http://{host}:{port}/metrics",
                    "lastError": "",
                    "health": "up",
                    "scrapeInterval": "15s",
                }
                for host, port, job in (
                    ("gpu2", 30000, "sglang"),
                    ("gpu2", 9400, "dcgm"),
                    ("gpu3", 30000, "sglang"),
                    ("gpu20", 30000, "sglang"),
                )
            ]
        },
    }
    targets = parse_targets(body)
    assert dict(targets[0].labels) == {"instance": "gpu2:30000", "job": "sglang"}
    async with httpx.AsyncClient() as client:
        scoped_source = PrometheusSource(URL, client, matchers=parse_matchers(GPU2))
        whole = PrometheusSource(URL, client)
    assert [t.instance for t in scoped_source.scoped_targets(targets)] == [
        "gpu2:30000",
        "gpu2:9400",
    ]
    assert len(whole.scoped_targets(targets)) == 4


def test_split_hostport() -> None:
    assert split_hostport("127.0.0.1:30000") == ("127.0.0.1", 30000)
    assert split_hostport("GPU2.lan:30000") == ("gpu2.lan", 30000)
    assert split_hostport("[::1]:30000") == ("::1", 30000)
    assert split_hostport("gpu2") is None
    assert split_hostport("::1") is None


SERVERS = [
    ManagedEndpoint("qwen-tp1-2", 30001),
    ManagedEndpoint("kimi-tp8-1", 30002),
    ManagedEndpoint("qwen-tp1-1", 30001, live=False),  # stopped; its port reused by -2
]


def test_a_loopback_target_is_this_host_only_when_prometheus_is_here() -> None:
    instances = ["127.0.0.1:30001", "localhost:30002", "127.0.0.1:9400", "gpu7:30001"]
    here = map_targets(instances, SERVERS, prometheus_url="http://127.0.0.1:9090")
    assert here == {"127.0.0.1:30001": "qwen-tp1-2", "localhost:30002": "kimi-tp8-1"}
    # Prometheus on another machine: its 127.0.0.1 is that machine.
    away = map_targets(instances, SERVERS, prometheus_url="http://prom.lan:9090")
    assert away == {}


def test_a_target_named_by_this_hosts_name_or_address_is_this_host() -> None:
    names = ["gpu2", "gpu2.lan", "10.0.0.2"]
    mapped = map_targets(
        ["gpu2.lan:30001", "10.0.0.2:30002", "gpu3.lan:30001", "127.0.0.1:30002"],
        SERVERS,
        prometheus_url="http://prom.lan:9090",
        local_names=names,
    )
    assert mapped == {"gpu2.lan:30001": "qwen-tp1-2", "10.0.0.2:30002": "kimi-tp8-1"}
    # This host's name resolving to a loopback address (Debian's 127.0.1.1) does not make a
    # remote Prometheus' loopback targets ours.
    assert (
        map_targets(
            ["127.0.1.1:30001"],
            SERVERS,
            prometheus_url="http://prom.lan:9090",
            local_names=[*names, "127.0.1.1"],
        )
        == {}
    )
    # Prometheus named by this host's own name is here: loopback targets are ours too.
    assert map_targets(
        ["[::1]:30002"], SERVERS, prometheus_url="http://GPU2:9090", local_names=names
    ) == {"[::1]:30002": "kimi-tp8-1"}


def test_one_server_scraped_under_two_names_is_listed_once() -> None:
    mapped = map_targets(
        ["localhost:30001", "127.0.0.1:30001"], SERVERS, prometheus_url="http://localhost:9090"
    )
    assert mapped == {"127.0.0.1:30001": "qwen-tp1-2"}


def test_the_metrics_options_refuse_a_bad_or_lone_matcher_set(cli) -> None:
    lone = cli("metrics", "--once", "--prometheus-match", 'job="a"')
    assert lone.code == 2
    assert "give --prometheus URL" in lone.err
    bad = cli(
        "metrics", "--once", "--prometheus", "http://127.0.0.1:9", "--prometheus-match", "{job=a}"
    )
    assert bad.code == 2
    assert "--prometheus-match {job=a}: label job: the value must be quoted" in bad.err
    assert "Traceback" not in bad.err


def test_the_consoles_prometheus_source_knows_this_host_by_its_name() -> None:
    """The console's monitor on a Prometheus elsewhere: a target named by this host's name
    is a managed server here, as it is for `metrics --prometheus`."""
    import socket

    from console.cli.services import Services

    monitor = Services.create(demo=True, prometheus=URL).monitor(with_servers=False)
    [source] = [s for s in monitor.poller.sources.values() if isinstance(s, PrometheusSource)]
    hostname = socket.gethostname()
    assert hostname in source.local_names
    instance = f"{hostname}:30000"
    managed = [ManagedEndpoint("qwen3.6-27b-tp1-1", 30000)]
    mapped = map_targets(
        [instance], managed, prometheus_url=source.url, local_names=source.local_names
    )
    assert mapped == {instance: "qwen3.6-27b-tp1-1"}
