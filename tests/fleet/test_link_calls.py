"""Calls over a host's link when the host misbehaves, against the fake SSH hosts: a command
that prints bytes that are not UTF-8, a connection lost mid-call, a caller that gives up, a
host that hangs, a local reader that goes away (`| head`), a ~/.ssh/config that turns host-key
checks off, and arguments that a shell would read as commands."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from console.fleet.fleet import Fleet
from console.fleet.hosts import LOCAL, Host
from console.fleet.link import STALE, UP, HostLink, LinkDown
from tests.fleet.conftest import FakeHost, SshWorld

TICKS_THEN_MARK = """i=0
while [ $i -lt 40 ]; do echo tick; sleep 0.1; i=$((i+1)); done
touch "{marker}"
"""
"""Writes for 4 s, then leaves a marker: a command whose channel was closed dies at its next
write (as under sshd), so no marker means the call ended it."""


def _link(host: FakeHost, ddconsole: str, connect_timeout_s: float = 10) -> HostLink:
    return HostLink(Host("b", host.target, ddconsole), connect_timeout_s=connect_timeout_s)


def test_an_invalid_byte_costs_a_character_not_the_connection(ssh_world: SshWorld) -> None:
    beta = ssh_world.hosts["beta"]
    script = beta.script("bytes", "printf 'ok \\377\\376 bytes\\n'; printf 'err \\377\\n' >&2\n")

    async def scenario() -> None:
        link = _link(beta, script, connect_timeout_s=10)
        try:
            for _ in range(2):  # the second call proves the connection survived the first
                result = await link.run([], 30)
                assert result.exit_status == 0
                assert result.stdout == "ok \ufffd\ufffd bytes\n"
                assert result.stderr == "err \ufffd\n"
                assert (link.state, link.reason) == (UP, None)
        finally:
            await link.close()

    asyncio.run(scenario())


def test_a_connection_lost_during_a_call_is_link_down(ssh_world: SshWorld) -> None:
    beta = ssh_world.hosts["beta"]
    script = beta.script("slow", "echo started; sleep 30\n")

    async def scenario() -> None:
        link = _link(beta, script, connect_timeout_s=10)
        try:
            call = asyncio.create_task(link.run([], 60))
            await asyncio.sleep(1.5)
            await asyncio.to_thread(beta.stop)  # drops every connection
            with pytest.raises(LinkDown, match="connection lost") as raised:
                await asyncio.wait_for(call, 30)
            assert "may still be running there" in raised.value.message
            assert link.state == STALE
        finally:
            await link.close()

    asyncio.run(scenario())


def test_a_cancelled_call_ends_its_remote_command(ssh_world: SshWorld, tmp_path: Path) -> None:
    beta = ssh_world.hosts["beta"]
    marker = tmp_path / "finished"
    script = beta.script("ticks", TICKS_THEN_MARK.format(marker=marker))

    async def scenario() -> None:
        link = _link(beta, script, connect_timeout_s=10)
        try:
            call = asyncio.create_task(link.run([], 60))
            await asyncio.sleep(1.5)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            await asyncio.sleep(6)  # past the command's own end, had it run on
        finally:
            await link.close()

    asyncio.run(scenario())
    assert not marker.exists()


class _ScriptLocal(HostLink):
    """`local` whose ddconsole is a shell script (the local path without a Python start)."""

    def __init__(self, script: str) -> None:
        super().__init__(Host(LOCAL, LOCAL, "ddconsole"))
        self.script = script

    def local_argv(self, args: Sequence[str]) -> list[str]:
        return ["/bin/sh", self.script, *args]


def test_a_cancelled_local_call_ends_its_command(tmp_path: Path) -> None:
    marker = tmp_path / "finished"
    script = tmp_path / "ticks"
    script.write_text("sleep 4\n" + f'touch "{marker}"\n')

    async def scenario() -> None:
        link = _ScriptLocal(str(script))
        call = asyncio.create_task(link.run([], 60))
        await asyncio.sleep(1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(5)

    asyncio.run(scenario())
    assert not marker.exists()


def test_a_call_keeps_to_its_timeout_on_a_hung_host(ssh_world: SshWorld) -> None:
    beta = ssh_world.hosts["beta"]
    script = beta.script("hello", "echo hello\n")

    async def scenario() -> None:
        link = _link(beta, script, connect_timeout_s=10)
        try:
            assert (await link.run([], 30)).stdout == "hello\n"  # connected
            beta.freeze(8)  # the host stops answering; TCP stays open
            await asyncio.sleep(0.2)
            started = time.monotonic()
            with pytest.raises(LinkDown) as raised:
                await link.run(["ps"], 2)
            took = time.monotonic() - started
            # Within the call's 2 s, not the link's 10 s connect timeout on top.
            assert took < 7, f"took {took:.1f} s"
            assert "starting `ddconsole ps` there got no answer within 2 s" in raised.value.message
            await asyncio.sleep(8)  # thawed: the same link answers again
            assert (await link.run([], 30)).stdout == "hello\n"
        finally:
            await link.close()

    asyncio.run(scenario())


def test_a_relay_into_a_closed_pipe_is_a_broken_pipe_not_the_host(ssh_world: SshWorld) -> None:
    beta = ssh_world.hosts["beta"]
    script = beta.script(
        "chatty", 'i=0; while [ $i -lt 200000 ]; do echo "line $i"; i=$((i+1)); done\n'
    )
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head` that has read enough

    async def scenario() -> None:
        link = _link(beta, script, connect_timeout_s=10)
        out = open(write_end, "w")  # noqa: SIM115 (closed below, where it may raise)
        try:
            with open(os.devnull, "w") as err, pytest.raises(BrokenPipeError):
                await link.relay([], out, err)
            await asyncio.sleep(0.2)
            left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            assert left == []  # no copy left running
        finally:
            await link.close()
            with contextlib.suppress(BrokenPipeError):
                out.close()

    asyncio.run(scenario())


def test_a_config_that_turns_host_key_checks_off_is_refused(
    ssh_world: SshWorld, tmp_path: Path
) -> None:
    beta = ssh_world.hosts["beta"]
    ran = tmp_path / "ran"
    script = beta.script("mark", f'touch "{ran}"\n')
    config = ssh_world.home / ".ssh" / "config"
    config.write_text(
        config.read_text()
        + f"\nHost lab\n  HostName {beta.address}\n  Port {beta.port}\n  User tester\n"
        "  UserKnownHostsFile none\n"
    )

    link = HostLink(Host("lab", "lab", script), connect_timeout_s=5)
    with pytest.raises(LinkDown, match="UserKnownHostsFile none") as raised:
        asyncio.run(link.run([], 30))
    assert "known_hosts" in raised.value.message
    assert link.state == STALE
    assert not ran.exists()


def test_arguments_arrive_literally_and_demo_comes_before_the_verb(
    ssh_world: SshWorld, tmp_path: Path
) -> None:
    beta = ssh_world.hosts["beta"]
    script = beta.script("argv", "printf '%s\\n' \"$@\"\n")
    pwned = tmp_path / "pwned"
    args = ["sim", "--", f"x; touch {pwned}", f"$(touch {pwned})", "a'b", f"`touch {pwned}`"]

    async def scenario() -> str:
        fleet = Fleet([Host("b", beta.target, script)], demo=True)
        try:
            result = await fleet.run("b", args, timeout_s=30)
        finally:
            await fleet.stop()
        assert result.exit_status == 0, result.stderr
        return result.stdout

    out = asyncio.run(scenario())
    # --demo is the global option, before the verb: after `--` it would reach the simulator.
    assert out.splitlines() == ["--demo", *args]
    assert not pwned.exists()
