"""SGLang servers on this host, found by their processes (one pass over /proc).

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
from dataclasses import dataclass

from console.hw.procs import PROC, SGLANG_TITLE_PREFIX, ProcessInfo, process_info

SCHEDULER_TITLE = "sglang::scheduler"
"""`sglang::scheduler` (tp=1), `sglang::scheduler_TP{n}`, `sglang::scheduler_DP{d}_TP{t}`
(sglang 0.5.23 srt/managers/scheduler.py:6279-6294)."""
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
        return tuple(c.pid for c in self.children if c.title.startswith(SCHEDULER_TITLE))

    @property
    def pids(self) -> tuple[int, ...]:
        return (self.pid, *(c.pid for c in self.children))


def _argv_of(raw: bytes) -> tuple[str, ...]:
    return tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)


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


def is_child_title(text: str) -> bool:
    return text.startswith(CHILD_TITLES)


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


def scan_servers() -> list[FoundServer]:
    """Every SGLang server leader on the host with its retitled processes. Processes of
    other users are found as far as /proc shows them (their command lines are readable)."""
    tree = _Tree()
    titles: dict[int, str] = {}
    by_entry: dict[int, str] = {}
    argvs: dict[int, tuple[str, ...]] = {}
    for pid, raw in _sglang_cmdlines().items():
        argv = _argv_of(raw)
        if raw.startswith(SGLANG_TITLE_PREFIX.encode()):
            # setproctitle rewrote the argv area: the title is the whole command line.
            titles[pid] = " ".join(argv)
            continue
        kind = entry_kind(argv)
        if kind is not None:
            by_entry[pid] = kind
            argvs[pid] = argv
    leaders: dict[int, str] = dict(by_entry)
    children: dict[int, list[FoundProcess]] = {}
    for pid, title in titles.items():
        info = tree.info(pid)
        leader = _leader_of(info, tree, titles) if info is not None else None
        if info is None or leader is None:
            continue  # gone, or an orphan: its leader is gone, nothing to list it under
        children.setdefault(leader, []).append(FoundProcess(pid, info.start_ticks, title))
        if is_child_title(title):
            leaders.setdefault(leader, "children")
    # A wrapper (`timeout 600 python -m sglang.launch_server ...`) repeats the leader's
    # command line: keep the innermost match, the process that owns the children.
    wrappers = {a.pid for pid in by_entry for a in tree.ancestors(pid) if a.pid in by_entry}
    found = []
    for pid, how in sorted(leaders.items()):
        info = tree.info(pid)
        if info is None or (pid in wrappers and pid not in children):
            continue
        kids = tuple(sorted(children.get(pid, []), key=lambda c: c.title))
        argv = argvs.get(pid) or _argv_of(_read_cmdline(pid))
        found.append(FoundServer(pid, info.start_ticks, info.sid, argv, how, kids))
    return found


def _read_cmdline(pid: int) -> bytes:
    try:
        with open(f"{PROC}/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _leader_of(info: ProcessInfo, tree: _Tree, titles: dict[int, str]) -> int | None:
    """The nearest ancestor that is not retitled (a DP controller's scheduler passes through
    the controller), or None for an orphan: adopted by init, or by a subreaper, which is in
    another session (children keep their leader's session)."""
    current = info.ppid
    for _ in range(8):
        parent = tree.info(current) if current > 1 else None
        if parent is None:
            return None
        if current not in titles:
            return current if parent.sid == info.sid else None
        current = parent.ppid
    return None


def affinity_cpus(pids: tuple[int, ...]) -> set[int] | None:
    """The union of these processes' CPU affinity, None when none could be read."""
    cpus: set[int] = set()
    read = False
    for pid in pids:
        try:
            cpus |= os.sched_getaffinity(pid)
            read = True
        except OSError:
            continue
    return cpus if read else None


def process_age_s(start_ticks: int) -> float | None:
    """Seconds since a process started, from its start time in clock ticks since boot."""
    try:
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
