"""Fake SSH hosts for the fleet tests: an asyncssh server per host on its own loopback address
(127.0.0.2, 127.0.0.3) and a free port, with its own host key, that runs each requested
command as a real local subprocess (`/bin/sh -c COMMAND`, as sshd runs it through the user's
shell) in that host's own environment: its own XDG state and config folders, so its own
servers and its own simulated 8-GPU demo host.

The client side is the user's as ddconsole meets it: a temporary HOME whose `~/.ssh` holds
the client key, a known_hosts naming every fake host's key, and a config with an alias.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import signal
import struct
import sys
import termios
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from console.core.net import free_port

DDCONSOLE = str(Path(sys.executable).with_name("ddconsole"))
"""The venv's `ddconsole` script: what hosts.toml's `ddconsole` names on each fake host."""
SIM_SPEED = "20"


class LoopThread:
    """An event loop of its own in a daemon thread: the fake SSH servers keep serving while
    the test blocks on a subprocess or runs a loop of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@dataclass
class FakeHost:
    """One SSH host: `start()` listens on address:port, `stop()` closes the listener and
    every connection and ends the commands it was running (as a host going away does)."""

    name: str
    address: str
    port: int
    root: Path
    key: asyncssh.SSHKey
    authorized: Path
    thread: LoopThread
    env: dict[str, str] = field(default_factory=dict)
    _acceptor: Any = None
    _conns: set[Any] = field(default_factory=set)
    _procs: set[asyncio.subprocess.Process] = field(default_factory=set)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def start(self) -> None:
        self.thread.call(self._start())

    def freeze(self, seconds: float) -> None:
        """Stop answering for `seconds` with every TCP connection left open (a host that
        hangs, not one that went away). It blocks the loop thread, so every fake host
        sharing it freezes too."""
        self.thread.loop.call_soon_threadsafe(time.sleep, seconds)

    def script(self, name: str, body: str) -> str:
        """A shell script in this host's root, for a hosts.toml `ddconsole` that behaves
        oddly; its path."""
        path = self.root / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
        return str(path)

    @property
    def target(self) -> str:
        return f"tester@{self.address}:{self.port}"

    def stop(self) -> None:
        self.thread.call(self._stop())

    async def _start(self) -> None:
        host = self

        class Server(asyncssh.SSHServer):
            def connection_made(self, conn: Any) -> None:
                host._conns.add(conn)

            def connection_lost(self, exc: Exception | None) -> None:
                pass

        self._acceptor = await asyncssh.listen(
            self.address,
            self.port,
            server_host_keys=[self.key],
            authorized_client_keys=str(self.authorized),
            server_factory=Server,
            process_factory=self._handle,
            encoding=None,
            line_editor=False,  # a terminal's keys go to the command's own terminal, raw
            reuse_address=True,
        )

    async def _stop(self) -> None:
        if self._acceptor is not None:
            self._acceptor.close()
            await self._acceptor.wait_closed()
            self._acceptor = None
        for conn in list(self._conns):
            conn.abort()
        self._conns.clear()
        for proc in list(self._procs):
            _kill_group(proc)
        if self._tasks:  # each command's handler ends once its process has
            await asyncio.wait(list(self._tasks), timeout=15)

    async def _handle(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._run(process)
        finally:
            self._tasks.discard(task)

    async def _run(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        if process.term_type:
            await self._run_on_terminal(process)
            return
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            process.command or "true",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=self.root,
            start_new_session=True,
            preexec_fn=as_sshd_starts_it,
        )
        self._procs.add(proc)
        assert proc.stdout is not None
        assert proc.stderr is not None
        try:
            await asyncio.gather(
                _pump(proc.stdout, process.stdout, proc), _pump(proc.stderr, process.stderr, proc)
            )
            status = await proc.wait()
            with contextlib.suppress(Exception):
                process.exit(status if status >= 0 else 128 - status)
        finally:
            if proc.returncode is None:
                _kill_group(proc)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 10)
            self._procs.discard(proc)

    async def _run_on_terminal(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        """A client that asked for a terminal (`ssh -t`): the command on a pseudo-terminal
        of its size, as its session's controlling terminal, as sshd runs it; keys in, the
        screen out, a size change followed."""
        master, slave = pty.openpty()
        columns, rows, *_ = process.term_size
        _set_size(slave, columns, rows)

        def controlling_terminal() -> None:
            as_sshd_starts_it()
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            process.command or "true",
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**self.env, "TERM": process.term_type or "xterm"},
            cwd=self.root,
            preexec_fn=controlling_terminal,
        )
        os.close(slave)
        self._procs.add(proc)
        loop = asyncio.get_running_loop()
        ended = asyncio.Event()
        channel_open = True

        def hang_up() -> None:
            """The client's channel is gone: sshd closes the terminal's master side, which
            hangs the session up (SIGHUP, and its terminal reads fail)."""
            nonlocal channel_open
            if not channel_open:
                return
            channel_open = False
            loop.remove_reader(master)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGHUP)
            ended.set()

        def screen_out() -> None:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal has gone
                chunk = b""
            if not chunk:
                loop.remove_reader(master)
                ended.set()
            elif channel_open:
                try:
                    process.stdout.write(chunk)
                except Exception:  # BrokenPipeError: the channel closed under us
                    hang_up()

        async def keys_in() -> None:
            while True:
                try:
                    data = await process.stdin.read(4096)
                except asyncssh.TerminalSizeChanged as change:
                    _set_size(master, change.width, change.height)
                    continue
                except Exception:
                    return
                if not data:
                    return
                os.write(master, data)

        async def watch_channel() -> None:
            await process.channel.wait_closed()
            if proc.returncode is None:
                hang_up()

        loop.add_reader(master, screen_out)
        keys = asyncio.ensure_future(keys_in())
        closed = asyncio.ensure_future(watch_channel())
        try:
            await ended.wait()
            if channel_open:
                status = await proc.wait()
                with contextlib.suppress(Exception):
                    process.exit(status if status >= 0 else 128 - status)
        finally:
            keys.cancel()
            closed.cancel()
            loop.remove_reader(master)
            os.close(master)  # a hung-up session's terminal: gone
            if proc.returncode is None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 5)
            if proc.returncode is None:
                _kill_group(proc)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 10)
            self._procs.discard(proc)


def as_sshd_starts_it() -> None:
    """A command's signals as sshd leaves them: none blocked, none ignored (a pytest worker's
    thread may have some blocked or ignored by an earlier test, and a child inherits both)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)


def _set_size(fd: int, columns: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


async def _pump(
    reader: asyncio.StreamReader, writer: Any, proc: asyncio.subprocess.Process
) -> None:
    """Copy to the channel until EOF. Once the channel is gone (the client went away) the
    command is ended, as sshd ends it, and the rest of its output is read and dropped."""
    gone = False
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return
        if gone:
            continue
        try:
            writer.write(chunk)
            await writer.drain()
        except Exception:
            gone = True
            _kill_group(proc)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)


@dataclass
class SshWorld:
    home: Path
    hosts: dict[str, FakeHost]
    client_key: Path


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.close()


def _host_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "DDCONSOLE_"))}
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        folder = root / name.lower()
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    env["HOME"] = str(root)
    env["DDCONSOLE_SIM_SPEED"] = SIM_SPEED
    return env


@pytest.fixture
def ssh_world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loop_thread: LoopThread
) -> Iterator[SshWorld]:
    """Two fake hosts, `alpha` on 127.0.0.2 (reached through a ~/.ssh/config alias) and
    `beta` on 127.0.0.3 (reached as user@127.0.0.3:PORT), both started; HOME points at a
    client home whose ~/.ssh knows them. This process's own demo host is `local`."""
    home = tmp_path / "client-home"
    ssh = home / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    client = asyncssh.generate_private_key("ssh-ed25519")
    client.write_private_key(str(ssh / "id_ed25519"))
    (ssh / "id_ed25519").chmod(0o600)
    client.write_public_key(str(ssh / "id_ed25519.pub"))
    authorized = tmp_path / "authorized_keys"
    client.write_public_key(str(authorized))
    hosts: dict[str, FakeHost] = {}
    known: list[str] = []
    for name, address in (("alpha", "127.0.0.2"), ("beta", "127.0.0.3")):
        key = asyncssh.generate_private_key("ssh-ed25519")
        root = tmp_path / f"host-{name}"
        host = FakeHost(
            name, address, free_port(address), root, key, authorized, loop_thread, _host_env(root)
        )
        hosts[name] = host
        public = key.export_public_key("openssh").decode().strip()
        known.append(f"[{address}]:{host.port} {public}")
    (ssh / "known_hosts").write_text("\n".join(known) + "\n")
    alpha = hosts["alpha"]
    (ssh / "config").write_text(
        f"Host alpha\n  HostName {alpha.address}\n  Port {alpha.port}\n  User tester\n"
        "  IdentityFile ~/.ssh/id_ed25519\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", SIM_SPEED)
    for host in hosts.values():
        host.start()
    yield SshWorld(home, hosts, ssh / "id_ed25519")
    for host in hosts.values():
        host.stop()
        stop_servers_left(host)


SIDE_FILES = (".spawn.json", ".exit.json")


def stop_servers_left(host: FakeHost) -> None:
    """Servers a test left running on a fake host (it failed before its own `down`): stopped
    in that host's environment, as its user would, so none outlives the test."""
    import subprocess

    state = Path(host.env["XDG_STATE_HOME"])
    for demo, folder in ((True, "ddconsole-demo"), (False, "ddconsole")):
        servers = state / folder / "servers"
        records = [p for p in servers.glob("*.json") if not p.name.endswith(SIDE_FILES)]
        # A server that ended has its exit recorded beside it (the waiter writes it).
        if all((servers / f"{p.stem}.exit.json").exists() for p in records):
            continue
        subprocess.run(
            [DDCONSOLE, *(["--demo"] if demo else []), "down", "--all", "--grace", "2"],
            env=host.env,
            cwd=host.root,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )


def write_hosts_toml(world: SshWorld) -> Path:
    """hosts.toml naming both fake hosts (one by alias, one by user@address:port)."""
    from console.fleet.hosts import hosts_path

    beta = world.hosts["beta"]
    path = hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'[[host]]\nname = "alpha"\ntarget = "alpha"\nddconsole = "{DDCONSOLE}"\n\n'
        f'[[host]]\nname = "beta"\ntarget = "tester@{beta.address}:{beta.port}"\n'
        f'ddconsole = "{DDCONSOLE}"\n'
    )
    return path
