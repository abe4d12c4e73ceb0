"""The live state of a managed server, derived from its files, process and readiness probe."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from console.core.redact import redact_text
from console.core.via_host import ddconsole_command
from console.hw.procs import is_running
from console.server.classify import Failure
from console.server.diagnose import log_failure
from console.server.gang import first_to_end
from console.server.milestones import Phase, milestone
from console.server.records import ExitInfo, Records, ServerRecord, SpawnInfo

# How much of a log's beginning is scanned for startup milestones.
HEAD_BYTES = 512 * 1024


class ServerState(StrEnum):
    STARTING = "starting"
    LOADING = "loading"
    WARMING = "warming"
    READY = "ready"
    UNRESPONSIVE = "unresponsive"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (ServerState.STOPPED, ServerState.FAILED)


class Probe(StrEnum):
    """What `/ready` answered."""

    READY = "ready"
    NOT_READY = "not-ready"
    REFUSED = "refused"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class ServerStatus:
    record: ServerRecord
    state: ServerState
    reason: str | None
    failure: Failure | None
    spawn: SpawnInfo | None
    exit: ExitInfo | None
    phase_label: str | None
    probe: Probe
    orphans: tuple[int, ...] = ()
    """Processes of the server still running after its leader ended."""

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def pid(self) -> int | None:
        return self.spawn.pid if self.spawn else None

    @property
    def uptime_s(self) -> float | None:
        if self.spawn is None:
            return None
        end = self.exit.ended_wall if self.exit else time.time()
        return max(0.0, end - self.spawn.spawned_wall)

    def ended_wall(self) -> float | None:
        """Wall-clock time the server ended; None while it runs (or has processes left).
        Its end is the waiter's exit record; without one (the waiter was killed too), the
        stop request, else the log's last write, else the launch. The one rule `ps`,
        `prune` and the TUI's fold all go by (console.server.tidy)."""
        if not self.state.terminal or self.orphans:
            return None
        if self.exit is not None:
            return self.exit.ended_wall
        record = self.record
        if record.stop_requested_wall is not None:
            return record.stop_requested_wall
        try:
            return os.stat(record.log_path).st_mtime
        except OSError:
            return record.launched_wall

    def to_json(self) -> dict[str, Any]:
        plan = self.record.plan
        return {
            "id": self.id,
            "profile": plan.profile,
            "layout": plan.layout,
            "variant": plan.variant,
            "state": self.state.value,
            # Log text, possibly from a failure built before redaction: masked again (cheap).
            "reason": None if self.reason is None else redact_text(self.reason),
            "failure_kind": self.failure.kind if self.failure else None,
            "failure_excerpt": [redact_text(line) for line in self.failure.excerpt]
            if self.failure
            else [],
            "phase": self.phase_label,
            "pid": self.pid,
            "pgid": self.pid,
            "port": plan.port,
            "url": self.record.url,
            "gpus": list(plan.gpus),
            "numa_nodes": list(plan.numa_nodes),
            "log_path": self.record.log_path,
            "launched_wall": self.record.launched_wall,
            "uptime_s": self.uptime_s,
            "ended_wall": self.ended_wall(),
            "exit_code": self.exit.returncode if self.exit else None,
            "probe": self.probe.value,
            "orphans": list(self.orphans),
            "demo": plan.demo,
            # A multi-node server: its node ids (head first), this record's rank and the
            # head's rendezvous address; the head's status is the gang's readiness.
            "gang": list(self.record.gang),
            "node_rank": plan.node_rank if self.record.gang else None,
            "nodes": list(plan.nodes),
            "dist_init_addr": plan.dist_init_addr or None,
        }


def startup_phase(log_path: str) -> tuple[Phase, str | None]:
    """The furthest startup milestone in the log's beginning (or the ready line anywhere)."""
    phase, label = Phase.STARTING, None
    try:
        with open(log_path, "rb") as handle:
            head = handle.read(HEAD_BYTES).decode(errors="replace")
    except OSError:
        return phase, label
    for line in head.splitlines():
        found = milestone(line)
        if found is not None and list(Phase).index(found.phase) >= list(Phase).index(phase):
            phase, label = found.phase, found.label
    return phase, label


def derive(record: ServerRecord, records: Records, probe: Probe) -> ServerStatus:
    spawn = records.spawn(record.id)
    exit_info = records.exit(record.id)
    alive = spawn is not None and exit_info is None and is_running(spawn.pid, spawn.start_ticks)
    stop_requested = record.stop_requested_wall is not None
    caused = (
        record.gang_failure
        or (None if stop_requested else first_to_end(record, records, exit_info))
        if not alive and (spawn is not None or exit_info is not None)
        else None
    )
    if caused:
        stopped_by = Failure("gang", caused)
        return ServerStatus(
            record,
            ServerState.FAILED,
            stopped_by.reason,
            stopped_by,
            spawn,
            exit_info,
            None,
            Probe.SKIPPED,
        )
    if not alive and (spawn is not None or exit_info is not None):
        failure = log_failure(
            record.log_path,
            exit_info.returncode if exit_info else None,
            stop_requested=stop_requested,
        )
        if failure is None:
            return ServerStatus(
                record,
                ServerState.STOPPED,
                record.stop_reason,
                None,
                spawn,
                exit_info,
                None,
                Probe.SKIPPED,
            )
        return ServerStatus(
            record,
            ServerState.FAILED,
            failure.reason,
            failure,
            spawn,
            exit_info,
            None,
            Probe.SKIPPED,
        )
    if spawn is None:
        damaged = records.spawn_problem(record.id)
        if damaged is not None:
            failure = Failure(
                "unknown", f"{damaged}; `{ddconsole_command()} down {record.id}` stops it"
            )
            return ServerStatus(
                record, ServerState.FAILED, failure.reason, failure, None, None, None, Probe.SKIPPED
            )
        # Launched moments ago: the waiter has not reported the pid yet.
        age = time.time() - record.launched_wall
        if age > 30:
            failure = Failure("unknown", "the server process never started (no spawn record)")
            return ServerStatus(
                record, ServerState.FAILED, failure.reason, failure, None, None, None, Probe.SKIPPED
            )
        return ServerStatus(record, ServerState.STARTING, None, None, None, None, None, probe)
    if stop_requested:
        return ServerStatus(
            record, ServerState.STOPPING, record.stop_reason, None, spawn, None, None, probe
        )
    phase, label = (Phase.READY, "ready") if record.ever_ready else startup_phase(record.log_path)
    if probe is Probe.READY or phase is Phase.READY:
        if probe in (Probe.TIMEOUT, Probe.REFUSED):
            return ServerStatus(
                record,
                ServerState.UNRESPONSIVE,
                f"alive but /ready {'timed out' if probe is Probe.TIMEOUT else 'refused'}",
                None,
                spawn,
                None,
                "ready",
                probe,
            )
        reason = "not accepting requests (/ready 503)" if probe is Probe.NOT_READY else None
        return ServerStatus(record, ServerState.READY, reason, None, spawn, None, "ready", probe)
    state = {
        Phase.STARTING: ServerState.STARTING,
        Phase.LOADING: ServerState.LOADING,
        Phase.WARMING: ServerState.WARMING,
    }[phase]
    return ServerStatus(record, state, None, None, spawn, None, label, probe)
