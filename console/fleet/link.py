"""One link per host: how a ddconsole command runs there.

A remote host is one asyncssh connection, opened on first use with the user's keys,
`~/.ssh/config` and `~/.ssh/known_hosts` as asyncssh reads them (an unknown host key is
refused, never accepted silently, and a config that turns host-key checking off is refused),
kept alive, and reopened after it is lost. Output is read as bytes and decoded leniently: an
invalid byte costs a replacement character, not the connection. `local` runs the same
commands as local subprocesses of this interpreter. Every connect and every call has a
timeout, so a dead host never holds the caller's loop.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import shlex
import socket
import sys
import warnings
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

with warnings.catch_warnings():
    # cryptography 47+ warns that DSA is deprecated when asyncssh names its DSA key types at
    # import; ddconsole never uses DSA, and the warning would reach every --host user.
    warnings.filterwarnings("ignore", message="DSA is deprecated", category=UserWarning)
    import asyncssh

from console.core.errors import ConsoleError
from console.core.via_host import VIA_HOST_ENV
from console.fleet.hosts import Host, parse_target

CONNECT_TIMEOUT_S = 10.0
KEEPALIVE_S = 5.0
"""A connection that answers no keepalive for 3 of these is lost (a host that vanished)."""
MAX_LINE_BYTES = 16 << 20
"""A telemetry line longer than this is garbage, not a reading."""
STDERR_TAIL_BYTES = 8192
"""How much of a long-lived command's stderr is kept (read as it comes, so it never stalls
stdout): enough for its last words."""
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


class _HostKeysOff(Exception):
    """~/.ssh/config turns host-key checking off for the host; the message says what to do."""


async def _check_host_keys_on(host: str, port: Any, username: Any) -> None:
    """Refuse a host whose ~/.ssh/config says `UserKnownHostsFile none`: asyncssh reads that
    as no host-key check at all (OpenSSH would still check or ask), and ddconsole checks
    every host's key."""
    options = await asyncssh.SSHClientConnectionOptions.construct(
        None, config=(), host=host, port=port, username=username
    )
    if options.known_hosts is None:
        raise _HostKeysOff(
            "host-key checking is off for this host in ~/.ssh/config (UserKnownHostsFile "
            "none); ddconsole needs a known_hosts entry: drop that line for this host and "
            "connect once with ssh to check the fingerprint"
        )


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

    async def _connection(self, timeout_s: float | None = None) -> asyncssh.SSHClientConnection:
        """The open connection, or a new one within `timeout_s` (default: the link's
        connect timeout); LinkDown when the host cannot be reached."""
        limit = (
            self.connect_timeout_s if timeout_s is None else min(timeout_s, self.connect_timeout_s)
        )
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

            port = target.port if target.port is not None else ()
            username = target.user if target.user is not None else ()
            try:
                await _check_host_keys_on(target.host, port, username)
                conn, _ = await asyncio.wait_for(
                    asyncssh.create_connection(
                        client,
                        target.host,
                        port=port,
                        username=username,
                        connect_timeout=limit,
                        keepalive_interval=KEEPALIVE_S,
                        keepalive_count_max=3,
                    ),
                    limit + 1 if timeout_s is None else limit,
                )
            except _HostKeysOff as exc:
                self._set(STALE, str(exc))
                raise LinkDown(f"host {self.host.name}: {exc}") from None
            except (asyncssh.Error, OSError, TimeoutError, ValueError) as exc:
                why = f"cannot connect to {self.host.target}: {describe(exc, limit)}"
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
        """The command line run on the remote host: its ddconsole and the quoted args, told
        which host it is to this console (its printed hints then say `--host NAME`)."""
        via = f"{VIA_HOST_ENV}={shlex.quote(self.host.name)}"
        return f"env {via} {self.host.ddconsole} {shlex.join(args)}"

    def local_argv(self, args: Sequence[str]) -> list[str]:
        return [sys.executable, "-m", "console", *args]

    # -- calls

    async def run(self, args: Sequence[str], timeout_s: float) -> RemoteResult:
        """Run `ddconsole ARGS` there to its end, all within `timeout_s` (connecting and
        starting included). LinkDown when it cannot, when the connection is lost during the
        call, or when it takes longer: the command is then ended, as it is when the caller
        is cancelled."""
        if self.host.is_local:
            return await self._run_local(args, timeout_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s

        def left() -> float:
            return max(0.0, deadline - loop.time())

        shown = f"`ddconsole {shlex.join(args)}`"
        conn = await self._connection(left())
        process = await self._start(conn, args, left(), encoding=None)
        try:
            completed = await asyncio.wait_for(process.wait(check=False), left())
        except TimeoutError:
            _end(process)
            raise LinkDown(
                f"host {self.host.name}: {shown} took over {timeout_s:g} s and was ended"
            ) from None
        except (asyncssh.Error, OSError) as exc:
            _end(process)
            raise LinkDown(f"host {self.host.name}: {describe(exc, KEEPALIVE_S)}") from None
        except BaseException:  # cancelled: the command must not run on unobserved
            _end(process)
            raise
        if completed.exit_status is None and completed.exit_signal is None:
            await asyncio.sleep(0)  # the lost connection's reason arrives with it
            raise LinkDown(
                f"host {self.host.name}: {self.reason or 'connection lost'} "
                f"({shown} may still be running there)"
            )
        return RemoteResult(
            _status(completed.exit_status, completed.exit_signal),
            _text(completed.stdout),
            _text(completed.stderr),
        )

    async def _start(
        self,
        conn: asyncssh.SSHClientConnection,
        args: Sequence[str],
        timeout_s: float,
        encoding: str | None = None,
    ) -> asyncssh.SSHClientProcess[Any]:
        """Start `ddconsole ARGS` on the connection (its output read as bytes); LinkDown
        when the host does not answer within `timeout_s` or refuses."""
        limit = min(timeout_s, self.connect_timeout_s)
        try:
            return await asyncio.wait_for(
                conn.create_process(self.command(args), stdin=asyncssh.DEVNULL, encoding=encoding),
                limit,
            )
        except TimeoutError:
            raise LinkDown(
                f"host {self.host.name}: starting `ddconsole {shlex.join(args)}` there got no "
                f"answer within {round(limit, 1):g} s"
            ) from None
        except (asyncssh.Error, OSError) as exc:
            raise LinkDown(f"host {self.host.name}: {describe(exc, limit)}") from None

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
            await _kill(proc)
            raise LinkDown(
                f"host {self.host.name}: `ddconsole {shlex.join(args)}` took over "
                f"{timeout_s:g} s and was ended"
            ) from None
        except BaseException:  # cancelled: end the command rather than leave it running
            await asyncio.shield(_kill(proc))
            raise
        assert proc.returncode is not None
        return RemoteResult(
            proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        )

    async def relay(self, args: Sequence[str], out: IO[str], err: IO[str]) -> int:
        """Run `ddconsole ARGS` on the remote host with its stdout and stderr written to
        `out` and `err` as they come; its exit status (128 + N for a signal N). A local
        output that is closed (`| head`) raises BrokenPipeError, with the command ended.
        Where this process's stdin and `out` are a terminal, the command gets a terminal
        there and this one relays it (keys, screen, size): the console, prompts and
        progress bars work as over `ssh -t`."""
        if _on_terminal(out):
            return await self.relay_terminal(args, out.fileno())
        conn = await self._connection()
        process = await self._start(conn, args, self.connect_timeout_s)
        copies = [
            asyncio.ensure_future(_copy(process.stdout, out)),
            asyncio.ensure_future(_copy(process.stderr, err)),
        ]
        try:
            await asyncio.gather(*copies)
            completed = await process.wait(check=False)
        except BaseException as exc:
            _end(process)
            for copy in copies:
                copy.cancel()
            await asyncio.shield(asyncio.wait(copies))
            if isinstance(exc, BrokenPipeError) or not isinstance(exc, asyncssh.Error | OSError):
                raise
            raise LinkDown(f"host {self.host.name}: {describe(exc, KEEPALIVE_S)}") from None
        if completed.exit_status is None and completed.exit_signal is None:
            await asyncio.sleep(0)  # the lost connection's reason arrives with it
            raise LinkDown(f"host {self.host.name}: {self.reason or 'connection lost'}")
        return _status(completed.exit_status, completed.exit_signal)

    async def relay_terminal(self, args: Sequence[str], stdout_fd: int) -> int:
        """`ddconsole ARGS` on a terminal there, relayed to this one (console.fleet.terminal);
        its exit status, 128 + N when signal N here ended the relay."""
        from console.fleet import terminal

        conn = await self._connection()
        try:
            completed, ended_by = await terminal.relay(
                conn, self.command(args), sys.stdin.fileno(), stdout_fd
            )
        except (asyncssh.Error, OSError) as exc:
            raise LinkDown(f"host {self.host.name}: {describe(exc, KEEPALIVE_S)}") from None
        if ended_by is not None:
            return 128 + ended_by
        if completed.exit_status is None and completed.exit_signal is None:
            await asyncio.sleep(0)  # the lost connection's reason arrives with it
            raise LinkDown(f"host {self.host.name}: {self.reason or 'connection lost'}")
        return _status(completed.exit_status, completed.exit_signal)

    @contextlib.asynccontextmanager
    async def lines(self, args: Sequence[str]) -> AsyncIterator[_Lines]:
        """A long-lived `ddconsole ARGS` there whose stdout is read line by line (bytes);
        its stderr is read all along, its tail kept for `read_stderr`. Ended when the block
        is left."""
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
            tail = _Tail(proc.stderr)
            try:
                yield _Lines(proc.stdout.readline, tail.read)
            finally:
                tail.cancel()
                if proc.returncode is None:
                    proc.terminate()
                    try:
                        await asyncio.wait_for(proc.wait(), 5)
                    except TimeoutError:
                        await _kill(proc)
            return
        conn = await self._connection()
        process = await self._start(conn, args, self.connect_timeout_s)
        tail = _Tail(process.stderr)
        try:
            yield _Lines(process.stdout.readline, tail.read)
        finally:
            tail.cancel()
            _end(process)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 2)


@dataclass(frozen=True)
class _Lines:
    """A running command's stdout lines (b'' at its end) and its stderr's tail."""

    readline: Callable[[], Any]
    read_stderr: Callable[[], Any]


class _Tail:
    """Reads a command's stderr as it comes, keeping its last bytes: a chatty stderr never
    fills the channel window (or pipe) that the command's stdout needs."""

    def __init__(self, reader: Any) -> None:
        self._kept: deque[bytes] = deque()
        self._size = 0
        self._task = asyncio.ensure_future(self._drain(reader))

    async def _drain(self, reader: Any) -> None:
        with contextlib.suppress(Exception):
            while chunk := await reader.read(65536):
                self._kept.append(chunk)
                self._size += len(chunk)
                while self._size - len(self._kept[0]) >= STDERR_TAIL_BYTES:
                    self._size -= len(self._kept.popleft())

    async def read(self) -> bytes:
        """The stderr's tail once the command closed it (what came so far after 2 s)."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._task), 2)
        return b"".join(self._kept)[-STDERR_TAIL_BYTES:]

    def cancel(self) -> None:
        self._task.cancel()


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """Kill a local command and reap it (bounded: a process stuck in the kernel is left)."""
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 5)


def _end(process: asyncssh.SSHClientProcess[Any]) -> None:
    """Ask the remote command to stop (where the server honours signals) and close the
    channel: its next write then fails and it exits."""
    with contextlib.suppress(Exception):
        process.send_signal("TERM")
    with contextlib.suppress(Exception):
        process.close()


def _on_terminal(out: IO[str]) -> bool:
    """This process's stdin and `out` are both a terminal (a person at the keyboard)."""
    try:
        return sys.stdin.isatty() and out.isatty() and os.isatty(out.fileno())
    except (AttributeError, OSError, ValueError):  # a stream with no descriptor
        return False


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
    """Copy the reader's bytes to `out` as text (an invalid byte reads as a replacement
    character)."""
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
