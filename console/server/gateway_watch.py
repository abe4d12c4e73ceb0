"""The watcher of a gateway's replicas: `python -m console.server.gateway_watch ROOT ID`.

Started detached at launch (console.server.gateway), it polls every TICK_S: a replica that
answers `/ready` is registered with the gateway (`POST /workers`), and a registered replica
whose process is gone is removed (`DELETE /workers/{id}`) at once. smg 1.13.0 alone would
keep routing to it until its health check fails `--health-failure-threshold` (3) times at
`--health-check-interval-secs` (60 s) apart, and keeps listing it after that. The watcher
ends when the gateway's process does.
"""

from __future__ import annotations

import contextlib
import sys
import time
from enum import StrEnum
from pathlib import Path

from console.core.errors import StateError
from console.core.paths import StatePaths
from console.hw.procs import is_running
from console.server.gateway import load_group
from console.server.gateway_api import GatewayClient, GatewayError
from console.server.manager import probe_ready
from console.server.records import Records, ServerRecord
from console.server.status import Probe

TICK_S = 0.2
PROBE_TIMEOUT_S = 0.5


class ReplicaState(StrEnum):
    WAITING = "waiting"
    REGISTERED = "registered"
    GONE = "gone"


def _alive(records: Records, server_id: str) -> bool | None:
    """Whether the server's leader runs; None before its waiter has reported it."""
    spawn = records.spawn(server_id)
    if records.exit(server_id) is not None:
        return False
    if spawn is None:
        return None
    return is_running(spawn.pid, spawn.start_ticks)


def _log(record: ServerRecord, text: str) -> None:
    with contextlib.suppress(OSError), open(record.log_path, "ab") as log:
        log.write(f"ddconsole: {text}\n".encode())


class Watcher:
    """One pass of the watch per `step()`; `run()` loops until the gateway ends."""

    def __init__(self, root: Path, gateway_id: str) -> None:
        self.paths = StatePaths(root)
        self.records = Records(self.paths)
        self.gateway_id = gateway_id
        self.states: dict[str, ReplicaState] = {}
        self.leaders: dict[str, int] = {}
        """Each replica's leader pid when last seen: a new one is a relaunch (restart)."""

    def step(self) -> bool:
        """Register ready replicas, remove dead ones; False once the gateway has ended."""
        group = load_group(self.paths, self.gateway_id)
        if group is None:
            return False
        try:
            gateway = self.records.load(self.gateway_id)
        except StateError:
            return False
        gateway_alive = _alive(self.records, self.gateway_id)
        if gateway_alive is False or gateway.stop_requested_wall is not None:
            return False
        client = GatewayClient(gateway.url, timeout=1.0)
        for rid in group.replicas:
            state = self.states.get(rid, ReplicaState.WAITING)
            spawn = self.records.spawn(rid)
            if spawn is not None and self.leaders.setdefault(rid, spawn.pid) != spawn.pid:
                # Relaunched under the same id: registered again once ready.
                self.leaders[rid] = spawn.pid
                state = self.states[rid] = ReplicaState.WAITING
            if state is ReplicaState.GONE:
                continue
            try:
                replica = self.records.load(rid)
            except StateError:
                continue
            alive = _alive(self.records, rid)
            if state is ReplicaState.WAITING:
                if alive is False:
                    self.states[rid] = ReplicaState.GONE
                elif alive and probe_ready(replica.url, PROBE_TIMEOUT_S) is Probe.READY:
                    with contextlib.suppress(GatewayError):
                        client.add(replica.url)
                        self.states[rid] = ReplicaState.REGISTERED
                        _log(gateway, f"registered {rid} ({replica.url}) with the gateway")
            elif alive is False:
                with contextlib.suppress(GatewayError):
                    client.remove(replica.url)
                    self.states[rid] = ReplicaState.GONE
                    _log(gateway, f"{rid} ended: removed {replica.url} from the gateway")
        return True

    def run(self) -> None:
        while self.step():
            time.sleep(TICK_S)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(
            "usage: python -m console.server.gateway_watch STATE_ROOT GATEWAY_ID", file=sys.stderr
        )
        return 2
    Watcher(Path(argv[0]), argv[1]).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
