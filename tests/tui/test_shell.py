"""The console opens on the simulated host with a DEMO badge and quits on `q`."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from console.hw.simulated import SimulatedGpuBackend
from console.topology.discover import discover
from console.tui.app import ConsoleApp


async def test_demo_shell_shows_gpus_and_quits():
    backend = SimulatedGpuBackend(None)
    app = ConsoleApp(demo=True, topology=discover(backend, backend.numa_nodes))
    async with app.run_test(size=(100, 30)) as pilot:
        assert "DEMO" in str(app.query_one("#badge", Static).render())
        table = app.query_one("#gpus", DataTable)
        assert table.row_count == 8
        await pilot.press("q")
    assert app.return_code == 0
