"""A command relayed to another host is told which host it is to this console, so the hints it
prints (`follow it: ddconsole --host alpha runs show ...`, `ddconsole --host alpha runs show
RUN` shows what it did) work as printed here."""

from __future__ import annotations

import json
from pathlib import Path

from console.core.via_host import VIA_HOST_ENV, ddconsole_command
from console.fleet.hosts import hosts_path
from tests.fleet.conftest import SshWorld, write_hosts_toml
from tests.fleet.test_fleet_runs import SGLANG_RESULT


def test_the_relayed_command_knows_its_host_name(ssh_world: SshWorld, cli, tmp_path: Path) -> None:
    alpha = ssh_world.hosts["alpha"]
    # A `ddconsole` there that prints what it was told, through the host's own shell.
    shown = alpha.script("showenv", f'echo "via=${VIA_HOST_ENV} args=$*"\n')
    path = hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[[host]]\nname = "alpha"\ntarget = "alpha"\nddconsole = "{shown}"\n')
    result = cli("--host", "alpha", "runs", "list")
    assert result.code == 0, result.err
    assert result.out.strip() == "via=alpha args=runs list"

    # The real ddconsole there: a hint in its relayed error names the host, so it works as
    # printed here (`runs stop` of a run that has ended says where to read what it did).
    write_hosts_toml(ssh_world)
    result_file = tmp_path / "sglang.jsonl"
    result_file.write_text(json.dumps(SGLANG_RESULT) + "\n")
    made = cli("--host", "alpha", "runs", "import", str(result_file), "--demo", "--json")
    assert made.code == 0, made.err
    run_id = json.loads(made.out)["run_id"]
    stopped = cli("--host", "alpha", "runs", "stop", run_id, "--yes", "--demo")
    assert stopped.code == 1
    assert f"hint: `ddconsole --host alpha runs show {run_id}` shows what it did" in stopped.err


def test_hints_name_the_host_they_were_relayed_from(monkeypatch) -> None:
    monkeypatch.delenv(VIA_HOST_ENV, raising=False)
    assert ddconsole_command() == "ddconsole"
    monkeypatch.setenv(VIA_HOST_ENV, "gpu-2.lan")
    assert ddconsole_command() == "ddconsole --host gpu-2.lan"
    monkeypatch.setenv(VIA_HOST_ENV, "x; rm -rf /")  # not a host name: not shown
    assert ddconsole_command() == "ddconsole"
