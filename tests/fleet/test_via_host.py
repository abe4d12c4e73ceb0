"""A command relayed to another host is told which host it is to this console, so the hints it
prints (`follow it: ddconsole --host alpha runs show ...`) work as printed here."""

from __future__ import annotations

from console.core.via_host import VIA_HOST_ENV, ddconsole_command
from console.fleet.hosts import hosts_path
from tests.fleet.conftest import SshWorld


def test_the_relayed_command_knows_its_host_name(ssh_world: SshWorld, cli) -> None:
    alpha = ssh_world.hosts["alpha"]
    # A `ddconsole` there that prints what it was told, through the host's own shell.
    shown = alpha.script("showenv", f'echo "via=${VIA_HOST_ENV} args=$*"\n')
    path = hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[[host]]\nname = "alpha"\ntarget = "alpha"\nddconsole = "{shown}"\n')
    result = cli("--host", "alpha", "runs", "list")
    assert result.code == 0, result.err
    assert result.out.strip() == "via=alpha args=runs list"


def test_hints_name_the_host_they_were_relayed_from(monkeypatch) -> None:
    monkeypatch.delenv(VIA_HOST_ENV, raising=False)
    assert ddconsole_command() == "ddconsole"
    monkeypatch.setenv(VIA_HOST_ENV, "gpu-2.lan")
    assert ddconsole_command() == "ddconsole --host gpu-2.lan"
    monkeypatch.setenv(VIA_HOST_ENV, "x; rm -rf /")  # not a host name: not shown
    assert ddconsole_command() == "ddconsole"
