"""The console against real simulator processes: the operator's loop, a failing source, quit.

Demo mode end to end: servers are simulator processes launched through the same manager
the CLI uses, benchmarks run detached through the CLI, telemetry is polled over HTTP.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, OptionList

from console.bench.listing import list_runs
from console.cli.services import Services
from console.tui.app import ConsoleApp
from console.tui.live import LiveBackend
from console.tui.screens.launch import LaunchScreen
from console.tui.screens.modals import ConfirmScreen
from console.tui.widgets.pane import Pane
from tests.conftest import run_cli_subprocess
from tests.tui.conftest import settle, until

# The TUI launches shipped profiles on their own ports: user overrides put them on free ones.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("free_port_profiles")]


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Simulators at 20x speed, and nothing left running whatever the test did."""
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=os.environ.copy())


def live_backend() -> LiveBackend:
    services = Services.create(demo=True)
    return services.live_backend(recordings=services.state.recordings)


def states(backend: LiveBackend) -> dict[str, str]:
    return {s.id: s.state for s in backend.servers()}


async def choose_and_launch(pilot, app: ConsoleApp, profile: str) -> None:
    """In the launch dialog: pick `profile` (default layout and variant), wait for the plan."""
    screen = app.screen
    assert isinstance(screen, LaunchScreen)
    profiles = screen.query_one("#profile", OptionList)
    names = [profiles.get_option_at_index(i).id for i in range(profiles.option_count)]
    profiles.highlighted = names.index(profile)
    await until(
        pilot,
        lambda: screen.plan is not None and screen.plan.profile == profile,
        what=f"the plan for {profile}",
    )
    await pilot.press("enter")


async def test_operator_loop_launch_bench_runs_switch_stop():
    backend = live_backend()
    app = ConsoleApp(backend)
    async with app.run_test(size=(160, 50)) as pilot:
        # Launch qwen3.6-27b tp1 (the dialog's defaults) -> ready.
        await pilot.press("s", "n")
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen), what="launch dialog")
        await choose_and_launch(pilot, app, "qwen3.6-27b")
        await until(pilot, lambda: "ready" in states(backend).values(), 60, "qwen ready")
        qwen = next(i for i, s in states(backend).items() if s == "ready")
        assert qwen.startswith("qwen3.6-27b-tp1")

        # Benchmark it from the Bench screen; the run is detached and shows up there.
        await pilot.press("b")
        await settle(pilot)
        screen = app.screen
        screen.query_one("#concurrency", Input).value = "1,2"
        screen.query_one("#requests", Input).value = "4"
        screen.query_one("#output-len", Input).value = "32"
        await until(
            pilot,
            lambda: (
                screen.query_one("#targets", OptionList).option_count == 1
                and not screen.query_one("#targets", OptionList).get_option_at_index(0).disabled
            ),
            what="the ready server listed",
        )
        screen.query_one("#targets", OptionList).focus()
        await pilot.press("g")
        # It asks first, with what will run and about how long.
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 15, "the confirmation")
        await pilot.press("y")
        runs_root = backend.runs_root
        await until(
            pilot,
            lambda: any(r.status == "done" for r in list_runs(runs_root)),
            90,
            "the benchmark to finish",
        )

        # The result in Runs: the DESIGN table with measured throughput.
        await pilot.press("r")
        await until(
            pilot,
            lambda: app.screen.query_one("#runs", DataTable).row_count == 1,
            what="the run listed",
        )
        await settle(pilot)
        await until(
            pilot,
            lambda: app.screen.summary is not None,  # type: ignore[attr-defined]
            what="the run's summary",
        )
        summary = app.screen.summary  # type: ignore[attr-defined]
        levels = summary.cells[0].levels
        assert [lv.concurrency for lv in levels] == [1, 2]
        assert all((lv.output_tok_s or 0) > 0 and lv.requests == 4 for lv in levels)

        # Switch to kimi-k2.6 tp8: confirm, the qwen server stops, kimi comes up on all GPUs.
        await pilot.press("s")
        await settle(pilot)
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen), what="switch dialog")
        await choose_and_launch(pilot, app, "kimi-k2.6")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirmation")
        await pilot.press("y")
        await until(
            pilot,
            lambda: any(
                i.startswith("kimi-k2.6-tp8") and s == "ready" for i, s in states(backend).items()
            ),
            120,
            "kimi ready",
        )
        assert states(backend)[qwen] == "stopped"
        kimi = next(i for i in states(backend) if i.startswith("kimi"))
        assert next(s for s in backend.servers() if s.id == kimi).gpus == tuple(range(8))

        # Stop it (confirmed), once the list on screen shows it (it refreshes every tick).
        table = app.screen.query_one("#list", DataTable)
        await until(pilot, lambda: kimi in table.rows, 10, "kimi in the list")
        table.move_cursor(row=table.get_row_index(kimi))
        await settle(pilot)
        assert app.screen.selected().id == kimi  # type: ignore[attr-defined]
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirmation")
        assert app.screen.title_text == f"Stop {kimi}?"  # type: ignore[attr-defined]
        await pilot.press("y")
        await until(pilot, lambda: states(backend).get(kimi) == "stopped", 60, "kimi stopped")
        await pilot.press("q")
    assert not any(s.live for s in backend.servers())
    recordings = list(Path(backend.recordings or "").glob("*.ddrec.gz"))
    assert len(recordings) == 1
    assert recordings[0].stat().st_size > 0


async def test_a_failing_source_degrades_alone_and_quitting_says_servers_keep_running(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv("DDCONSOLE_SIM_FAULT", "metrics-500")
    up = run_cli_subprocess(
        "--demo",
        "up",
        "qwen3.6-27b",
        "--layout",
        "tp1",
        "--variant",
        "off",
        env=os.environ.copy(),
        timeout=90,
    )
    assert up.returncode == 0, up.stderr
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT")
    backend = live_backend()
    app = ConsoleApp(backend)
    async with app.run_test(size=(160, 50)) as pilot:
        sources = app.screen.query_one("#sources", Pane)
        await until(
            pilot,
            lambda: (
                "qwen3.6-27b-tp1-1 unavailable" in sources.text.plain
                or "qwen3.6-27b-tp1-1 degraded" in sources.text.plain
            ),
            30,
            "the server's metrics source marked failing",
        )
        assert "8/8 GPUs ok" in sources.text.plain
        first = backend.store.gpu(0)
        assert first is not None

        def later() -> bool:
            sample = backend.store.gpu(0)
            return sample is not None and sample.t_mono > first.t_mono + 1.5

        await until(
            pilot,
            later,
            10,
            "GPU readings to keep coming",
        )
        assert "qwen3.6-27b-tp1-1" in app.screen.query_one("#gpus", Pane).text.plain
        await pilot.press("q")
    message = " ".join(capsys.readouterr().err.split())
    assert "1 demo server keeps running (qwen3.6-27b-tp1-1)" in message
    assert "run" not in message.split("stops them.", 1)[1]  # no run was running: none named
    # Demo servers are found by the demo verbs only.
    assert "`ddconsole ps --demo`" in message
    assert "`ddconsole down --all --demo`" in message
