"""Processes on this host: identity (pid + start time), sessions, signals, environment
markers. What SGLang's processes look like is console.hw.discover's business.

Identity is the pair (pid, start time): a pid alone can be reused by an unrelated program.
Reads come from /proc; psutil only for listening sockets.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    pid: int
    ppid: int
    pgid: int
    sid: int
    start_ticks: int
    """Start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    state: str
    name: str


def process_info(pid: int) -> ProcessInfo | None:
    """Facts of a live (or zombie) process, or None when it does not exist."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return None
    name = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    return ProcessInfo(
        pid=pid,
        ppid=int(fields[1]),
        pgid=int(fields[2]),
        sid=int(fields[3]),
        start_ticks=int(fields[19]),
        state=fields[0],
        name=name,
    )


def is_running(pid: int, start_ticks: int | None) -> bool:
    """True when `pid` runs and is the same process (same start time), not a zombie."""
    info = process_info(pid)
    if info is None or info.state in ("Z", "X"):
        return False
    return start_ticks is None or info.start_ticks == start_ticks


def environ_value(pid: int, name: str) -> str | None:
    """One variable of another process's environment (our own user's processes only)."""
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    prefix = name.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode(errors="replace")
    return None


def argv_of(pid: int) -> tuple[str, ...]:
    """A process's command line as its arguments (empty when gone or unreadable)."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ()
    return split_cmdline(raw)


def split_cmdline(raw: bytes) -> tuple[str, ...]:
    """The arguments of a raw /proc/PID/cmdline (NUL separated)."""
    return tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)


def cmdline(pid: int) -> str:
    return " ".join(argv_of(pid))


def live_processes() -> list[ProcessInfo]:
    """Every live process on the host (zombies left out)."""
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            info = process_info(int(entry.name))
            if info is not None and info.state not in ("Z", "X"):
                found.append(info)
    return found


def send_signal(pid: int, sig: signal.Signals, start_ticks: int | None) -> bool:
    """Signal `pid` only if it is still the process we mean; False if it is gone."""
    if not is_running(pid, start_ticks):
        return False
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def uptime_s() -> float | None:
    """Seconds since boot, None when /proc/uptime cannot be read."""
    try:
        with open(PROC / "uptime") as handle:
            return float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def wall_to_ticks(wall: float) -> int | None:
    """A wall-clock time as clock ticks since boot (the unit of `start_ticks`), None when
    the uptime cannot be read."""
    uptime = uptime_s()
    if uptime is None:
        return None
    booted = time.time() - uptime
    return int((wall - booted) * os.sysconf("SC_CLK_TCK"))


def port_owner(port: int) -> tuple[int, str] | None:
    """The pid and command line listening on a TCP port, when this user may see it."""
    import psutil

    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None
    for connection in connections:
        if (
            connection.status == psutil.CONN_LISTEN
            and connection.laddr
            and connection.laddr.port == port
            and connection.pid
        ):
            return connection.pid, cmdline(connection.pid)
    return None
