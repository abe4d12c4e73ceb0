"""The parent of a managed server: spawns it in its own session, filters its output into the
log, and records how it ended.

Run detached by the console (`python -m console.server.waiter STATE_SERVERS_DIR ID LOG --
ARGV...`). It writes `ID.spawn.json` (pid, start time) as soon as the server runs and
`ID.exit.json` (return code) when it ends, so any later console knows both. The server's
stdout and stderr come through a pipe: real SGLang logs its API keys in clear (sglang 0.5.23
srt/entrypoints/engine.py:173-174, 1185 log `server_args={resolved dict}`), so the secret
values of its argv and environment become `***` before anything reaches the log file. Kept
free of heavy imports: it starts for every launch.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from console.core.jsonio import atomic_write_text
from console.core.redact import StreamMasker, argv_secrets, secret_values
from console.hw.procs import process_info
from console.server.keypipe import KeyPipe, KeyPipeError, hand_over, placeholders

MARKER_ENV = "DDCONSOLE_SERVER"
"""The variable naming a managed server in its processes (console.server.manager)."""
CHUNK = 1 << 16
"""Bytes read from the pipe at once: a burst of output costs few system calls."""


def main(argv: list[str]) -> int:
    if argv[:1] == ["--detach"]:
        # Fork once more and let the launching console return: the waiter then belongs to no
        # console (no zombie to reap, nothing tied to the console's lifetime).
        if os.fork() > 0:
            os._exit(0)
        os.setsid()
        argv = argv[1:]
    if len(argv) < 5 or argv[3] != "--":
        print(
            "usage: python -m console.server.waiter SERVERS_DIR ID LOG -- ARGV...", file=sys.stderr
        )
        return 2
    folder, server_id, log_path, command = Path(argv[0]), argv[1], Path(argv[2]), argv[4:]
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    masker = StreamMasker(argv_secrets(command) | secret_values())
    with log_path.open("ab", buffering=0) as log:
        try:
            command, keys = _hand_over_keys(folder, server_id, command)
        except (KeyPipeError, OSError) as exc:
            log.write(f"ddconsole: cannot hand the API key over: {exc}\n".encode())
            _write(
                folder / f"{server_id}.exit.json",
                {"returncode": 127, "ended_wall": time.time(), "spawn_error": str(exc)},
            )
            _after_exit(folder, server_id)
            return 1
        if keys is not None:
            masker = StreamMasker(argv_secrets(command) | secret_values() | keys.secrets)
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                # The server must not inherit our ignored signals.
                restore_signals=True,
                preexec_fn=_default_signals,
            )
        except OSError as exc:
            if keys is not None:
                keys.close()
            log.write(f"ddconsole: cannot start {command[0]}: {exc}\n".encode())
            _write(
                folder / f"{server_id}.exit.json",
                {"returncode": 127, "ended_wall": time.time(), "spawn_error": str(exc)},
            )
            _after_exit(folder, server_id)
            return 1
        # From here on the key pipe is closed however the waiter ends: a server blocked
        # opening it would otherwise wait forever.
        try:
            info = process_info(proc.pid)
            try:
                _write(
                    folder / f"{server_id}.spawn.json",
                    {
                        "pid": proc.pid,
                        "start_ticks": info.start_ticks if info else 0,
                        "waiter_pid": os.getpid(),
                        "spawned_wall": time.time(),
                    },
                )
            except OSError as exc:
                # A full or read-only state dir: the server runs on, found by its marker.
                _write_log(log, f"ddconsole: cannot write {server_id}.spawn.json: {exc}\n".encode())
            assert proc.stdout is not None
            _pump(
                proc,
                proc.stdout.fileno(),
                log,
                masker,
                folder / f"{server_id}.exit.json",
                lambda: _after_exit(folder, server_id),
            )
        finally:
            if keys is not None:
                keys.close()
    return 0


def _hand_over_keys(
    folder: Path, server_id: str, command: list[str]
) -> tuple[list[str], KeyPipe | None]:
    """The command with its `--api-key ***` placeholders swapped for a key pipe; the
    variables' names come from the server's record (console/server/keypipe.py)."""
    if not placeholders(command):
        return command, None
    try:
        plan = json.loads((folder / f"{server_id}.json").read_text(encoding="utf-8"))["plan"]
    except (OSError, ValueError, KeyError, TypeError):
        raise KeyPipeError(f"the server record {server_id}.json names no key variable") from None
    if not isinstance(plan, dict):
        raise KeyPipeError(f"the server record {server_id}.json names no key variable")
    return hand_over(command, plan, os.environ)


def _pump(
    proc: subprocess.Popen[bytes],
    fd: int,
    log: BinaryIO,
    masker: StreamMasker,
    exit_path: Path,
    after_exit: Callable[[], None] = lambda: None,
) -> None:
    """Copy the server's output into the log, masked, as it comes, and record the leader's
    exit the moment it happens (its last lines first). Its children may hold the pipe after
    it ends (orphans): their output is still copied until the last one closes it."""
    pidfd = _pidfd(proc.pid)
    exited = False
    while True:
        watched = [fd] if exited or pidfd is None else [fd, pidfd]
        # Without a pidfd (an old kernel), the exit is polled every 0.1 s.
        timeout = None if exited or pidfd is not None else 0.1
        ready, _, _ = select.select(watched, [], [], timeout)
        if fd in ready and not _copy(fd, log, masker):
            break
        ended = pidfd in ready if pidfd is not None else proc.poll() is not None
        if not exited and ended:
            # Everything the leader wrote is in the pipe now: log it before the exit record,
            # which is what readers classify the log on.
            eof = _drain(fd, log, masker)
            _record_exit(proc, exit_path)
            after_exit()
            exited = True
            if eof:
                break
    _write_log(log, masker.flush())
    if pidfd is not None:
        os.close(pidfd)
    if not exited:
        _record_exit(proc, exit_path)
        after_exit()


def _copy(fd: int, log: BinaryIO, masker: StreamMasker) -> bool:
    """One read from the pipe into the log; False at the end of the stream."""
    try:
        chunk = os.read(fd, CHUNK)
    except OSError:
        return False
    if not chunk:
        return False
    _write_log(log, masker.feed(chunk))
    return True


def _drain(fd: int, log: BinaryIO, masker: StreamMasker) -> bool:
    """Copy what the pipe holds now, without waiting; True if the stream ended."""
    while select.select([fd], [], [], 0)[0]:
        if not _copy(fd, log, masker):
            return True
    return False


def _write_log(log: BinaryIO, data: bytes) -> None:
    """Write to the log; a full or failing disk loses output, never the pipe's reader (a
    server whose pipe is not read blocks on its next log line)."""
    try:
        while data:
            written = log.write(data)
            data = data[written:] if written else b""
    except OSError:
        pass


def _after_exit(folder: Path, server_id: str) -> None:
    """A node of a multi-node gang: the other nodes go too (console.server.gang), unless
    this one was stopped on request. Read cheaply: most servers are no gang."""
    try:
        record = json.loads((folder / f"{server_id}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(record, dict) or not record.get("gang"):
        return
    if record.get("stop_requested_wall") is not None:
        return
    from console.server.gang import start_watch

    try:
        start_watch(folder, server_id, MARKER_ENV)
    except OSError:
        pass


def _record_exit(proc: subprocess.Popen[bytes], exit_path: Path) -> None:
    returncode = proc.wait()
    _write(exit_path, {"returncode": returncode, "ended_wall": time.time()})


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when the process ends (Linux 5.3+)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _default_signals() -> None:
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    # A write to the pipe after the waiter died fails with EPIPE instead of killing the
    # server: Python ignores SIGPIPE itself, but a wrapper (a shell script, numactl's child)
    # would die of it; an ignored signal stays ignored across exec.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)


def _write(path: Path, data: dict[str, object]) -> None:
    atomic_write_text(path, json.dumps(data))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
