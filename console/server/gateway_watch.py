"""The watcher of a gateway's replicas: `python -m console.server.gateway_watch ROOT ID`.

Started detached at launch (console.server.gateway), it polls every TICK_S: a replica that
answers `/ready` is registered with the gateway (`POST /workers`), and a registered replica
whose process is gone is removed (`DELETE /workers/{id}`) at once. smg 1.13.0 alone would
keep routing to it until its health check fails `--health-failure-threshold` (3) times at
`--health-check-interval-secs` (60 s) apart, and keeps listing it after that. The watcher
ends when the gateway's process does. A registration counts once `GET /workers` lists the
worker (smg answers 202 and registers in the background); one not listed within CONFIRM_S is
registered again. The watcher's stderr is a file next to the gateway's log
(console.server.gateway.watch_log_path), where an unexpected error of a pass is written before
the next pass is tried.
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
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
CONFIRM_S = 10.0
"""How long a registered worker may stay missing from `GET /workers` before it is re-sent."""
MAX_BACKOFF_S = 5.0


class ReplicaState(StrEnum):
    WAITING = "waiting"
    REGISTERING = "registering"
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
        self.sent: dict[str, float] = {}
        """When each replica in REGISTERING was sent to the gateway (monotonic)."""

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
                        self.states[rid] = ReplicaState.REGISTERING
                        self.sent[rid] = time.monotonic()
            elif state is ReplicaState.REGISTERING and alive is not False:
                with contextlib.suppress(GatewayError):
                    if replica.url in client.worker_urls():
                        self.states[rid] = ReplicaState.REGISTERED
                        _log(gateway, f"registered {rid} ({replica.url}) with the gateway")
                    elif time.monotonic() - self.sent[rid] > CONFIRM_S:
                        self.states[rid] = ReplicaState.WAITING
                        _log(
                            gateway,
                            f"{rid} not listed by the gateway {CONFIRM_S:.0f} s after "
                            "registering; registering it again",
                        )
            elif alive is False:
                with contextlib.suppress(GatewayError):
                    client.remove(replica.url)
                    self.states[rid] = ReplicaState.GONE
                    _log(gateway, f"{rid} ended: removed {replica.url} from the gateway")
        return True

    def run(self) -> None:
        """Pass after pass until the gateway ends; a pass that raises is written to stderr
        and the next one is tried, later each time it fails again."""
        failures = 0
        while True:
            try:
                if not self.step():
                    return
                failures = 0
            except Exception:
                failures += 1
                print(
                    f"{time.strftime('%Y-%m-%dT%H:%M:%S')} gateway watch {self.gateway_id}: "
                    f"pass failed ({failures} in a row)",
                    file=sys.stderr,
                )
                traceback.print_exc(file=sys.stderr)
                sys.stderr.flush()
            time.sleep(min(MAX_BACKOFF_S, TICK_S * 2**failures))


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
