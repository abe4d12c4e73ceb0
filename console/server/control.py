"""Server lifecycle as a benchmark campaign drives it: launch a cell's plan, stop it after."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from os import getpid

from console.core.errors import (
    ConsoleError,
    ServerStartFailed,
    ServerStoppedByUser,
    StartCancelled,
)
from console.core.units import format_index_set
from console.profiles.command import build_command
from console.profiles.loader import LoadedProfile, ProfileCatalog
from console.server import actions
from console.server.actions import auth_headers, launch_interpreter
from console.server.manager import ServerManager
from console.server.status import ServerState
from console.topology.model import Topology
from console.topology.placement import Plan, resolve


@dataclass(frozen=True)
class LaunchedServer:
    server_id: str | None
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    gpus: tuple[int, ...] = ()
    plan: Plan | None = None


class ManagedControl:
    """Starts each cell's server through the manager (preflight, detach, classify)."""

    def __init__(
        self,
        manager: ServerManager,
        catalog: ProfileCatalog,
        topology: Topology,
        *,
        demo: bool,
        port: int | None = None,
        gpus: tuple[int, ...] | None = None,
        ready_timeout_s: float = 1800.0,
        stop_grace_s: float = 30.0,
    ) -> None:
        self.manager = manager
        self.catalog = catalog
        self.topology = topology
        self.demo = demo
        self.port = port
        self.gpus = gpus
        self.ready_timeout_s = ready_timeout_s
        self.stop_grace_s = stop_grace_s

    def start(
        self,
        profile: str,
        layout: str,
        variant: str,
        on_event: Callable[[str], None],
        cancelled: Callable[[], bool] | None = None,
    ) -> LaunchedServer:
        """Launch the cell's server and wait until it is ready.

        `cancelled` is polled while the server loads (the campaign's stop): once it is
        True the server just launched is stopped and StartCancelled is raised, so a stop
        does not wait for a model that takes minutes to load."""
        try:
            loaded = self.catalog.get(profile)
            command = build_command(
                loaded, layout, variant, port=self.port, demo=self.demo, gpus=self.gpus
            )
            plan = resolve(command, self.topology)
            plan, moves = self._beside_others(loaded, layout, variant, plan)
            for move in moves:
                on_event(f"  {move}")
            record = self.manager.launch(plan, interpreter=launch_interpreter(plan))
        except ConsoleError as exc:
            raise ServerStartFailed(exc.message) from None
        spawn = self.manager.records.spawn(record.id)
        on_event(f"  {record.id}: pid {spawn.pid if spawn else '?'}, port {plan.port}")
        status = self.manager.wait(
            record.id,
            timeout=self.ready_timeout_s,
            on_event=lambda elapsed, label: on_event(f"  {record.id} {elapsed:6.1f}s {label}"),
            cancelled=cancelled,
        )
        loading = status.state is not ServerState.READY and not status.state.terminal
        stopping = loading and cancelled is not None and cancelled()
        # An outside stop (`down`, the TUI) is checked first: that server is its stopper's,
        # also when the campaign's stop cut the wait short while it was shutting down.
        if (status.state is ServerState.STOPPED or stopping) and self.stopped_elsewhere(record.id):
            raise ServerStoppedByUser(f"{record.id}: {status.reason or 'stopped by the user'}")
        if stopping:
            # The campaign is stopping: the server it just launched goes with it, with the
            # reason a campaign's stop records for the servers it launched. (A server that
            # died meanwhile keeps its own failure, below.)
            for line in self.stop(record.id, reason="campaign stopped"):
                on_event(f"  {record.id}: {line}")
            raise StartCancelled(f"{record.id}: stopped while loading (campaign stopped)")
        if status.state is not ServerState.READY:
            reason = status.reason or f"not ready after {self.ready_timeout_s:.0f} s"
            if not status.state.terminal:
                self.manager.stop(record.id, grace=self.stop_grace_s, reason="not ready in time")
            raise ServerStartFailed(f"{record.id}: {reason}")
        return LaunchedServer(record.id, record.url, auth_headers(plan), plan.gpus, plan)

    def _beside_others(
        self, loaded: LoadedProfile, layout: str, variant: str, plan: Plan
    ) -> tuple[Plan, list[str]]:
        """The cell's plan moved off what other servers hold, as `ddconsole up` does: the
        next free port unless the campaign set one; in demo mode (a simulated host) also
        free GPUs of the same count unless the campaign set them. Says each move."""
        moves: list[str] = []
        port, gpus = None, None
        held_port = None if self.port is not None else actions.port_held(self.manager, plan)
        if held_port is not None:
            port = actions.free_port_for(self.manager, plan)
            if port is not None:
                moves.append(f"{held_port}; using port {port}")
        if self.demo and self.gpus is None:
            statuses, _ = self.manager.statuses(probe=False, orphan_scan=False)
            holders = {
                g: s.id for s in statuses if not s.state.terminal for g in s.record.plan.gpus
            }
            if set(plan.gpus) & set(holders):
                free = [g.index for g in self.topology.gpus if g.index not in holders]
                if len(free) >= len(plan.gpus):
                    gpus = tuple(free[: len(plan.gpus)])
                    by = ", ".join(sorted({holders[g] for g in plan.gpus if g in holders}))
                    moves.append(
                        f"GPUs {format_index_set(plan.gpus)} are held by {by}; using GPUs "
                        f"{format_index_set(gpus)}"
                    )
        if port is None and gpus is None:
            return plan, moves
        command = build_command(
            loaded,
            layout,
            variant,
            port=port if port is not None else plan.port,
            demo=self.demo,
            gpus=gpus if gpus is not None else tuple(plan.gpus),
        )
        return resolve(command, self.topology), moves

    def failure(self, server_id: str) -> str | None:
        status = self.manager.status(server_id, probe=False)
        return status.reason if status.state is ServerState.FAILED else None

    def stopped_elsewhere(self, server_id: str) -> bool:
        """Whether another process asked this server to stop (`down`, the TUI): its record
        holds a stop request this process did not make."""
        try:
            record = self.manager.records.load(server_id)
        except ConsoleError:
            return False
        return record.stop_requested_wall is not None and record.stop_requested_by_pid != getpid()

    def stop(self, server_id: str, reason: str = "campaign cell done") -> list[str]:
        """Stop the cell's server (a full or read-only state dir does not prevent it);
        returns the warnings of the stop."""
        status = self.manager.status(server_id, probe=False)
        if status.state.terminal:
            return []
        report = self.manager.stop(server_id, grace=self.stop_grace_s, reason=reason)
        return report.notes + report.warnings
