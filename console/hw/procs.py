"""Processes on this host: identity (pid + start time), sessions, SGLang titles, signals,
environment markers.

Identity is the pair (pid, start time): a pid alone can be reused by an unrelated program.
Reads come from /proc; psutil only for memory and listening sockets.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
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


def cmdline(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)


SGLANG_TITLE_PREFIX = "sglang::"
"""SGLang's children retitle themselves with setproctitle: `sglang::scheduler`,
`sglang::scheduler_TP{n}`, `sglang::scheduler_DP{d}_TP{t}`, `sglang::detokenizer`,
`sglang::data_parallel_controller` (sglang 0.5.23 srt/managers/scheduler.py:6279-6294,
detokenizer_manager.py:551, data_parallel_controller.py:955)."""


def sglang_title(pid: int) -> str | None:
    """The `sglang::...` title a process gave itself, or None. setproctitle rewrites the
    argv area, so the title is the whole of /proc/PID/cmdline."""
    text = cmdline(pid)
    return text if text.startswith(SGLANG_TITLE_PREFIX) else None


def live_processes() -> list[ProcessInfo]:
    """Every live process on the host (zombies left out)."""
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            info = process_info(int(entry.name))
            if info is not None and info.state not in ("Z", "X"):
                found.append(info)
    return found


def session_processes(sid: int) -> list[ProcessInfo]:
    """Every live process of session `sid`: a server started with its own session keeps it
    in every child, even one orphaned by its leader's death."""
    return [info for info in live_processes() if info.sid == sid]


SCHEDULER_TITLE = "sglang::scheduler"
"""The title prefix of every scheduler (sglang 0.5.23 srt/managers/scheduler.py:6294)."""


def scheduler_processes(leader_pid: int) -> list[ProcessInfo]:
    """The schedulers under a leader: its descendants titled `sglang::scheduler*` (children,
    or with dp > 1 the DP controller's children). They alone are NUMA bound and hold the GPUs
    (sglang 0.5.23 srt/entrypoints/engine.py:956-987, srt/utils/numa_utils.py:28-68)."""
    children: dict[int, list[ProcessInfo]] = {}
    for info in live_processes():
        children.setdefault(info.ppid, []).append(info)
    found = []
    todo = list(children.get(leader_pid, []))
    while todo:
        info = todo.pop()
        title = sglang_title(info.pid)
        if title is not None and title.startswith(SCHEDULER_TITLE):
            found.append(info)
        todo.extend(children.get(info.pid, []))
    return sorted(found, key=lambda info: info.pid)


@dataclass(frozen=True, slots=True)
class Membership:
    """How to recognise one server's processes: its environment marker, which SGLang's
    retitled children lose (setproctitle overwrites the environ area unless SPT_NOENV=1), or
    its session, which every child keeps, orphans included."""

    marker: str
    session: int | None
    """The leader's session id (None: unknown or no longer ours)."""


def member_processes(
    marker_name: str, wanted: Mapping[str, Membership]
) -> dict[str, list[ProcessInfo]]:
    """The live processes of each server in `wanted`, in one pass over /proc: those in its
    session, and those whose environment carries `marker_name` = its marker."""
    by_session = {m.session: key for key, m in wanted.items() if m.session is not None}
    by_marker = {m.marker: key for key, m in wanted.items()}
    found: dict[str, list[ProcessInfo]] = {key: [] for key in wanted}
    for info in live_processes():
        key = by_session.get(info.sid)
        if key is None:
            value = environ_value(info.pid, marker_name)
            key = by_marker.get(value) if value is not None else None
        if key is not None:
            found[key].append(info)
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


def rss_bytes(pid: int) -> int | None:
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.Error, OSError):
        return None


def cpu_affinity(pid: int) -> tuple[int, ...] | None:
    try:
        return tuple(sorted(os.sched_getaffinity(pid)))
    except OSError:
        return None


def boot_ticks_per_second() -> int:
    return os.sysconf("SC_CLK_TCK")


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
