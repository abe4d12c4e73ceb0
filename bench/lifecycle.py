"""How late the console notices a server becoming ready or crashing, and what watching costs.

Servers are demo-mode simulator processes launched through the real ServerManager.

- ready: `ServerManager.wait()` follows the launch; a separate thread polls `/ready` every
  2 ms to find the moment the server really became ready. Lateness = wait() return - that.
- crash: the server's leader is SIGKILLed at a known instant; a ServerWatcher polling at the
  TUI's cadence (0.25 s) reports `failed`. Lateness = report - kill.
- cost: CPU time of the watcher loop (one poll per 0.25 s, a readiness probe every 4th)
  watching N idle servers for 20 s.

    python bench/lifecycle.py
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import update_results

if TYPE_CHECKING:
    from console.topology.placement import Plan


def main() -> None:
    workdir = tempfile.mkdtemp(prefix="ddconsole-bench-")
    os.environ["XDG_STATE_HOME"] = workdir
    os.environ["XDG_CONFIG_HOME"] = workdir
    os.environ["DDCONSOLE_SIM_SPEED"] = "4"
    from console.cli.services import Services
    from console.core.net import free_port
    from console.profiles.command import build_command
    from console.server.watch import ServerWatcher
    from console.topology.placement import resolve

    services = Services.create(demo=True)
    manager = services.manager()
    qwen = services.catalog.get("qwen3.6-27b")

    def plan(gpu: int) -> Plan:
        command = build_command(qwen, "tp1", "off", port=free_port(), demo=True, gpus=(gpu,))
        return resolve(command, services.topology(), port_checker=None)

    ready_late: list[float] = []
    for gpu in range(5):
        p = plan(gpu)
        true_ready: list[float] = []

        def spy(
            url: str = f"http://127.0.0.1:{p.port}", true_ready: list[float] = true_ready
        ) -> None:
            with httpx.Client(timeout=0.5) as client:
                while not true_ready:
                    try:
                        if client.get(f"{url}/ready").status_code == 200:
                            true_ready.append(time.monotonic())
                    except httpx.HTTPError:
                        pass
                    time.sleep(0.002)

        thread = threading.Thread(target=spy, daemon=True)
        record = manager.launch(p)
        thread.start()
        status = manager.wait(record.id, timeout=60)
        noticed = time.monotonic()
        thread.join(timeout=5)
        assert status.state.value == "ready", status
        ready_late.append(noticed - true_ready[0])
    print("ready noticed late by:", [f"{x * 1000:.0f} ms" for x in ready_late])

    watcher = ServerWatcher(manager, probe_every=4)
    watcher.poll()
    crash_late: list[float] = []
    for status in list(watcher.current):
        if status.state.value != "ready" or status.pid is None:
            continue
        os.kill(status.pid, signal.SIGKILL)
        killed = time.monotonic()
        while True:
            changes = watcher.poll()
            if any(c.server_id == status.id and c.after == "failed" for c in changes):
                crash_late.append(time.monotonic() - killed)
                break
            time.sleep(0.25)
    print("crash noticed late by:", [f"{x * 1000:.0f} ms" for x in crash_late])
    for status in watcher.current:
        manager.forget(status.id)

    costs: list[tuple[int, float]] = []
    launched: list[str] = []
    for count in (1, 4, 8):
        while len(launched) < count:
            record = manager.launch(plan(len(launched)))
            manager.wait(record.id, timeout=60)
            launched.append(record.id)
        watcher = ServerWatcher(manager, probe_every=4)
        watcher.poll()
        cpu0, wall0 = time.process_time(), time.monotonic()
        next_poll = wall0
        while time.monotonic() - wall0 < 20:
            watcher.poll()
            next_poll += 0.25
            time.sleep(max(0.0, next_poll - time.monotonic()))
        share = (time.process_time() - cpu0) / (time.monotonic() - wall0)
        costs.append((count, share))
        print(f"watching {count} servers: {share * 100:.2f}% of one core")
    for server_id in launched:
        manager.stop(server_id, grace=5)

    body = "\n".join(
        [
            "`python bench/lifecycle.py` (demo servers, simulator at --sim-speed 4):",
            "",
            "| measurement | values | budget |",
            "| --- | --- | --- |",
            "| ready noticed after the server is ready (`up` / `wait`) | "
            + ", ".join(f"{x * 1000:.0f} ms" for x in ready_late)
            + f" (max {max(ready_late) * 1000:.0f} ms) | <= 500 ms |",
            "| crash noticed after SIGKILL (watcher at 0.25 s) | "
            + ", ".join(f"{x * 1000:.0f} ms" for x in crash_late)
            + f" (max {max(crash_late) * 1000:.0f} ms) | <= 1000 ms |",
        ]
        + [
            f"| CPU of watching {count} server(s), 4 polls/s + 1 probe/s each | "
            f"{share * 100:.2f}% of one core | - |"
            for count, share in costs
        ]
    )
    update_results("Server lifecycle (issue 4)", body)


if __name__ == "__main__":
    main()
