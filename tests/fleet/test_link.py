"""One SSH link per host, against real asyncssh servers on 127.0.0.2/127.0.0.3: a command
runs on the host it names (that host's own environment), the host key is checked against
known_hosts, and a host that is gone is a one-line reason, not a hang."""

from __future__ import annotations

import asyncio

import asyncssh
import pytest

from console.fleet.hosts import Host
from console.fleet.link import STALE, UP, HostLink, LinkDown
from tests.fleet.conftest import DDCONSOLE, SshWorld


def _link(world: SshWorld, name: str, target: str | None = None) -> HostLink:
    host = world.hosts[name]
    return HostLink(
        Host(name, target or f"tester@{host.address}:{host.port}", DDCONSOLE),
        connect_timeout_s=5,
    )


async def _listed(link: HostLink) -> str:
    result = await link.run(["--demo", "profiles", "list", "--json"], 60)
    assert result.exit_status == 0, result.stderr
    return result.stdout


def test_commands_run_on_their_host_with_its_own_state(ssh_world: SshWorld) -> None:
    async def scenario() -> None:
        alpha = _link(ssh_world, "alpha", "alpha")  # the ~/.ssh/config alias
        beta = _link(ssh_world, "beta")
        try:
            # Each host's ddconsole writes a user profile into its own config folder: only
            # that host lists it.
            for name in ("alpha", "beta"):
                profiles = ssh_world.hosts[name].root / "xdg_config_home" / "ddconsole" / "profiles"
                profiles.mkdir(parents=True)
                (profiles / f"only-{name}.toml").write_text("this is not TOML [")
            listed = {"alpha": await _listed(alpha), "beta": await _listed(beta)}
            assert "only-alpha" in listed["alpha"]
            assert "only-beta" not in listed["alpha"]
            assert "only-beta" in listed["beta"]
            assert "only-alpha" not in listed["beta"]
            assert alpha.state == UP
            assert beta.state == UP
            failed = await beta.run(["--demo", "up", "no-such-profile"], 60)
            assert failed.exit_status == 2
            assert "no-such-profile" in failed.stderr
        finally:
            await alpha.close()
            await beta.close()

    asyncio.run(scenario())


def test_unknown_host_key_is_refused(ssh_world: SshWorld) -> None:
    beta = ssh_world.hosts["beta"]
    known = ssh_world.home / ".ssh" / "known_hosts"
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode()
    lines = [
        line
        if not line.startswith(f"[{beta.address}]")
        else f"[{beta.address}]:{beta.port} {other}"
        for line in known.read_text().splitlines()
    ]
    known.write_text("\n".join(lines) + "\n")

    link = _link(ssh_world, "beta")
    with pytest.raises(LinkDown, match="host key not verifiable"):
        asyncio.run(link.run(["--version"], 30))
    assert link.state == STALE
    assert "known_hosts" in (link.reason or "")


def test_a_stopped_host_is_a_reason(ssh_world: SshWorld) -> None:
    ssh_world.hosts["beta"].stop()

    link = _link(ssh_world, "beta")
    with pytest.raises(LinkDown, match="connection refused") as raised:
        asyncio.run(link.run(["--version"], 30))
    assert raised.value.exit_code == 255
