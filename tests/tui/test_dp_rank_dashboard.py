"""The dashboard's per-DP-rank lines with a real dp2 simulator under load: one line per rank
under the server's figures, at 80x24 and 200x50, a slow rank marked; none for dp 1."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from console.cli.services import Services
from console.core.net import free_port
from console.tui.app import ConsoleApp
from console.tui.widgets.pane import Pane
from console.tui.widgets.rank_rows import RankRows
from tests.conftest import run_cli_subprocess
from tests.tui.conftest import until

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=os.environ.copy())


def _up(layout: str, fault: str = "") -> dict[str, object]:
    env = os.environ.copy()
    if fault:
        env["DDCONSOLE_SIM_FAULT"] = fault
    port = str(free_port())
    result = run_cli_subprocess(
        "--demo", "up", "qwen3.6-27b", "-l", layout, "--port", port, "--json", env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    status: dict[str, object] = json.loads(result.stdout)
    return status


async def _load(url: str, stop: asyncio.Event) -> None:
    """Eight streams of long requests until `stop`."""
    async with httpx.AsyncClient(timeout=120) as client:

        async def stream() -> None:
            while not stop.is_set():
                await client.post(
                    f"{url}/generate",
                    json={
                        "text": "the quick brown fox " * 8,
                        "sampling_params": {"max_new_tokens": 256, "ignore_eos": True},
                    },
                )

        await asyncio.gather(*(stream() for _ in range(8)))


def _rows(app: ConsoleApp) -> list[str]:
    rows = app.screen.query_one(RankRows)
    return [line.plain for line in rows.text.split("\n")] if rows.display else []


def _both_ranks_decoding(app: ConsoleApp) -> bool:
    lines = _rows(app)
    ranks = [line for line in lines if line.strip().startswith(("dp0", "dp1"))]
    return len(ranks) == 2 and all("tok/s -" not in line for line in ranks)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_dp2_server_shows_a_line_per_rank(user_profiles: Path, size: tuple[int, int]):
    # The shipped profile's dp2 layout: two replicas on GPUs 0 and 1.
    status = _up("dp2", "dp-slow:1")
    services = Services.create(demo=True)
    app = ConsoleApp(services.live_backend(recordings=None))
    stop = asyncio.Event()
    load = asyncio.create_task(_load(str(status["url"]), stop))
    try:
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: _both_ranks_decoding(app), 60, "both ranks' tok/s")
            # The slow rank holds more of the requests and decodes each one slower.
            await until(pilot, lambda: "lags" in "\n".join(_rows(app)), 60, "dp1 marked")
            lines = _rows(app)
            width = size[0]
            assert all(len(line) <= width for line in lines)
            # The mark sits on dp1's line (or its wrapped tail), never on dp0's.
            dp1_at = next(i for i, line in enumerate(lines) if line.strip().startswith("dp1"))
            assert "lags" not in "\n".join(lines[:dp1_at])
            assert "lags" in "\n".join(lines[dp1_at:])
            if width >= 200:
                assert len(lines) == 2  # one line per rank
    finally:
        stop.set()
        await load


async def test_dp1_server_shows_no_rank_lines(free_port_profiles: dict[str, int]):
    _up("tp1")
    services = Services.create(demo=True)
    app = ConsoleApp(services.live_backend(recordings=None))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "tok/s" in _now(app), 60, "the server's figures")
        assert _rows(app) == []
        assert not app.screen.query_one(RankRows).display


def _now(app: ConsoleApp) -> str:
    return app.screen.query_one("#now", Pane).text.plain
