"""One link per host: how a ddconsole command runs there.

A remote host is one asyncssh connection, opened on first use with the user's keys,
`~/.ssh/config` and `~/.ssh/known_hosts` as asyncssh reads them (an unknown host key is
refused, never accepted silently), kept alive, and reopened after it is lost. `local` runs the
same commands as local subprocesses of this interpreter. Every connect and every call has a
timeout, so a dead host never holds the caller's loop.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import shlex
import socket
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import asyncssh

from console.core.errors import ConsoleError
from console.fleet.hosts import Host, parse_target

CONNECT_TIMEOUT_S = 10.0
KEEPALIVE_S = 5.0
"""A connection that answers no keepalive for 3 of these is lost (a host that vanished)."""
MAX_LINE_BYTES = 16 << 20
"""A telemetry line longer than this is garbage, not a reading."""
UP, CONNECTING, STALE = "up", "connecting", "stale"


class LinkDown(ConsoleError):
    """The host cannot be reached; `message` says why in one line. Exit status 255, as ssh's."""

    exit_code = 255


@dataclass(frozen=True)
class RemoteResult:
    exit_status: int
    stdout: str
    stderr: str


def describe(exc: BaseException, timeout_s: float) -> str:
    """One line for the reason a connection failed or ended."""
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return (
            f"host key not verifiable ({exc.reason}); add the host to ~/.ssh/known_hosts "
            "(connect once with ssh and check the fingerprint)"
        )
    if isinstance(exc, asyncssh.PermissionDenied):
        return f"permission denied ({exc.reason}); check the key in ~/.ssh or the agent"
    if isinstance(exc, asyncssh.DisconnectError):
        return f"disconnected: {exc.reason or type(exc).__name__}"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"unknown host name ({exc.strerror})"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return str(exc) or type(exc).__name__


class _Client(asyncssh.SSHClient):
    def __init__(self, on_lost: Callable[[Exception | None], None]) -> None:
        self._on_lost = on_lost

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(exc)


class HostLink:
    """The way to `host`: `state` is "up", "connecting" or "stale" with `reason`."""

    def __init__(
        self,
        host: Host,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        on_change: Callable[[HostLink], None] | None = None,
    ) -> None:
        self.host = host
        self.connect_timeout_s = connect_timeout_s
        self.state = UP if host.is_local else CONNECTING
        self.reason: str | None = None
        self._on_change = on_change
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()

    # -- state

    def _set(self, state: str, reason: str | None) -> None:
        if (state, reason) == (self.state, self.reason):
            return
        self.state, self.reason = state, reason
        if self._on_change is not None:
            self._on_change(self)

    def _lost(self, conn: asyncssh.SSHClientConnection, exc: Exception | None) -> None:
        if self._conn is not conn:
            return
        self._conn = None
        why = describe(exc, KEEPALIVE_S) if exc is not None else "closed by the host"
        self._set(STALE, f"connection lost: {why}")

    # -- the connection

    async def _connection(self) -> asyncssh.SSHClientConnection:
        async with self._lock:
            if self._conn is not None:
                return self._conn
            target = parse_target(self.host.target)
            if self.state != STALE:
                self._set(CONNECTING, None)
            holder: list[asyncssh.SSHClientConnection] = []

            def lost(exc: Exception | None) -> None:
                if holder:
                    self._lost(holder[0], exc)

            def client() -> _Client:
                return _Client(lost)

            try:
                conn, _ = await asyncio.wait_for(
                    asyncssh.create_connection(
                        client,
                        target.host,
                        port=target.port if target.port is not None else (),
                        username=target.user if target.user is not None else (),
                        connect_timeout=self.connect_timeout_s,
                        keepalive_interval=KEEPALIVE_S,
                        keepalive_count_max=3,
                    ),
                    self.connect_timeout_s + 1,
                )
            except (asyncssh.Error, OSError, TimeoutError, ValueError) as exc:
                why = (
                    f"cannot connect to {self.host.target}: {describe(exc, self.connect_timeout_s)}"
                )
                self._set(STALE, why)
                raise LinkDown(f"host {self.host.name}: {why}") from None
            holder.append(conn)
            self._conn = conn
            self._set(UP, None)
            return conn

    async def addresses(self) -> tuple[str, str]:
        """(this end's address, the host's address) of the SSH connection: the addresses the
        two hosts reach each other at (a multi-node gang's rendezvous needs them)."""
        if self.host.is_local:
            return "127.0.0.1", "127.0.0.1"
        conn = await self._connection()
        local = conn.get_extra_info("sockname") or ("127.0.0.1",)
        peer = conn.get_extra_info("peername") or (parse_target(self.host.target).host,)
        return str(local[0]), str(peer[0])

    def command(self, args: Sequence[str]) -> str:
        """The command line run on the remote host: its ddconsole and the quoted args."""
        return f"{self.host.ddconsole} {shlex.join(args)}"

    def local_argv(self, args: Sequence[str]) -> list[str]:
        return [sys.executable, "-m", "console", *args]

    # -- calls

    async def run(self, args: Sequence[str], timeout_s: float) -> RemoteResult:
        """Run `ddconsole ARGS` there to its end (LinkDown when it cannot, or takes longer
        than `timeout_s`: the remote command is then ended)."""
        if self.host.is_local:
            return await self._run_local(args, timeout_s)
        conn = await self._connection()
        try:
            process = await asyncio.wait_for(
                conn.create_process(self.command(args), stdin=asyncssh.DEVNULL),
                self.connect_timeout_s,
            )
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            raise LinkDown(
                f"host {self.host.name}: {describe(exc, self.connect_timeout_s)}"
            ) from None
        try:
            completed = await asyncio.wait_for(process.wait(check=False), timeout_s)
        except TimeoutError:
            _end(process)
            raise LinkDown(
                f"host {self.host.name}: `ddconsole {shlex.join(args)}` took over "
                f"{timeout_s:g} s and was ended"
            ) from None
        except (asyncssh.Error, OSError) as exc:
            raise LinkDown(f"host {self.host.name}: {describe(exc, timeout_s)}") from None
        return RemoteResult(
            _status(completed.exit_status, completed.exit_signal),
            _text(completed.stdout),
            _text(completed.stderr),
        )

    async def _run_local(self, args: Sequence[str], timeout_s: float) -> RemoteResult:
        proc = await asyncio.create_subprocess_exec(
            *self.local_argv(args),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise LinkDown(
                f"host {self.host.name}: `ddconsole {shlex.join(args)}` took over "
                f"{timeout_s:g} s and was ended"
            ) from None
        assert proc.returncode is not None
        return RemoteResult(
            proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        )

    async def relay(self, args: Sequence[str], out: IO[str], err: IO[str]) -> int:
        """Run `ddconsole ARGS` on the remote host with its stdout and stderr written to
        `out` and `err` as they come; its exit status (128 + N for a signal N)."""
        conn = await self._connection()
        try:
            process = await asyncio.wait_for(
                conn.create_process(self.command(args), stdin=asyncssh.DEVNULL, encoding=None),
                self.connect_timeout_s,
            )
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            raise LinkDown(
                f"host {self.host.name}: {describe(exc, self.connect_timeout_s)}"
            ) from None
        try:
            await asyncio.gather(_copy(process.stdout, out), _copy(process.stderr, err))
            completed = await process.wait(check=False)
        except asyncio.CancelledError:
            _end(process)
            raise
        except (asyncssh.Error, OSError) as exc:
            raise LinkDown(f"host {self.host.name}: {describe(exc, KEEPALIVE_S)}") from None
        if self._conn is None and completed.exit_status is None:
            raise LinkDown(f"host {self.host.name}: {self.reason or 'connection lost'}")
        return _status(completed.exit_status, completed.exit_signal)

    @contextlib.asynccontextmanager
    async def lines(self, args: Sequence[str]) -> AsyncIterator[_Lines]:
        """A long-lived `ddconsole ARGS` there whose stdout is read line by line; ended
        when the block is left."""
        if self.host.is_local:
            proc = await asyncio.create_subprocess_exec(
                *self.local_argv(args),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=MAX_LINE_BYTES,
            )
            assert proc.stdout is not None
            assert proc.stderr is not None
            try:
                yield _Lines(proc.stdout.readline, proc.stderr.read)
            finally:
                if proc.returncode is None:
                    proc.terminate()
                    try:
                        await asyncio.wait_for(proc.wait(), 5)
                    except TimeoutError:
                        proc.kill()
                        await proc.wait()
            return
        conn = await self._connection()
        try:
            process = await asyncio.wait_for(
                conn.create_process(self.command(args), stdin=asyncssh.DEVNULL),
                self.connect_timeout_s,
            )
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            raise LinkDown(
                f"host {self.host.name}: {describe(exc, self.connect_timeout_s)}"
            ) from None
        try:
            yield _Lines(process.stdout.readline, process.stderr.read)
        finally:
            _end(process)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 2)


@dataclass(frozen=True)
class _Lines:
    """A running command's stdout lines ('' at its end) and, once it ended, its stderr."""

    readline: Callable[[], Any]
    read_stderr: Callable[[], Any]


def _end(process: asyncssh.SSHClientProcess[Any]) -> None:
    """Ask the remote command to stop (where the server honours signals) and close the
    channel: its next write then fails and it exits."""
    with contextlib.suppress(Exception):
        process.send_signal("TERM")
    with contextlib.suppress(Exception):
        process.close()


def _status(exit_status: int | None, exit_signal: tuple[str, bool, str, str] | None) -> int:
    if exit_status is not None and exit_status >= 0:
        return exit_status
    if exit_signal:
        import signal

        number = getattr(signal, f"SIG{exit_signal[0]}", None)
        return 128 + int(number) if number is not None else 255
    return 255


def _text(data: object) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data if isinstance(data, str) else ""


async def _copy(reader: asyncssh.SSHReader[bytes], out: IO[str]) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            tail = decoder.decode(b"", final=True)
            if tail:
                out.write(tail)
            out.flush()
            return
        out.write(decoder.decode(chunk))
        out.flush()
