"""Issue 21's first acceptance line, on one machine: two asyncssh "hosts" (127.0.0.2 and
127.0.0.3, each with its own state, config and simulated 8-GPU demo host) plus local. `up`
on each with `--host`; `fleet --json` shows all three with their servers ready; stopping one
host's SSH server marks only that host stale with the reason while the others keep reading
and the loop stays responsive; restarting it on the same port restores it. `down` on each
host leaves nothing running."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from console.core.net import free_port
from console.fleet.fleet import Fleet
from console.fleet.hosts import load_hosts
from tests.conftest import REPO
from tests.fleet.conftest import SshWorld, write_hosts_toml

pytestmark = pytest.mark.slow

HOSTS = ("local", "alpha", "beta")
SERVER = "qwen3.6-27b-tp1-1"


def dd(*args: str, timeout: float = 120) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "console", "--demo", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        cwd=REPO,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler: where it hung
        out, err = proc.communicate()
        raise AssertionError(f"{proc.args!r} took over {timeout} s:\n{err[-5000:]}") from None
    return proc.returncode, out, err


@pytest.fixture
def fleet_world(ssh_world: SshWorld) -> Iterator[SshWorld]:
    write_hosts_toml(ssh_world)
    yield ssh_world
    for host in ssh_world.hosts.values():
        if host._acceptor is None:  # a test that stopped it and failed before the restart
            host.start()
    downs = [dd("--host", name, "down", "--all", "--grace", "2") for name in HOSTS]
    for proc in downs:
        finish(proc, 60)


async def _until(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.1)


def test_up_on_every_host_and_the_fleet_sees_them(fleet_world: SshWorld, cli) -> None:
    ports = {name: free_port() for name in HOSTS}
    ups = {
        name: dd(
            "--host", name, "up", "qwen3.6-27b", "--layout", "tp1", "--port", str(port), "--json"
        )
        for name, port in ports.items()
    }
    for name, proc in ups.items():
        code, out, err = finish(proc)
        assert code == 0, f"{name}: {err}"
        status = json.loads(out)  # --json relayed untouched
        assert (status["state"], status["port"]) == ("ready", ports[name]), name

    # Each host's server is in its own state folder: the remote `ps` lists only its own.
    code, out, err = finish(dd("--host", "beta", "ps", "--json"))
    assert code == 0, err
    managed = [s for s in json.loads(out) if not s.get("external")]
    assert [(s["id"], s["port"]) for s in managed] == [(SERVER, ports["beta"])]

    code, out, err = finish(dd("fleet", "--json", "--interval", "0.5"), 45)
    assert code == 0, err
    hosts = {h["name"]: h for h in json.loads(out)["hosts"]}
    assert list(hosts) == list(HOSTS)
    for name in HOSTS:
        host = hosts[name]
        assert host["state"] == "up", (name, host["reason"])
        ours = [s for s in host["servers"] if s["id"] == SERVER and not s["external"]]
        assert [s["state"] for s in ours] == ["ready"], (name, host["servers"])
        assert ours[0]["url"] == f"http://127.0.0.1:{ports[name]}"
        assert host["servers_ready"] >= 1
        assert host["gpus_total"] == 8
        assert host["gpus_busy"] >= 1

    # An unknown host is named with the known ones; a relayed failure keeps its status.
    missing = cli("--demo", "--host", "gamma", "ps")
    assert missing.code == 2
    assert "known: local, alpha, beta" in missing.err
    bad = cli("--demo", "--host", "alpha", "up", "no-such-profile")
    assert bad.code == 2
    assert "no-such-profile" in bad.err

    async def outage() -> None:
        fleet = Fleet(
            load_hosts(), demo=True, interval_s=0.5, backoff_initial_s=0.5, backoff_max_s=1.0
        )
        lag = [0.0]

        async def ticker() -> None:  # how late the loop runs a 50 ms sleep
            while True:
                start = time.monotonic()
                await asyncio.sleep(0.05)
                lag[0] = max(lag[0], time.monotonic() - start - 0.05)

        tick = asyncio.create_task(ticker())
        await fleet.start()
        try:
            await _until(
                lambda: all(s.state == "up" for s in fleet.summaries()), 60, "every host up"
            )
            # The loop's lag while every host reads: the same loop must not be held longer
            # while one host is down (a blocking call would show here; the budget for a key
            # press is 100 ms, the slack below is machine noise).
            lag[0] = 0.0
            await asyncio.sleep(3)
            baseline = lag[0]
            lag[0] = 0.0
            await asyncio.to_thread(fleet_world.hosts["alpha"].stop)  # not on the loop
            await _until(lambda: fleet.summary("alpha").state == "stale", 20, "alpha stale")
            alpha = fleet.summary("alpha")
            assert alpha.reason
            assert "connection lost" in alpha.reason or "refused" in alpha.reason
            assert alpha.servers_ready >= 1  # the last figures stay, shown as stale
            # The others keep reading while alpha is down.
            seen = {name: fleet.summary(name).updated_wall for name in ("local", "beta")}
            await _until(
                lambda: all(fleet.summary(n).updated_wall != seen[n] for n in seen),
                20,
                "fresh readings from local and beta",
            )
            assert fleet.summary("alpha").state == "stale"
            assert {fleet.summary(n).state for n in ("local", "beta")} == {"up"}
            assert lag[0] < baseline + 0.5, f"the loop was held {lag[0]:.2f} s ({baseline:.2f})"
            # Back on the same port: the link reconnects and the stream resumes.
            await asyncio.to_thread(fleet_world.hosts["alpha"].start)
            await _until(lambda: fleet.summary("alpha").state == "up", 30, "alpha back up")
            back = fleet.summary("alpha")
            assert back.reason is None
            assert any(s.id == SERVER and s.state == "ready" for s in back.servers)
        finally:
            tick.cancel()
            await fleet.stop()

    asyncio.run(outage())
