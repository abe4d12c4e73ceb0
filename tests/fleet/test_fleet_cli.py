"""`ddconsole fleet` when hosts do not answer in time: every host without a reading says why
(connected but its ddconsole is silent, or still connecting), READY reads `-` rather than a
count it does not have, and the exit status is 1 when any host is not up."""

from __future__ import annotations

import json

from console.core.net import free_port
from console.fleet.hosts import hosts_path
from tests.fleet.conftest import SshWorld


def test_hosts_without_a_reading_say_why_and_the_exit_status_says_so(
    ssh_world: SshWorld, cli
) -> None:
    beta = ssh_world.hosts["beta"]
    hung = beta.script("hung", "sleep 60\n")
    path = hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'[[host]]\nname = "hung"\ntarget = "{beta.target}"\nddconsole = "{hung}"\n\n'
        f'[[host]]\nname = "gone"\ntarget = "nobody@127.0.0.1:{free_port()}"\n'
    )

    result = cli("--demo", "fleet", "--timeout", "4", "--interval", "0.5")
    assert result.code == 1, result.err
    rows = {line.split()[0]: line for line in result.out.splitlines()[1:]}
    assert "no reading within 4 s (connected; `ddconsole metrics` there has not" in rows["hung"]
    assert rows["hung"].split()[2:5] == ["connecting", "-", "-"]  # STATE, GPUS BUSY, READY
    assert "connection refused" in rows["gone"]

    result = cli("--demo", "fleet", "--timeout", "4", "--interval", "0.5", "--json")
    assert result.code == 1, result.err
    hosts = {h["name"]: h for h in json.loads(result.out)["hosts"]}
    assert hosts["hung"]["reason"].startswith("no reading within 4 s (connected;")
    assert "connection refused" in hosts["gone"]["reason"]
