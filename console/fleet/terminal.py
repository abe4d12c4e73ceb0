"""A terminal over `--host`: the remote ddconsole runs on a pseudo-terminal there (as `ssh -t`
runs a command), this terminal is put in raw mode and relays every key (Ctrl-C included: it
reaches the remote command as its own terminal's interrupt) and every byte of the screen
back, and its size is followed. The terminal's settings are restored however the relay ends:
the command's exit, a lost connection, SIGTERM or SIGHUP here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import termios
import tty
from typing import Any

import asyncssh

DEFAULT_TERM = "xterm-256color"
ENDED_BY_SIGNAL = {signal.SIGTERM: 128 + signal.SIGTERM, signal.SIGHUP: 128 + signal.SIGHUP}


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


async def relay(
    conn: asyncssh.SSHClientConnection, command: str, stdin_fd: int, stdout_fd: int
) -> tuple[asyncssh.SSHCompletedProcess, int | None]:
    """Run `command` on a terminal of this one's size and type over `conn` and relay it;
    how it ended there, and the local signal that ended the relay (None: it ended there)."""
    size = os.get_terminal_size(stdout_fd)
    process: asyncssh.SSHClientProcess[Any] = await conn.create_process(
        command,
        term_type=os.environ.get("TERM") or DEFAULT_TERM,
        term_size=(size.columns, size.lines),
        encoding=None,
    )
    loop = asyncio.get_running_loop()
    ended_by: list[int] = []

    def key_in() -> None:
        try:
            data = os.read(stdin_fd, 4096)
        except OSError:
            data = b""
        if data:
            process.stdin.write(data)
        else:  # this terminal closed: the remote side gets an end of input
            loop.remove_reader(stdin_fd)
            with contextlib.suppress(OSError, asyncssh.Error):
                process.stdin.write_eof()

    def resized() -> None:
        with contextlib.suppress(OSError, asyncssh.Error):
            now = os.get_terminal_size(stdout_fd)
            process.change_terminal_size(now.columns, now.lines)

    def end(signum: int) -> None:
        ended_by.append(signum)
        process.close()

    saved = termios.tcgetattr(stdin_fd)
    try:
        tty.setraw(stdin_fd)
        loop.add_reader(stdin_fd, key_in)
        loop.add_signal_handler(signal.SIGWINCH, resized)
        for signum in ENDED_BY_SIGNAL:
            loop.add_signal_handler(signum, end, signum)
        while chunk := await process.stdout.read(65536):
            _write_all(stdout_fd, chunk)
        completed = await process.wait(check=False)
    finally:
        loop.remove_reader(stdin_fd)
        for signum in (signal.SIGWINCH, *ENDED_BY_SIGNAL):
            loop.remove_signal_handler(signum)
        termios.tcsetattr(stdin_fd, termios.TCSADRAIN, saved)
        process.close()
    return completed, (ended_by[0] if ended_by else None)
