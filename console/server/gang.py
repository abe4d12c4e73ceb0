"""A multi-node server's nodes stand or fall together.

Every node of a gang is a managed server of its own (record, waiter, log); the head's id
names the gang and the nodes are `HEAD.node1`, `HEAD.node2`, ... When a node's leader ends
without a stop request, its waiter starts `python -m console.server.gang STATE_ROOT ID`,
which stops every other node and records why on each (`node 1 exited 137 (SIGKILL)`), as
SGLang's own nodes would fail on their next collective, only sooner and cleanly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from console.core.errors import StateError
from console.core.paths import StatePaths
from console.hw.backend import GpuProcess, GpuReading, GpuStatic, GpuUnavailable
from console.server.records import ExitInfo, Records, ServerRecord

if TYPE_CHECKING:
    from console.server.manager import ServerManager

GANG_MODULE = "console.server.gang"
NODE_STOP_GRACE_S = 5.0
"""A non-head node only logs SIGTERM (rank 0's ShutdownReq stops it: sglang 0.5.23
srt/entrypoints/engine.py:1262-1273); once its head is gone nothing else will."""


def node_id(head_id: str, rank: int) -> str:
    return head_id if rank == 0 else f"{head_id}.node{rank}"


def exit_text(info: ExitInfo | None) -> str:
    """`137 (SIGKILL)` for a signal (the shell's 128+N), else the status."""
    if info is None:
        return "without an exit status"
    number = info.signal_number
    if number is None:
        return f"with status {info.returncode}"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    return f"{128 + number} ({name})"


def failure_reason(rank: int, info: ExitInfo | None) -> str:
    who = "node 0 (the head)" if rank == 0 else f"node {rank}"
    return f"{who} exited {exit_text(info)}; the gang was stopped"


def first_to_end(record: ServerRecord, records: Records, ended: ExitInfo | None) -> str | None:
    """Why a gang's node failed when another node ended on its own before it (the one that
    ended first is the cause: the others fail after it, on their own or stopped), else None.
    Read from the nodes' files, so the answer does not depend on who recorded it first."""
    if not record.gang:
        return None
    first: tuple[float, int, ExitInfo] | None = None
    for rank, peer in enumerate(record.gang):
        if peer == record.id:
            continue
        peer_exit = records.exit(peer)
        if peer_exit is None or (ended is not None and peer_exit.ended_wall > ended.ended_wall):
            continue
        try:
            peer_record = records.load(peer)
        except StateError:
            continue
        if peer_record.stop_requested_wall is not None and peer_record.gang_failure is None:
            continue
        if peer_record.gang_failure is not None:
            continue
        if first is None or peer_exit.ended_wall < first[0]:
            first = (peer_exit.ended_wall, rank, peer_exit)
    return None if first is None else failure_reason(first[1], first[2])


def start_watch(servers_dir: Path, server_id: str, marker_env: str) -> None:
    """From the waiter, once its node ended: hand the rest of the gang to a detached
    process (the waiter stays light and keeps copying the log). It carries no server marker,
    so it is no member of the server it stops."""
    env = {k: v for k, v in os.environ.items() if k != marker_env}
    subprocess.Popen(
        [sys.executable, "-m", GANG_MODULE, str(servers_dir.parent), server_id],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


class _NoGpus:
    """The GPU backend of the gang stopper: it does not wait for GPU memory to be freed."""

    kind = "none"

    def open(self) -> None:
        raise GpuUnavailable("not checked by the gang stopper")

    def device_count(self) -> int:
        return 0

    def static_info(self, index: int) -> GpuStatic:
        raise GpuUnavailable("none")

    def read(self, index: int, *, sample_pcie_throughput: bool = False) -> GpuReading:
        raise GpuUnavailable("none")

    def compute_processes(self, index: int) -> tuple[GpuProcess, ...]:
        return ()

    def driver_version(self) -> str | None:
        return None

    def close(self) -> None:
        return None


def stop_peers(root: Path, server_id: str) -> list[str]:
    """Stop the other nodes of `server_id`'s gang after it ended on its own; the ids
    stopped. Nothing happens when the node was stopped on request (a `down` stops them all)."""
    from console.server.manager import ServerManager

    records = Records(StatePaths(root))
    try:
        record = records.load(server_id)
    except StateError:
        return []
    if not record.gang or record.stop_requested_wall is not None:
        return []
    rank = record.gang.index(server_id) if server_id in record.gang else 0
    ended = records.exit(server_id)
    reason = failure_reason(rank, ended)
    manager = ServerManager(StatePaths(root), _NoGpus(), demo=record.plan.demo)
    stopped = []
    for peer in record.gang:
        if peer == server_id:
            continue
        try:
            other = records.load(peer)
        except StateError:
            continue
        if other.stop_requested_wall is not None or other.gang_failure is not None:
            continue
        peer_ended = records.exit(peer)
        if peer_ended is not None:
            # It ended on its own too: this node's end is its cause only if it came first.
            if ended is None or peer_ended.ended_wall < ended.ended_wall:
                continue
            other.gang_failure = reason
            _save(records, other)
            continue
        other.gang_failure = reason
        _save(records, other)
        manager.stop(peer, grace=NODE_STOP_GRACE_S, reason=reason, gang=False)
        stopped.append(peer)
    manager.close()
    return stopped


def stop_for_gang(manager: ServerManager, server_id: str, reason: str, grace: float) -> str:
    """Stop this host's node of a gang whose cause of failure was seen elsewhere (another
    host's node ended: console.fleet.gang_watch), recording `reason` as its gang failure;
    a node that ended already only gets the reason. What was done, in a word."""
    records = manager.records
    record = records.load(server_id)
    if record.gang_failure is not None or record.stop_requested_wall is not None:
        return "already stopped"
    record.gang_failure = reason
    _save(records, record)
    if records.exit(server_id) is not None:
        return "reason recorded"
    manager.stop(server_id, grace=grace, reason=reason, gang=False)
    return "stopped"


def _save(records: Records, record: ServerRecord) -> None:
    try:
        records.save(record)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m console.server.gang STATE_ROOT SERVER_ID", file=sys.stderr)
        return 2
    stop_peers(Path(argv[0]), argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
