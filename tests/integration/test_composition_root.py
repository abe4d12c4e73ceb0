"""One composition root: the TUI's monitor, `ddconsole metrics` and the bench recorder are
built by `Services.monitor` and `TelemetryHub`, never by wiring their own poller."""

from __future__ import annotations

import ast
import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console.cli.services import Services
from console.server.monitor import Monitor
from console.telemetry.hub import TelemetryHub
from tests.conftest import REPO

# Who may build each piece of a telemetry stack.
BUILDERS = {
    "Poller": {"console/telemetry/hub.py"},
    "GpuSource": {"console/telemetry/hub.py"},
    "HostSource": {"console/telemetry/hub.py"},
    "CostSource": {"console/telemetry/hub.py"},
    "SglangSource": {"console/telemetry/hub.py"},
    # `metrics --prometheus` reads no host source (Prometheus holds them): a hub of its own
    # until the monitor takes a Prometheus source.
    "TelemetryHub": {
        "console/server/monitor.py",
        "console/bench/recorder.py",
        "console/cli/prom_metrics.py",
    },
    "Monitor": {"console/cli/services.py"},
    # The telemetry HTTP client is the hub's; the benchmark's load client (client.py) is
    # lent to the run's recorder rather than a second one built.
    "AsyncClient": {"console/telemetry/hub.py", "console/bench/client.py"},
}


def constructions(path: Path) -> set[str]:
    """The names in BUILDERS that `path` calls (`Poller(...)`, `poller.Poller(...)`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in BUILDERS:
                found.add(name)
    return found


def test_only_the_root_builds_a_telemetry_stack() -> None:
    seen: dict[str, set[str]] = {name: set() for name in BUILDERS}
    for path in sorted((REPO / "console").rglob("*.py")):
        for name in constructions(path):
            seen[name].add(path.relative_to(REPO).as_posix())
    assert seen == BUILDERS


class Counting:
    """Services.monitor, counting the monitors it builds."""

    def __init__(self, original: Callable[..., Monitor]) -> None:
        self.original = original
        self.built: list[Monitor] = []

    def __call__(self, services: Services, **kwargs: Any) -> Monitor:
        monitor = self.original(services, **kwargs)
        self.built.append(monitor)
        return monitor


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counting:
    counting = Counting(Services.monitor)

    def monitor(self: Services, **kwargs: Any) -> Monitor:
        return counting(self, **kwargs)

    monkeypatch.setattr(Services, "monitor", monitor)
    return counting


def test_the_tui_monitor_comes_from_the_root(counted: Counting) -> None:
    services = Services.create(demo=True)
    backend = services.live_backend(recordings=None)

    async def run() -> None:
        await backend.start()
        try:
            assert backend.monitor is not None
            assert counted.built == [backend.monitor]
            hub = backend.monitor.hub
            assert isinstance(hub, TelemetryHub)
            # The screens' store and the TUI's own manager are the ones the root wired.
            assert hub.store is backend.store
            assert backend.monitor.manager is backend.manager
            await hub.poll_all_once()
            assert backend.store.gpu(0) is not None
        finally:
            await backend.stop()

    asyncio.run(run())


def test_metrics_comes_from_the_root(cli: Any, counted: Counting) -> None:
    result = cli("--demo", "metrics", "--once", "--json", "--interval", "0.2")
    assert result.code == 0, result.err
    assert len(counted.built) == 1
    assert isinstance(counted.built[0].hub, TelemetryHub)
    data = json.loads(result.out)
    assert [g["index"] for g in data["gpus"]] == list(range(8))
