"""The console's launch picks the next free port when the profile's is held, as `ddconsole
up` does (issue 18): a port bound by anything on the host, not only by a managed server."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from console.cli.services import Services
from console.topology.placement import Plan
from tests.conftest import run_cli_subprocess, shipped_profile_on_port


def test_a_launch_plan_moves_off_a_port_something_else_holds(user_profiles: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        held = holder.getsockname()[1]
        (user_profiles / "qwen3.6-27b.toml").write_text(
            shipped_profile_on_port("qwen3.6-27b", held)
        )
        backend = Services.create(demo=True).live_backend(recordings=None)
        plan = backend.plan("qwen3.6-27b", "tp1", "off")
        assert plan.port != held
        assert plan.port > held
        assert f"--port {plan.port}" in " ".join(plan.argv)
        # It says so, as `up` does: the preview and the activity pane show plan warnings.
        (moved,) = [w for w in plan.warnings if w.code == "port-moved"]
        assert moved.message.startswith(f"port {held} on 127.0.0.1 is in use")
        assert moved.message.endswith(f"; using port {plan.port}")
    # Once the port is free again, the profile's own port is planned.
    backend = Services.create(demo=True).live_backend(recordings=None)
    again = backend.plan("qwen3.6-27b", "tp1", "off")
    assert again.port == held
    assert not [w for w in again.warnings if w.code == "port-moved"]


async def plan_beside(holder: str) -> Plan:
    """The console's plan for the profile once its watcher sees `holder` running."""
    backend = Services.create(demo=True).live_backend(recordings=None)
    await backend.start()
    try:
        for _ in range(200):
            if any(s.id == holder for s in backend.servers()):
                break
            await asyncio.sleep(0.1)
        return backend.plan("qwen3.6-27b", "tp1", "off")
    finally:
        await backend.stop()


def test_a_demo_launch_plan_says_which_gpus_it_moved_off(
    free_port_profiles: dict[str, int],
) -> None:
    up = run_cli_subprocess("up", "qwen3.6-27b", "--layout", "tp1", "--json", "--demo", timeout=90)
    assert up.returncode == 0, up.stderr
    holder = json.loads(up.stdout)["id"]
    try:
        plan = asyncio.run(plan_beside(holder))
        assert 0 not in plan.gpus
        (moved,) = [w for w in plan.warnings if w.code == "gpus-moved"]
        assert moved.message == f"GPUs 0 are held by {holder}; using GPUs {plan.gpus[0]}"
        (port,) = [w for w in plan.warnings if w.code == "port-moved"]
        assert f"promised to managed server {holder}" in port.message
    finally:
        run_cli_subprocess("down", "--all", "--grace", "2", "--demo")
