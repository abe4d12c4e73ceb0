"""`--host NAME` from a terminal: the command gets a terminal on that host (as `ssh -t` gives
one), keys and screen are relayed, and this terminal's settings come back as they were
however the relay ends. Over a fake asyncssh host that runs a command asking for a terminal
on a real pseudo-terminal, as its session's controlling terminal (tests/fleet/conftest.py)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from tests.fleet.conftest import DDCONSOLE, SshWorld, as_sshd_starts_it, write_hosts_toml

pytestmark = pytest.mark.slow


class Terminal:
    """A pseudo-terminal of 100x30 whose other end runs a local ddconsole; what it draws is
    kept (the raw bytes)."""

    def __init__(self, *args: str) -> None:
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.settings = termios.tcgetattr(self.slave)
        self.screen = b""
        self.proc = subprocess.Popen(
            [DDCONSOLE, "--demo", *args],
            stdin=self.slave,
            stdout=self.slave,
            stderr=self.slave,
            start_new_session=True,
            preexec_fn=as_sshd_starts_it,  # signals as a login shell leaves them
        )

    def read_until(self, done: Callable[[bytes], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done(self.screen):
            left = deadline - time.monotonic()
            assert left > 0, (
                f"{what}: not within {timeout:g} s; the screen: {self.screen[-1500:]!r}"
            )
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if ready:
                try:
                    self.screen += os.read(self.master, 65536)
                except OSError:  # the other end has gone
                    time.sleep(0.05)

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, (
                f"still running; the screen: {self.screen[-1500:]!r}"
            )
            self.read_until(lambda _: True, 1, "drain")
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.screen += os.read(self.master, 65536)
                except OSError:
                    pass
        return self.proc.returncode

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    made: list[Terminal] = []
    yield made
    for terminal in made:
        terminal.close()


def test_a_verb_and_the_console_over_host_run_on_a_terminal_there(
    ssh_world: SshWorld, terminals: list[Terminal]
) -> None:
    write_hosts_toml(ssh_world)

    # A verb: its output comes through the remote terminal (its line ends are a terminal's).
    verb = Terminal("--host", "alpha", "ps")
    terminals.append(verb)
    assert verb.wait(90) == 0, verb.screen[-1500:]
    assert b"\r\n" in verb.screen
    assert termios.tcgetattr(verb.slave) == verb.settings

    # The console itself, there: drawn here, and `q` typed here quits it there.
    console = Terminal("--host", "alpha")
    terminals.append(console)
    console.read_until(lambda screen: b"Dashboard" in screen, 90, "the remote console's screen")
    os.write(console.master, b"q")
    assert console.wait(60) == 0, console.screen[-1500:]
    assert termios.tcgetattr(console.slave) == console.settings

    # SIGTERM here ends the relay: the terminal is given back as it was, 128 + 15.
    ended = Terminal("--host", "alpha")
    terminals.append(ended)
    ended.read_until(lambda screen: b"Dashboard" in screen, 90, "the remote console's screen")
    ended.proc.send_signal(signal.SIGTERM)
    assert ended.wait(30) == 128 + signal.SIGTERM
    assert termios.tcgetattr(ended.slave) == ended.settings
    # ...and the console there is hung up, as sshd hangs up a session whose client left.
    alpha = ssh_world.hosts["alpha"]
    deadline = time.monotonic() + 30
    while alpha._procs:
        assert time.monotonic() < deadline, (
            f"the remote console outlived the relay: {_states(p.pid for p in alpha._procs)}"
        )
        time.sleep(0.2)


def _states(pids: Iterable[int]) -> dict[int, list[str]]:
    """Each process's state and signal masks (why one outlived a hang-up)."""
    found: dict[int, list[str]] = {}
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        found[pid] = [line for line in lines if line.startswith(("State", "Sig", "PPid"))]
    return found
