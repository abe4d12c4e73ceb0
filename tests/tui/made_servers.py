"""Managed servers written straight into the state dir (records, spawn and exit files), for
tests that need a running and an ended server without launching the simulator: the
running one is a `sleep` in its own session, the ended one names a process that is gone."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from console.cli.services import Services
from console.core.jsonio import atomic_write_json
from console.core.net import free_port
from console.hw.procs import process_info
from console.profiles.command import build_command
from console.server.records import ServerRecord
from console.topology.placement import Plan, resolve


def demo_plan(services: Services, gpus: tuple[int, ...]) -> Plan:
    command = build_command(
        services.catalog.get("qwen3.6-27b"), "tp1", "off", port=free_port(), demo=True, gpus=gpus
    )
    return resolve(command, services.topology(), port_checker=None, numactl_present=False)


def write_server(
    services: Services,
    server_id: str,
    gpus: tuple[int, ...],
    *,
    launched_wall: float,
    pid: int,
    start_ticks: int,
    ended_wall: float | None = None,
    stop_requested_wall: float | None = None,
    ever_ready: bool = False,
) -> None:
    """A record, its spawn file and (when `ended_wall` is given) its exit file."""
    records = services.manager().records
    log = services.state.logs / f"{server_id}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("The server is fired up and ready to roll!\n" if ever_ready else "")
    record = ServerRecord(
        id=server_id,
        plan=demo_plan(services, gpus),
        log_path=str(log),
        launched_wall=launched_wall,
        launched_by_pid=pid,
        stop_requested_wall=stop_requested_wall,
        stop_reason="stopped by test" if stop_requested_wall is not None else None,
        ever_ready=ever_ready,
    )
    records.save(record)
    atomic_write_json(
        records.spawn_path(server_id),
        {"pid": pid, "start_ticks": start_ticks, "waiter_pid": pid, "spawned_wall": launched_wall},
    )
    if ended_wall is not None:
        atomic_write_json(records.exit_path(server_id), {"returncode": 0, "ended_wall": ended_wall})


def gone_pid() -> tuple[int, int]:
    """(pid, start ticks) of a process that has exited and been reaped."""
    done = subprocess.Popen(["true"], start_new_session=True)
    info = process_info(done.pid)
    done.wait()
    return done.pid, info.start_ticks if info is not None else 1


@contextmanager
def running_and_ended(services: Services) -> Iterator[tuple[str, str]]:
    """(running id, ended id): a `sleep` that counts as a running server on GPU 0, and a
    server on GPU 5 that ended a minute ago (recent: not folded away)."""
    sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        info = process_info(sleeper.pid)
        assert info is not None
        now = time.time()
        write_server(
            services,
            "qwen3.6-27b-tp1-1",
            (0,),
            launched_wall=now - 120,
            pid=sleeper.pid,
            start_ticks=info.start_ticks,
            ever_ready=True,
        )
        pid, ticks = gone_pid()
        write_server(
            services,
            "qwen3.6-27b-tp1-2",
            (5,),
            launched_wall=now - 300,
            pid=pid,
            start_ticks=ticks,
            ended_wall=now - 60,
            stop_requested_wall=now - 61,
        )
        yield "qwen3.6-27b-tp1-1", "qwen3.6-27b-tp1-2"
    finally:
        sleeper.kill()
        sleeper.wait()
