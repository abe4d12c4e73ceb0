"""A host of hosts.toml read through a Prometheus: its stream is `metrics --prometheus URL
--prometheus-match M` run there over SSH, and `fleet` says `via URL` for it. The Prometheus
named is not running: the host still reads up, its GPUs unavailable with Prometheus' reason
as that host saw it, and the look ends without waiting on it."""

from __future__ import annotations

import json

from console.fleet.hosts import hosts_path
from tests.fleet.conftest import DDCONSOLE, SshWorld
from tests.fleet.ports import refusing_port

__all__ = ["refusing_port"]  # the fixture, used by name


def test_a_host_read_through_prometheus_says_via_and_its_reason(
    ssh_world: SshWorld, cli, refusing_port: int
):
    beta = ssh_world.hosts["beta"]
    url = f"http://127.0.0.1:{refusing_port}"
    path = hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'[[host]]\nname = "beta"\ntarget = "{beta.target}"\nddconsole = "{DDCONSOLE}"\n'
        f'prometheus = "{url}"\nprometheus_match = \'{{instance=~"beta(:[0-9]+)?"}}\'\n'
    )

    result = cli("--demo", "fleet", "--json", "--timeout", "30", "--interval", "0.5")
    hosts = {h["name"]: h for h in json.loads(result.out)["hosts"]}
    assert result.code == 0, (result.err, hosts)
    assert hosts["local"]["via"] is None
    remote = hosts["beta"]
    assert remote["via"] == url
    assert remote["state"] == "up", remote
    reasons = [s["reason"] or "" for s in remote["sources"] if s["state"] != "ok"]
    assert any(f"Prometheus at {url}: connection refused" in r for r in reasons), remote
