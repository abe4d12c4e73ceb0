"""The simulator's process tree, shaped like SGLang 0.5.23's.

The leader (this process: HTTP server and tokenizer) is never retitled and never NUMA bound.
It starts one scheduler per rank, then a detokenizer; with dp > 1 a data-parallel controller
starts the schedulers instead (sglang 0.5.23 srt/entrypoints/engine.py:909-987 and 1326,
srt/managers/data_parallel_controller.py:420-453, 740-790). Every child retitles itself with
the real `setproctitle` library, asks for SIGKILL when its parent dies, and inherits the
environment (spawn start method, engine.py:1995). A child is a tiny `python -m
console.sim.proctree ROLE ...` process, so a small test box can run many simulated servers.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from console.hw.procs import process_info, send_signal
from console.sim.ranklog import Widths, rank_prefix

SCHEDULER = "scheduler"
DETOKENIZER = "detokenizer"
CONTROLLER = "controller"
DETOKENIZER_TITLE = "sglang::detokenizer"  # sglang 0.5.23 srt/managers/detokenizer_manager.py:551
CONTROLLER_TITLE = (
    "sglang::data_parallel_controller"  # sglang 0.5.23 srt/managers/data_parallel_controller.py:955
)
PR_SET_PDEATHSIG = 1
CONTROLLER_REPORT_S = 20.0
"""How long the leader waits for a DP controller to name the schedulers it started."""


def scheduler_title(
    tp_size: int,
    dp_rank: int | None,
    tp_rank: int,
    *,
    pp_rank: int = 0,
    widths: Widths | None = None,
) -> str:
    """`sglang::scheduler` plus the scheduler's log prefix with `_` for spaces:
    `sglang::scheduler_TP{t}`, `sglang::scheduler_DP{d}_TP{t}`, `..._PP{p}_TP{t}`, ...
    (sglang 0.5.23 srt/managers/scheduler.py:6279-6294). The DP rank is None at dp=1: the
    engine passes None when it starts the schedulers itself (engine.py:944-952)."""
    prefix = rank_prefix(dp_rank, tp_size, tp_rank, pp_rank=pp_rank, widths=widths)
    return "sglang::scheduler" + prefix.replace(" ", "_")


@dataclass(frozen=True, slots=True)
class Rank:
    """One scheduler: its ranks, the physical GPU it drives, the NUMA node it is bound to."""

    dp_rank: int | None
    tp_rank: int
    tp_size: int
    gpu: int
    numa_node: int | None
    """None: not bound (it may run on every CPU)."""
    pp_rank: int = 0
    widths: Widths = field(default_factory=Widths)

    @property
    def title(self) -> str:
        return scheduler_title(
            self.tp_size, self.dp_rank, self.tp_rank, pp_rank=self.pp_rank, widths=self.widths
        )


def plan_ranks(
    *,
    tp: int,
    dp: int,
    gpus: Sequence[int],
    numa_node: Sequence[int] | None,
    auto_bind: bool,
    gpus_per_node: int,
    node_count: int,
    misbind: bool = False,
    widths: Widths | None = None,
) -> list[Rank]:
    """The schedulers SGLang would start, in launch order.

    Local GPU id of DP rank d, PP rank p, TP rank t: d*tp*pp + p*tp + t
    (data_parallel_controller.py:445-449, 747-752; engine.py:931-937 at dp=1).
    NUMA bind v2 (the default, srt/environ.py:1721-1722) binds each scheduler to
    `--numa-node[local gpu id]`, else, with SGLANG_AUTO_NUMA_BIND on, to its GPU's node
    (srt/utils/numa_utils.py:130-155). `misbind` (a test fault) binds each scheduler to the
    next node instead, as a wrong `--numa-node` would.
    """
    w = widths or Widths()
    pp = max(1, w.pp)
    ranks = []
    for dp_rank in range(dp):
        for pp_rank in range(pp):
            for tp_rank in range(tp):
                local = dp_rank * tp * pp + pp_rank * tp + tp_rank
                gpu = gpus[local] if local < len(gpus) else local
                node: int | None
                if numa_node:
                    # Out of range: SGLang would raise; the simulator leaves the rank unbound.
                    node = numa_node[local] if local < len(numa_node) else None
                elif auto_bind:
                    node = gpu // max(1, gpus_per_node)
                else:
                    node = None
                if misbind:
                    home = node if node is not None else gpu // max(1, gpus_per_node)
                    node = (home + 1) % max(1, node_count)
                ranks.append(Rank(dp_rank if dp > 1 else None, tp_rank, tp, gpu, node, pp_rank, w))
    return ranks


@dataclass(frozen=True, slots=True)
class Child:
    pid: int
    start_ticks: int | None
    title: str
    rank: Rank | None = None


def _child_argv(role: str, title: str, parent: int, orphan: bool, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "console.sim.proctree",
        role,
        title,
        str(parent),
        "orphan" if orphan else "child",
        *extra,
    ]


def _spawn(argv: list[str], *, stdout: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.DEVNULL, close_fds=True
    )


def _ticks(pid: int) -> int | None:
    info = process_info(pid)
    return info.start_ticks if info else None


class ProcessTree:
    """The leader's children: started once, killed together."""

    def __init__(
        self, ranks: Sequence[Rank], *, dp: int, orphans: bool, detokenizer: bool = True
    ) -> None:
        self.ranks = list(ranks)
        self.detokenizer = detokenizer
        """False on a non-head node: SGLang starts no detokenizer there (sglang 0.5.23
        srt/entrypoints/engine.py:1234-1295 returns before _launch_detokenizer_subprocesses)."""
        self.dp = dp
        self.orphans = orphans
        """The `orphans` fault: no PDEATHSIG, so children outlive a killed leader."""
        self.schedulers: list[Child] = []
        self.helpers: list[Child] = []
        """Detokenizer and DP controller: processes that hold no GPU."""
        self._popen: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        me = os.getpid()
        if self.dp > 1:
            controller = _spawn(
                _child_argv(
                    CONTROLLER,
                    CONTROLLER_TITLE,
                    me,
                    self.orphans,
                    *(rank.title for rank in self.ranks),
                ),
                stdout=subprocess.PIPE,
            )
            self._popen.append(controller)
            self.helpers.append(Child(controller.pid, _ticks(controller.pid), CONTROLLER_TITLE))
            pids = _read_report(controller)
            for rank, pid in zip(self.ranks, pids, strict=False):
                self.schedulers.append(Child(pid, _ticks(pid), rank.title, rank))
        else:
            for rank in self.ranks:
                proc = _spawn(_child_argv(SCHEDULER, rank.title, me, self.orphans))
                self._popen.append(proc)
                self.schedulers.append(Child(proc.pid, _ticks(proc.pid), rank.title, rank))
        if not self.detokenizer:
            return
        detokenizer = _spawn(_child_argv(DETOKENIZER, DETOKENIZER_TITLE, me, self.orphans))
        self._popen.append(detokenizer)
        self.helpers.append(Child(detokenizer.pid, _ticks(detokenizer.pid), DETOKENIZER_TITLE))

    def kill(self) -> None:
        """SIGKILL every child (schedulers first), then reap the leader's own."""
        own = {proc.pid for proc in self._popen}
        for child in [*self.schedulers, *self.helpers]:
            # A DP controller's scheduler whose start time was never read may already be
            # gone and its pid reused; the leader's own children stay ours until reaped.
            if child.start_ticks is not None or child.pid in own:
                send_signal(child.pid, signal.SIGKILL, child.start_ticks)
        for proc in self._popen:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            if proc.stdout is not None:
                proc.stdout.close()
        self._popen.clear()
        self.schedulers.clear()
        self.helpers.clear()


def _read_report(controller: subprocess.Popen[bytes]) -> list[int]:
    """The scheduler pids a DP controller started (one JSON line on its stdout)."""
    assert controller.stdout is not None
    ready, _, _ = select.select([controller.stdout], [], [], CONTROLLER_REPORT_S)
    if not ready:
        return []
    try:
        pids = json.loads(controller.stdout.readline() or b"[]")
    except ValueError:
        return []
    return [int(pid) for pid in pids if isinstance(pid, int)]


# -- the child side ------------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """PR_SET_PDEATHSIG=SIGKILL, like SGLang's kill_itself_when_parent_died
    (sglang 0.5.23 srt/utils/common.py:3432-3437); exits if the parent is already gone."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)


def child_main(argv: Sequence[str]) -> None:
    """`python -m console.sim.proctree ROLE TITLE PARENT_PID child|orphan [TITLES...]`."""
    import setproctitle

    role, title, parent, mode = argv[0], argv[1], int(argv[2]), argv[3]
    bound = mode != "orphan"
    if role == CONTROLLER:
        # The controller titles itself first, then sets PDEATHSIG
        # (data_parallel_controller.py:955-957); schedulers and the detokenizer the other way
        # round (scheduler.py:6269, 6294; detokenizer_manager.py:550-551).
        setproctitle.setproctitle(title)
        if bound:
            _die_with_parent(parent)
        me = os.getpid()
        procs = [_spawn(_child_argv(SCHEDULER, t, me, not bound)) for t in argv[4:]]
        sys.stdout.write(json.dumps([p.pid for p in procs]) + "\n")
        sys.stdout.flush()
        os.close(1)
        # Its schedulers are never waited for: let the kernel reap them.
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    else:
        if bound:
            _die_with_parent(parent)
        setproctitle.setproctitle(title)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    child_main(sys.argv[1:])
