"""The console's launch picks the next free port when the profile's is held, as `ddconsole
up` does (issue 18): a port bound by anything on the host, not only by a managed server."""

from __future__ import annotations

import socket
from pathlib import Path

from console.cli.services import Services
from tests.conftest import shipped_profile_on_port


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
    # Once the port is free again, the profile's own port is planned.
    backend = Services.create(demo=True).live_backend(recordings=None)
    assert backend.plan("qwen3.6-27b", "tp1", "off").port == held
