"""SGLang's processes on this host: the one place that knows their titles and command lines,
finds servers and their schedulers, and tells which processes belong to a managed server.

A leader is a process whose command line runs SGLang's server entry (`python -m
sglang.launch_server ...`, the `sglang serve ...` console script), or the parent of processes
SGLang retitled (`sglang::scheduler*`, `sglang::detokenizer`,
`sglang::data_parallel_controller`): the leader itself is never retitled
(sglang 0.5.23 srt/entrypoints/engine.py:956-987 starts the children with mp.Process).
The title rule also finds any SGLang-compatible leader whatever its command line, such as a
hand-started simulator (`python -m console.sim ...`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from console.hw.procs import (
    PROC,
    ProcessInfo,
    argv_of,
    cmdline,
    environ_value,
    live_processes,
    process_info,
    split_cmdline,
    uptime_s,
)

SGLANG_TITLE_PREFIX = "sglang::"
"""SGLang's children retitle themselves with setproctitle, which rewrites the argv area: the
title is the whole of /proc/PID/cmdline."""
SCHEDULER_TITLE = "sglang::scheduler"
"""`sglang::scheduler` (tp=1), `sglang::scheduler_TP{n}`, `sglang::scheduler_DP{d}_TP{t}`, with
PP/ATTN_CP/MOE_DP/EP parts when those are > 1 (sglang 0.5.23
srt/managers/scheduler.py:6279-6294)."""
CHILD_TITLES = (
    SCHEDULER_TITLE,
    "sglang::detokenizer",  # sglang 0.5.23 srt/managers/detokenizer_manager.py:551
    # sglang 0.5.23 srt/managers/data_parallel_controller.py:955
    "sglang::data_parallel_controller",
)
"""Titles whose nearest untitled ancestor is a server's leader. A DP controller's schedulers
are its own children (data_parallel_controller.py:790), so the walk passes through it."""

LAUNCH_MODULE = "sglang.launch_server"
"""`python -m sglang.launch_server` (sglang 0.5.23 launch_server.py)."""
CONSOLE_SCRIPT = "sglang"
"""The `sglang` console script, `sglang = sglang.cli.main:main` (sglang 0.5.23
entry_points.txt); `sglang serve ...` runs the server in that process (cli/serve.py:181-218)."""


def is_sglang_title(text: str) -> bool:
    return text.startswith(SGLANG_TITLE_PREFIX)


def is_child_title(text: str) -> bool:
    return text.startswith(CHILD_TITLES)


def is_scheduler_title(text: str) -> bool:
    return text.startswith(SCHEDULER_TITLE)


def sglang_title(pid: int) -> str | None:
    """The `sglang::...` title a process gave itself, or None."""
    text = cmdline(pid)
    return text if is_sglang_title(text) else None


@dataclass(frozen=True, slots=True)
class FoundProcess:
    pid: int
    start_ticks: int
    title: str


@dataclass(frozen=True, slots=True)
class FoundServer:
    """One SGLang server's leader and the retitled processes under it."""

    pid: int
    start_ticks: int
    sid: int
    argv: tuple[str, ...]
    how: str
    """`launch_server`, `serve` (by command line) or `children` (by its children's titles)."""
    children: tuple[FoundProcess, ...]

    @property
    def scheduler_pids(self) -> tuple[int, ...]:
        return tuple(c.pid for c in self.children if is_scheduler_title(c.title))


def entry_kind(argv: tuple[str, ...]) -> str | None:
    """`launch_server` or `serve` when argv starts SGLang's server, else None. The entry
    must follow a Python interpreter (or be the program itself), so an editor or `tail` on
    `sglang/launch_server.py` is not taken for a server."""
    for index, arg in enumerate(argv):
        following = argv[index + 1] if index + 1 < len(argv) else ""
        if index and not any(os.path.basename(a).startswith("python") for a in argv[:index]):
            continue
        if arg == "-m" and following == LAUNCH_MODULE:
            return "launch_server"
        if arg.endswith("sglang/launch_server.py"):
            return "launch_server"
        if os.path.basename(arg) == CONSOLE_SCRIPT and following == "serve":
            return "serve"
    return None


def _sglang_cmdlines() -> dict[int, bytes]:
    """The raw command line of every process that mentions sglang: the one pass over /proc,
    one read per process (a stat read as well would double the cost of every scan)."""
    found = {}
    try:
        entries = list(os.scandir(PROC))
    except OSError:
        return {}
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            with open(f"{PROC}/{entry.name}/cmdline", "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        if b"sglang" in raw:
            found[int(entry.name)] = raw
    return found


class _Tree:
    """Process facts read on demand during one scan (ancestors of the candidates only)."""

    def __init__(self) -> None:
        self._known: dict[int, ProcessInfo | None] = {}

    def info(self, pid: int) -> ProcessInfo | None:
        if pid not in self._known:
            info = process_info(pid)
            self._known[pid] = None if info is None or info.state in ("Z", "X") else info
        return self._known[pid]

    def ancestors(self, pid: int) -> list[ProcessInfo]:
        found: list[ProcessInfo] = []
        info = self.info(pid)
        while info is not None and info.ppid > 1 and len(found) < 16:
            info = self.info(info.ppid)
            if info is not None:
                found.append(info)
        return found


class _Scan:
    """One pass over /proc: every retitled SGLang process and every SGLang server entry."""

    def __init__(self) -> None:
        self.tree = _Tree()
        self.titles: dict[int, str] = {}
        self.entries: dict[int, tuple[str, tuple[str, ...]]] = {}
        for pid, raw in _sglang_cmdlines().items():
            argv = split_cmdline(raw)
            if raw.startswith(SGLANG_TITLE_PREFIX.encode()):
                self.titles[pid] = " ".join(argv)
                continue
            kind = entry_kind(argv)
            if kind is not None:
                self.entries[pid] = (kind, argv)

    def found(self, pid: int) -> FoundProcess | None:
        info = self.tree.info(pid)
        return FoundProcess(pid, info.start_ticks, self.titles[pid]) if info else None

    def leader_of(self, pid: int) -> int | None:
        """The nearest ancestor that is not retitled (a DP controller's scheduler passes
        through the controller), or None for an orphan: adopted by init, or by a subreaper,
        which is in another session (children keep their leader's session)."""
        info = self.tree.info(pid)
        if info is None:
            return None
        current = info.ppid
        for _ in range(8):
            parent = self.tree.info(current) if current > 1 else None
            if parent is None:
                return None
            if current not in self.titles:
                return current if parent.sid == info.sid else None
            current = parent.ppid
        return None

    def servers(self) -> list[FoundServer]:
        leaders = {pid: kind for pid, (kind, _) in self.entries.items()}
        children: dict[int, list[FoundProcess]] = {}
        for pid, title in self.titles.items():
            leader = self.leader_of(pid)
            found = self.found(pid)
            if leader is None or found is None:
                continue  # gone, or an orphan: its leader is gone, nothing to list it under
            children.setdefault(leader, []).append(found)
            if is_child_title(title):
                leaders.setdefault(leader, "children")
        # A wrapper (`timeout 600 python -m sglang.launch_server ...`) repeats the leader's
        # command line: keep the innermost match, the process that owns the children.
        wrappers = {
            a.pid for pid in self.entries for a in self.tree.ancestors(pid) if a.pid in self.entries
        }
        result = []
        for pid, how in sorted(leaders.items()):
            info = self.tree.info(pid)
            if info is None or (pid in wrappers and pid not in children):
                continue
            kids = tuple(sorted(children.get(pid, []), key=lambda c: c.title))
            argv = self.entries[pid][1] if pid in self.entries else argv_of(pid)
            result.append(FoundServer(pid, info.start_ticks, info.sid, argv, how, kids))
        return result

    def schedulers_under(self, leaders: Iterable[int]) -> dict[int, list[FoundProcess]]:
        """Each leader's schedulers: retitled `sglang::scheduler*` processes it descends
        from (its children, or with dp > 1 its DP controller's)."""
        wanted = set(leaders)
        result: dict[int, list[FoundProcess]] = {pid: [] for pid in wanted}
        for pid, title in self.titles.items():
            if not is_scheduler_title(title):
                continue
            above = {a.pid for a in self.tree.ancestors(pid)} & wanted
            found = self.found(pid) if above else None
            if found is not None:
                for leader in above:
                    result[leader].append(found)
        return {pid: sorted(found, key=lambda f: f.pid) for pid, found in result.items()}


def scan_servers() -> list[FoundServer]:
    """Every SGLang server leader on the host with its retitled processes. Processes of
    other users are found as far as /proc shows them (their command lines are readable)."""
    return _Scan().servers()


def schedulers_under(leaders: Iterable[int]) -> dict[int, list[FoundProcess]]:
    """The schedulers of each leader pid, in one pass over /proc. They alone are NUMA bound
    and hold the GPUs (sglang 0.5.23 srt/entrypoints/engine.py:956-987,
    srt/utils/numa_utils.py:28-68)."""
    return _Scan().schedulers_under(leaders)


def scheduler_processes(leader: int) -> list[FoundProcess]:
    return schedulers_under([leader])[leader]


@dataclass(frozen=True, slots=True)
class Membership:
    """How to recognise one server's processes: by its environment marker, or by its
    session, which every child keeps, orphans included (sglang 0.5.23 srt/ never calls
    setsid; its children are mp.Process, srt/entrypoints/engine.py:956-987).

    A session id is the leader's pid, and the kernel keeps that number while any process
    of the session lives, even after the leader died: a reused pid that calls setsid,
    forks and exits leaves an unrelated process in a session with our old number. So a
    session member counts only if it started inside the leader's lifetime window and shows
    it is SGLang's or ours: its `sglang::` title (setproctitle wipes the marker of exactly
    those processes unless SPT_NOENV=1), the marker, or being the leader itself."""

    marker: str
    session: int | None = None
    """The leader's pid and session id (None: unknown, or not trustworthy)."""
    started_ticks: int = 0
    """The leader's start time: no member of its session started before it."""
    ended_ticks: int | None = None
    """When the leader's exit was recorded (None: it runs, or the time is unknown)."""

    def in_window(self, info: ProcessInfo) -> bool:
        return self.started_ticks <= info.start_ticks and (
            self.ended_ticks is None or info.start_ticks <= self.ended_ticks
        )


def member_processes(
    marker_name: str, wanted: Mapping[str, Membership]
) -> dict[str, list[ProcessInfo]]:
    """The live processes of each server in `wanted`, in one pass over /proc: those of its
    session that pass its Membership rules, and those whose environment carries
    `marker_name` = its marker."""
    by_session = {m.session: key for key, m in wanted.items() if m.session is not None}
    by_marker = {m.marker: key for key, m in wanted.items()}
    found: dict[str, list[ProcessInfo]] = {key: [] for key in wanted}
    for info in live_processes():
        value = environ_value(info.pid, marker_name)
        key = by_marker.get(value) if value is not None else None
        session_key = by_session.get(info.sid)
        if key is None and session_key is not None:
            member = wanted[session_key]
            if member.in_window(info) and (
                info.pid == member.session or sglang_title(info.pid) is not None
            ):
                key = session_key
        if key is not None:
            found[key].append(info)
    return found


def process_age_s(start_ticks: int) -> float | None:
    """Seconds since a process started, from its start time in clock ticks since boot."""
    uptime = uptime_s()
    if uptime is None:
        return None
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
