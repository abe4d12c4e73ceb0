"""Every screen at 80x24 and 160x50, from the fixed scene (same seed, same clock).

Baselines live in `__snapshots__/`; after an intended change of the UI, review the report
and refresh them with `pytest tests/tui/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import pytest
from textual.pilot import Pilot

from console.tui.app import ConsoleApp
from tests.tui import scene
from tests.tui.conftest import settle

SCREENS = ("dashboard", "servers", "bench", "runs", "logs", "topology")


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
@pytest.mark.parametrize("mode", SCREENS)
def test_screen(snap_compare, mode: str, size: tuple[int, int]) -> None:
    app = ConsoleApp(scene.backend(), mode=mode)

    async def ready(pilot: Pilot[None]) -> None:
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=ready)
