"""hosts.toml: `local` is always there and first; every mistake names the file, the host and
the field; `--host` finds a host or lists the known ones; the global `--host` is the one
taken out of the argv relayed to the host in every form argparse takes (abbreviated too),
given twice it is refused, and what follows the verb is relayed untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.cli.cmd_fleet import strip_host
from console.cli.parser import build_parser
from console.core.errors import UsageError
from console.fleet.hosts import LOCAL, Host, find_host, hosts_path, load_hosts, parse_target
from tests.fleet.ports import refusing_port

__all__ = ["refusing_port"]  # the fixture, used by name


def write(text: str) -> Path:
    path = hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_without_a_file_there_is_local_only() -> None:
    assert load_hosts() == [Host(LOCAL)]


def test_hosts_in_order_after_local() -> None:
    write(
        '[[host]]\nname = "gpu2"\ntarget = "ops@gpu2:2222"\nddconsole = "/opt/dd/bin/ddconsole"\n'
        '[[host]]\nname = "gpu3"\ntarget = "gpu3-alias"\n'
    )
    hosts = load_hosts()
    assert [h.name for h in hosts] == ["local", "gpu2", "gpu3"]
    assert hosts[1].ddconsole == "/opt/dd/bin/ddconsole"
    assert hosts[2].ddconsole == "ddconsole"
    assert not hosts[2].is_local


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[[host]]\ntarget = "a@b"\n', ["host #1", "name"]),
        ('[[host]]\nname = "a b"\ntarget = "a@b"\n', ["host #1", "name"]),
        ('[[host]]\nname = "gpu2"\n', ["host 'gpu2'", "target", "missing"]),
        ('[[host]]\nname = "gpu2"\ntarget = 3\n', ["host 'gpu2'", "target", "must be a string"]),
        ('[[host]]\nname = "gpu2"\ntarget = "a@b:99999"\n', ["host 'gpu2'", "target", "port"]),
        ('[[host]]\nname = "gpu2"\ntarget = "@b"\n', ["host 'gpu2'", "target"]),
        ('[[host]]\nname = "gpu2"\ntarget = "b"\nuser = "x"\n', ["host 'gpu2'", "user"]),
        ('[[host]]\nname = "gpu2"\ntarget = "b"\nddconsole = 3\n', ["gpu2", "ddconsole"]),
        ('[[host]]\nname = "local"\ntarget = "x@y"\n', ["host 'local'", "target"]),
        (
            '[[host]]\nname = "a"\ntarget = "x"\n[[host]]\nname = "a"\ntarget = "y"\n',
            ["'a'", "twice"],
        ),
        ("[host]\nname = 1\n", ["host", "[[host]]"]),
        ("hosts = []\n", ["hosts", "unknown key"]),
        ("[[host]\n", ["not valid TOML"]),
    ],
)
def test_a_damaged_file_names_file_host_and_field(text: str, named: list[str]) -> None:
    path = write(text)
    with pytest.raises(UsageError) as raised:
        load_hosts()
    message = str(raised.value)
    assert message.startswith(str(path))
    for word in named:
        assert word in message, message


def test_unknown_host_lists_the_known_ones() -> None:
    write('[[host]]\nname = "gpu2"\ntarget = "gpu2"\n')
    with pytest.raises(UsageError, match=r"--host gpu9: no such host \(known: local, gpu2\)"):
        find_host(load_hosts(), "gpu9")


@pytest.mark.parametrize(
    ("target", "host", "user", "port"),
    [
        ("ops@gpu2:2222", "gpu2", "ops", 2222),
        ("gpu2", "gpu2", None, None),
        ("ops@gpu2", "gpu2", "ops", None),
        ("[::1]:2200", "::1", None, 2200),
        ("fe80::1", "fe80::1", None, None),
    ],
)
def test_targets(target: str, host: str, user: str | None, port: int | None) -> None:
    parsed = parse_target(target)
    assert (parsed.host, parsed.user, parsed.port) == (host, user, port)


def test_only_the_global_host_option_is_relayed_away() -> None:
    assert strip_host(["--demo", "--host", "a", "up", "p"]) == ["--demo", "up", "p"]
    assert strip_host(["--host=a", "ps", "--json"]) == ["ps", "--json"]
    # A global option's value is not the verb; what follows the verb is the verb's.
    assert strip_host(["--prometheus", "http://x", "--host", "a", "ps"]) == [
        "--prometheus",
        "http://x",
        "ps",
    ]
    assert strip_host(["--host", "a", "sim", "--", "--host", "b"]) == ["sim", "--", "--host", "b"]


@pytest.mark.parametrize(
    "argv", [["--ho", "gamma", "--demo", "ps"], ["--hos=gamma", "--demo", "ps"]]
)
def test_an_abbreviated_host_option_is_relayed_away(argv: list[str]) -> None:
    # argparse takes an unambiguous abbreviation: the remote ddconsole must not see it and
    # relay once more through its own hosts.toml.
    parsed = build_parser().parse_args(argv)
    assert parsed.host == "gamma"
    assert parsed.remote_argv == ["--demo", "ps"]


def test_host_given_twice_is_refused(cli) -> None:
    refused = cli("--host", "a", "--host", "local", "ps")
    assert refused.code == 2
    assert "--host is given more than once" in refused.err
    assert "Traceback" not in refused.err


def test_read_only_refuses_a_changing_verb_on_another_host(cli) -> None:
    write('[[host]]\nname = "gpu2"\ntarget = "nobody@127.0.0.1:1"\n')
    refused = cli("--read-only", "--host", "gpu2", "up", "qwen3.6-27b")
    assert refused.code == 2
    assert "read-only" in refused.err
    assert "connect" not in refused.err  # refused before any connection


def test_host_without_a_command_says_what_to_do(cli) -> None:
    write('[[host]]\nname = "gpu2"\ntarget = "nobody@127.0.0.1:1"\n')
    result = cli("--host", "gpu2")
    assert result.code == 2
    assert "give a command to run there" in result.err


def test_fleet_shows_an_unreachable_host_stale_with_the_reason(cli, refusing_port: int) -> None:
    write(f'[[host]]\nname = "gpu2"\ntarget = "nobody@127.0.0.1:{refusing_port}"\n')
    result = cli("--demo", "fleet", "--interval", "0.5")
    assert result.code == 1, result.err  # a host is not up: scripts can tell
    rows = {line.split()[0]: line for line in result.out.splitlines()[1:]}
    assert rows["local"].split()[2] == "up"
    assert "/8" in rows["local"]  # GPUS BUSY of the demo host's eight
    assert rows["gpu2"].split()[2] == "stale"
    assert "connection refused" in rows["gpu2"]


# -- a Prometheus per host


def test_a_host_read_through_prometheus_streams_metrics_from_it() -> None:
    from console.fleet.fleet import Fleet

    write(
        '[[host]]\nname = "gpu2"\ntarget = "ops@gpu2"\nprometheus = "http://prom:9090/"\n'
        "prometheus_match = '{ instance =~ \"gpu2(:[0-9]+)?\" }'\n"
        '[[host]]\nname = "gpu3"\ntarget = "gpu3"\nprometheus = " http://prom:9090 "\n'
        "prometheus_match = '{instance=~\"gpu3(:[0-9]+)?\"}'\n"
        '[[host]]\nname = "gpu4"\ntarget = "gpu4"\nprometheus = "https://other:9090"\n'
        '[[host]]\nname = "gpu5"\ntarget = "gpu5"\n'
    )
    hosts = {h.name: h for h in load_hosts()}
    assert hosts["gpu2"].prometheus == "http://prom:9090/"
    assert hosts["gpu2"].prometheus_match == '{instance=~"gpu2(:[0-9]+)?"}'  # normalised
    assert hosts["gpu3"].prometheus == "http://prom:9090"
    assert hosts["gpu4"].prometheus_match is None
    fleet = Fleet(list(hosts.values()), interval_s=0.5)
    assert fleet.stream_args(hosts["gpu2"]) == [
        "metrics",
        "--watch",
        "--json",
        "--interval",
        "0.5",
        "--prometheus",
        "http://prom:9090/",
        "--prometheus-match",
        '{instance=~"gpu2(:[0-9]+)?"}',
    ]
    assert fleet.stream_args(hosts["gpu4"])[-2:] == ["--prometheus", "https://other:9090"]
    assert fleet.stream_args(hosts["gpu5"]) == ["metrics", "--watch", "--json", "--interval", "0.5"]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('prometheus = "prom:9090"', ["host 'gpu2'", "prometheus", "full URL"]),
        ('prometheus = "ftp://prom"', ["host 'gpu2'", "prometheus", "full URL"]),
        ('prometheus = "http://prom:99999"', ["host 'gpu2'", "prometheus", "out of range"]),
        ('prometheus = "http://prom:9090/?x=1"', ["host 'gpu2'", "prometheus", "query"]),
        ("prometheus = 9090", ["host 'gpu2'", "prometheus", "must be a string"]),
        (
            "prometheus_match = '{job=\"a\"}'",
            ["host 'gpu2'", "prometheus_match", "without prometheus"],
        ),
        (
            'prometheus = "http://p:9090"\nprometheus_match = \'{instance=~"gpu2"\'',
            ["host 'gpu2'", "prometheus_match", "not closed"],
        ),
        (
            'prometheus = "http://p:9090"\nprometheus_match = \'{instance=~"(gpu2"}\'',
            ["host 'gpu2'", "prometheus_match", "bad regex"],
        ),
        (
            "prometheus = \"http://p:9090\"\nprometheus_match = '{instance=gpu2}'",
            ["host 'gpu2'", "prometheus_match", "quoted"],
        ),
        (
            'prometheus = "http://p:9090"\nprometheus_match = \'{instance=~".*"}\'',
            ["host 'gpu2'", "prometheus_match", "select everything"],
        ),
        (
            'prometheus = "http://p:9090"\nprometheus_match = 3',
            ["host 'gpu2'", "prometheus_match", "must be a string"],
        ),
    ],
)
def test_bad_prometheus_fields_name_file_host_and_field(text: str, named: list[str]) -> None:
    path = write(f'[[host]]\nname = "gpu2"\ntarget = "gpu2"\n{text}\n')
    with pytest.raises(UsageError) as raised:
        load_hosts()
    message = str(raised.value)
    assert message.startswith(str(path))
    for word in named:
        assert word in message, message


@pytest.mark.parametrize(
    ("match2", "match3", "why"),
    [
        (None, None, "neither names a prometheus_match"),
        ('{instance="gpu2:9400"}', None, "'gpu3' names no prometheus_match"),
        ('{job="gpus"}', '{ job = "gpus" }', 'both name prometheus_match {job="gpus"}'),
    ],
)
def test_two_hosts_counting_one_prometheus_twice_are_refused(
    match2: str | None, match3: str | None, why: str
) -> None:
    def host(name: str, match: str | None) -> str:
        extra = f"prometheus_match = '{match}'\n" if match else ""
        return (
            f'[[host]]\nname = "{name}"\ntarget = "{name}"\nprometheus = "http://p:9090"\n{extra}'
        )

    path = write(host("gpu2", match2) + host("gpu3", match3))
    with pytest.raises(UsageError) as raised:
        load_hosts()
    message = str(raised.value)
    assert message.startswith(f"{path}: host 'gpu3': prometheus: http://p:9090 is host 'gpu2'")
    assert why in message
    assert "counted twice" in message
    assert "prometheus_match" in (raised.value.hint or "")


@pytest.mark.parametrize(
    "url", ["http://localhost:9090", "http://127.0.0.1:9090/", "http://[::1]:9090"]
)
def test_hosts_each_reading_their_own_loopback_prometheus_are_not_refused(url: str) -> None:
    """A loopback URL is read on each host: two hosts naming it are two Prometheus servers,
    so neither needs a prometheus_match."""
    write(
        f'[[host]]\nname = "alpha"\ntarget = "alpha"\nprometheus = "{url}"\n'
        f'[[host]]\nname = "beta"\ntarget = "beta"\nprometheus = "{url}"\n'
    )
    hosts = {h.name: h for h in load_hosts()}
    assert hosts["alpha"].prometheus == hosts["beta"].prometheus == url
    assert hosts["alpha"].prometheus_match is hosts["beta"].prometheus_match is None


def test_the_fleet_table_says_via_which_prometheus(capsys: pytest.CaptureFixture[str]) -> None:
    from console.cli.cmd_fleet import _print
    from console.fleet.summary import HostSummary

    def summary(name: str, target: str) -> HostSummary:
        return HostSummary(name, target, "up", None, 1, 8, (), 0, 12.5, (), 0.4, None)

    _print(
        [summary("local", "local"), summary("gpu2", "ops@gpu2")],
        {"local": None, "gpu2": "http://prom:9090"},
    )
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "ops@gpu2 via http://prom:9090" in rows["gpu2"]
    assert "via" not in rows["local"]
