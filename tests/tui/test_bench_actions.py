"""The Bench screen's campaign actions, through the keys an operator presses: chosen cells
(`p`) and the demo sweep (`D`) become typed requests stored in run.json, and a detached
runner that names only the run carries them out. Demo mode, free ports, real processes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Input, SelectionList

from console.bench.request import CampaignRequest
from console.bench.runner_verb import RUNNER_VERB
from console.cli.services import Services
from console.tui.app import ConsoleApp
from console.tui.live import LiveBackend
from console.tui.screens.bench import BenchScreen
from console.tui.screens.cells import CellsScreen
from console.tui.screens.modals import ConfirmScreen
from tests.conftest import run_cli_subprocess
from tests.tui.conftest import settle, until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("free_port_profiles")]


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Fast simulators, a temp folder of the test's own, and nothing left running."""
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    yield
    run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=os.environ.copy())


def run_json(backend: LiveBackend) -> list[dict]:
    root = backend.runs_root
    if not root.is_dir():
        return []
    return [json.loads(p.read_text()) for p in sorted(root.glob("*/run.json"))]


def confirm_detail(app: ConsoleApp) -> str:
    screen = app.screen
    assert isinstance(screen, ConfirmScreen)
    return screen.detail


def runner_argv(run_dir: Path) -> list[str]:
    owner = json.loads((run_dir / "owner.json").read_text())
    raw = Path(f"/proc/{owner['pid']}/cmdline").read_bytes()
    return [part.decode() for part in raw.split(b"\0") if part]


async def test_chosen_cells_and_the_demo_sweep_start_from_typed_requests(tmp_path: Path) -> None:
    backend = Services.create(demo=True).live_backend(recordings=None)
    app = ConsoleApp(backend)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("b")
        await settle(pilot)
        assert isinstance(app.screen, BenchScreen)

        # Pick one cell, at one level of two requests, and start it.
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, CellsScreen), what="cells dialog")
        cells = app.screen.query_one("#cells", SelectionList)
        wanted = "qwen3.6-27b|tp1|ddtree-b15"
        cells.select(wanted)
        app.screen.query_one("#concurrency", Input).value = "1"
        app.screen.query_one("#requests", Input).value = "2"
        await pilot.press("ctrl+s")
        # Nothing starts before the confirmation, which says what will run.
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 15, "confirmation")
        assert run_json(backend) == []
        assert "1 level × 2 requests" in confirm_detail(app)
        await pilot.press("y")
        await until(pilot, lambda: len(run_json(backend)) == 1, 30, "the chosen-cells run")
        meta = run_json(backend)[0]
        request = CampaignRequest.from_json(meta["request"])
        assert request == CampaignRequest.from_cells(
            (("qwen3.6-27b", "tp1", "ddtree-b15"),), concurrency=(1,), requests=2
        )
        run_dir = backend.runs_root / meta["run_id"]
        await until(pilot, lambda: (run_dir / "owner.json").exists(), 15, "the runner")
        assert runner_argv(run_dir) == [sys.executable, "-m", "console", RUNNER_VERB, str(run_dir)]
        deadline = time.monotonic() + 90
        while json.loads((run_dir / "run.json").read_text())["status"] != "done":
            assert time.monotonic() < deadline, "the chosen-cells run did not finish"
            await pilot.pause(0.5)

        # The demo sweep: placed beside what runs, stored as a request (its file and the
        # placement), never rewritten as TOML.
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 15, "confirmation")
        assert "5 cells × 1 level" in confirm_detail(app)
        await pilot.press("y")
        await until(pilot, lambda: len(run_json(backend)) == 2, 30, "the demo sweep's run")
        demo = next(m for m in run_json(backend) if m["run_id"] != meta["run_id"])
        sweep = CampaignRequest.from_json(demo["request"])
        assert str(sweep.source).endswith("qwen-ddtree-budgets.toml")
        assert sweep.spec.gpus == [7]
        assert sweep.spec.port is not None
        assert sweep.spec.port >= 30100
        # The sweep takes minutes: stop its runner (it stops its server on the way out).
        sweep_dir = backend.runs_root / demo["run_id"]
        await until(pilot, lambda: (sweep_dir / "owner.json").exists(), 15, "the sweep's runner")
        os.kill(json.loads((sweep_dir / "owner.json").read_text())["pid"], signal.SIGTERM)
        await until(pilot, lambda: not (sweep_dir / "owner.json").exists(), 60, "it to stop")
        assert json.loads((sweep_dir / "run.json").read_text())["status"] == "interrupted"
        await pilot.press("q")
    assert list((tmp_path / "tmp").rglob("*.toml")) == []
