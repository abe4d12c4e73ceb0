"""`ddconsole --demo` as the README runs it: a real process in a real pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")


class PtyConsole:
    """The console process on a pty of a given size; reads everything it writes."""

    def __init__(self, cols: int, rows: int) -> None:
        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(REPO)
            env = dict(os.environ, TERM="xterm-256color")
            os.execvpe(sys.executable, [sys.executable, "-m", "console", "--demo"], env)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.output = b""

    def read_until(self, needle: bytes, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in ANSI.sub(b"", self.output):
                return True
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    self.output += os.read(self.fd, 65536)
                except OSError:
                    break
        return needle in ANSI.sub(b"", self.output)

    def press(self, key: bytes) -> None:
        os.write(self.fd, key)

    def wait_exit(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.read_until(b"\x00never", 0.1)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        return None

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
def test_the_demo_opens_on_the_dashboard_switches_screens_and_quits(size: tuple[int, int]):
    console = PtyConsole(*size)
    try:
        # The first frame waits for the simulated host and the demo servers: on a busy box
        # (the suite in 4 workers on 2 cores) that has taken more than 30 s.
        assert console.read_until(b"acceptance length", 90), console.output[-2000:]
        assert b"DEMO" in ANSI.sub(b"", console.output)
        console.press(b"t")
        assert console.read_until(b"intended", 10), "the Topology screen did not appear"
        console.press(b"?")
        assert console.read_until(b"keep running", 10), "help did not open"
        console.press(b"?")  # closes help (a bare escape followed by q would read as alt+q)
        time.sleep(0.5)
        console.press(b"q")
        code = console.wait_exit(20)
        assert code == 0, ANSI.sub(b"", console.output)[-2000:]
        assert b"Traceback" not in console.output
    finally:
        console.kill()
