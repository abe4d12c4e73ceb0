"""`ddconsole --prometheus URL`: the console, headless, reading a real Prometheus that scrapes
two real simulators under load and a DCGM-named GPU exporter (no local NVML read).

The dashboard lists both simulators by their scrape instance with their tok/s, the GPU table
shows the exporter's GPUs, the sources strip names the Prometheus and its targets, a
simulator Prometheus can no longer scrape turns unresponsive with Prometheus' own error, and
the flight recording replays the Prometheus readings.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest
from textual.coordinate import Coordinate
from textual.screen import ModalScreen
from textual.widgets import DataTable

from console.cli.services import Services
from console.telemetry.prom_source import SOURCE_NAME
from console.telemetry.recording import SUFFIX, read_recording
from console.tui.app import ConsoleApp
from console.tui.prom_views import PROMETHEUS
from console.tui.replay import ReplayBackend
from console.tui.widgets.gpu_table import GpuTable
from console.tui.widgets.pane import Pane
from console.tui.widgets.server_strip import ServerStrip
from console.tui.widgets.sources_bar import SourcesBar
from tests.integration.test_prometheus_exporters import Exporter, dcgm_registry
from tests.promproc import running_prometheus
from tests.simproc import SMALL, start_sim, stop_sim, wait_ready
from tests.tui.conftest import until

pytestmark = pytest.mark.slow

TOK_S = re.compile(r"tok/s ([0-9.]+)")


def test_the_console_names_the_prometheus_source_key() -> None:
    # The TUI repeats the key to keep the source's HTTP imports off the first frame.
    assert PROMETHEUS == SOURCE_NAME


async def _load(url: str, stop: asyncio.Event) -> None:
    """Four streams of long requests until `stop`."""
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

        await asyncio.gather(*(stream() for _ in range(4)), return_exceptions=True)


def _text(app: ConsoleApp, widget: type[Pane], selector: str | None = None) -> str:
    pane = app.screen.query_one(selector, Pane) if selector else app.screen.query_one(widget)
    return pane.text.plain


def _tok_s(app: ConsoleApp) -> float:
    found = TOK_S.search(_text(app, Pane, "#now"))
    return float(found.group(1)) if found else 0.0


async def test_dashboard_reads_two_simulators_through_prometheus(
    prometheus_binary: str, tmp_path: Path
) -> None:
    sims = [start_sim(SMALL, tmp_path=tmp_path, speed=20, name=f"s{i}") for i in range(2)]
    exporter = Exporter(dcgm_registry())
    stop = asyncio.Event()
    loads: list[asyncio.Task[None]] = []
    try:
        for sim in sims:
            wait_ready(sim)
        instances = sorted(sim.url.removeprefix("http://") for sim in sims)
        jobs = {"sglang": instances, "dcgm": [exporter.address]}
        with running_prometheus(prometheus_binary, jobs, tmp_path) as prom:
            loads = [asyncio.create_task(_load(sim.url, stop)) for sim in sims]
            services = Services.create(demo=False, prometheus=prom.url)
            app = ConsoleApp(services.live_backend(recordings=tmp_path / "recordings"))
            async with app.run_test(size=(200, 50)) as pilot:
                strip = lambda: _text(app, ServerStrip)  # noqa: E731
                try:
                    await until(
                        pilot,
                        lambda: all(
                            any(i in line and " ready " in line for line in strip().splitlines())
                            for i in instances
                        ),
                        60,
                        "both simulators listed ready",
                    )
                except AssertionError as exc:
                    raise AssertionError(f"{exc}:\n{strip()}\n{_text(app, SourcesBar)}") from None
                # Each simulator's tok/s, focused in turn with `f`.
                seen: dict[str, float] = {}
                for _ in range(2):

                    def decoding() -> bool:
                        now = _text(app, Pane, "#now")
                        focused = next((i for i in instances if i in now), None)
                        if focused is not None and _tok_s(app) > 0:
                            seen[focused] = _tok_s(app)
                            return True
                        return False

                    await until(pilot, decoding, 60, "the focused simulator's tok/s")
                    await pilot.press("f")
                    await pilot.pause(0.3)
                assert set(seen) == set(instances), seen
                # The exporter's two GPUs, not this host's: util 40% and 41%, named.
                await until(
                    pilot,
                    lambda: "NVIDIA H200" in _text(app, GpuTable),
                    30,
                    "the exporter's GPUs in the table",
                )
                gpus = _text(app, GpuTable)
                assert "40%" in gpus, gpus
                assert "41%" in gpus, gpus
                sources = _text(app, SourcesBar)
                assert f"prometheus {prom.url}: 3 targets" in sources, sources
                assert "2/2 GPUs ok" in sources, sources

                # Listed on the Servers screen too, where the console refuses to act on it.
                await pilot.press("s")
                await pilot.pause(0.5)
                table = app.screen.query_one("#list", DataTable)
                keys = [
                    str(table.coordinate_to_cell_key(Coordinate(i, 0)).row_key.value)
                    for i in range(table.row_count)
                ]
                assert set(instances) <= set(keys), keys
                table.move_cursor(row=keys.index(instances[0]))
                await pilot.pause(0.3)
                await pilot.press("x")
                await pilot.pause(0.3)
                assert "read through prometheus" in app.notices[-1], list(app.notices)
                assert not isinstance(app.screen, ModalScreen)
                await pilot.press("d")
                await pilot.pause(0.3)

                # A simulator Prometheus cannot scrape: its row says so, the other stays.
                stop_sim(sims[1])
                gone = sims[1].url.removeprefix("http://")
                await until(
                    pilot,
                    lambda: any(
                        gone in line
                        and "unresponsive" in line
                        and "Prometheus cannot scrape" in line
                        for line in strip().splitlines()
                    ),
                    60,
                    "the stopped simulator unresponsive with Prometheus' error",
                )
                assert "1 down" in _text(app, SourcesBar)
                kept = sims[0].url.removeprefix("http://")
                assert any(kept in line and "ready" in line for line in strip().splitlines())
            # The flight recorder took the Prometheus readings as it takes direct ones.
            path = next((tmp_path / "recordings").glob(f"*{SUFFIX}"))
            replayed = ReplayBackend(
                read_recording(path), runs_root=services.state.runs, playing=False
            )
            sample = replayed.store.server(kept)
            assert sample is not None
            assert (sample.decode_tok_s or 0) > 0, sample
    finally:
        stop.set()
        for task in loads:
            task.cancel()
        await asyncio.gather(*loads, return_exceptions=True)
        exporter.stop()
        for sim in sims:
            stop_sim(sim)
