"""Every screen against the fixed demo scene (a replayed recording): what an operator reads."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Static

from console.bench.listing import RunRow
from console.tui.app import MODE_SCREENS, ConsoleApp
from console.tui.remote_calls import remote_calls
from console.tui.screens.bench import BenchScreen
from console.tui.screens.launch import LaunchScreen
from console.tui.screens.modals import ConfirmScreen, HelpScreen
from console.tui.widgets.chart import TimeChart
from console.tui.widgets.keybar import KeyBar
from console.tui.widgets.pane import Pane
from console.tui.widgets.topbar import TopBar
from tests.tui.conftest import settle
from tests.tui.scene import A, B, C


def pane_text(app: ConsoleApp, selector: str) -> str:
    return app.screen.query_one(selector, Pane).text.plain


def static_text(app: ConsoleApp, selector: str) -> str:
    """What a Static shows, as plain text at its width."""
    widget = app.screen.query_one(selector, Static)
    console = Console(width=widget.size.width or 160, file=io.StringIO(), color_system=None)
    with console.capture() as captured:
        console.print(widget.content)
    return captured.get()


async def test_dashboard_shows_servers_charts_gpus_and_sources(scene_backend):
    app = ConsoleApp(scene_backend)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        strip = pane_text(app, "#strip")
        assert A in strip
        assert B in strip
        assert C in strip
        assert "CUDA out of memory" in strip
        assert f"now {A}" in pane_text(app, "#now")
        tok = app.screen.query_one("#chart-tok", TimeChart)
        accept = app.screen.query_one("#chart-accept", TimeChart)
        assert 140 < tok.latest["tok/s"] < 165
        assert 13 < accept.latest["accept"] < 15
        ttft = app.screen.query_one("#chart-ttft", TimeChart)
        assert ttft.latest["p99"] > ttft.latest["p50"] > 500
        gpus = pane_text(app, "#gpus")
        assert "NUMA 0" in gpus
        assert "NUMA 1" in gpus
        assert "LINK now/max" in gpus
        assert "G5x8/G5x16" in gpus
        row0 = next(line for line in gpus.splitlines() if line.strip().startswith("0 "))
        assert A in row0
        assert "%" in row0
        sources = pane_text(app, "#sources")
        assert "8/8 GPUs ok" in sources
        assert f"{B} stale (no fresh reading)" in sources


async def test_focus_moves_to_the_next_server(scene_backend):
    app = ConsoleApp(scene_backend)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        assert app.screen.focused_server == A  # type: ignore[attr-defined]
        await pilot.press("f")
        await settle(pilot)
        assert app.screen.focused_server == B  # type: ignore[attr-defined]
        assert f"now {B}" in pane_text(app, "#now")


@pytest.mark.parametrize(
    ("key", "title"),
    [
        ("s", "Servers"),
        ("b", "Bench"),
        ("r", "Runs"),
        ("l", "Logs"),
        ("t", "Topology"),
        ("d", "Dashboard"),
    ],
)
async def test_each_screen_is_one_key_away_with_the_demo_badge(scene_backend, key, title):
    app = ConsoleApp(scene_backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(key)
        await settle(pilot)
        assert title == app.screen.TITLE
        bar = str(app.screen.query_one(TopBar).render())
        assert title in bar
        assert "DEMO" in bar


async def test_warm_up_builds_every_screen_without_leaving_the_one_shown(scene_backend):
    """A long session builds every mode's screen in the background; the dashboard stays
    shown, and a screen shows its own data on the first key."""
    app = ConsoleApp(scene_backend, warm_up=True)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(50):
            await pilot.pause(0.1)
            if app.built_modes == set(MODE_SCREENS) - {"dashboard"}:
                break
        await app.workers.wait_for_complete()
        assert app.built_modes == set(MODE_SCREENS) - {"dashboard"}
        assert app.current_mode == "dashboard"
        assert app.screen.TITLE == "Dashboard"
        await pilot.press("t")
        await settle(pilot)
        assert app.screen.TITLE == "Topology"
        assert "intended" in pane_text(app, "#topology")


async def test_servers_screen_lists_plans_and_refuses_actions_on_a_replay(scene_backend):
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#list", DataTable)
        assert table.row_count == 3
        detail = static_text(app, "#detail-text")
        assert "--speculative-algorithm DDTREE" in detail
        assert "CUDA_VISIBLE_DEVICES=0" in detail
        await pilot.press("down", "down")
        await settle(pilot)
        assert "CUDA out of memory" in static_text(app, "#detail-text")
        await pilot.press("n")
        await settle(pilot)
        assert not isinstance(app.screen, LaunchScreen)
        assert any("read-only" in n for n in app.notices)


async def test_runs_show_the_design_table_the_finding_and_a_comparison(scene_backend):
    app = ConsoleApp(scene_backend, mode="runs")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#runs", DataTable)
        assert table.row_count == 2
        await pilot.press("down")
        await settle(pilot)
        detail = static_text(app, "#detail-text")
        for header in ("VERIFY/STEP", "STEP MS", "ACCEPT/STEP", "TOK/S", "SPEEDUP"):
            assert header in detail
        assert "acceptance-collapse" in detail
        assert "hybrid" in detail
        assert "TTFT P90" in detail
        await pilot.press("c", "up", "c")
        await settle(pilot)
        compared = static_text(app, "#detail-text")
        assert "TOK/S A / B" in compared
        assert "qwen3.6-27b/tp1/ddtree-b15" in compared


async def test_logs_put_the_failure_on_top_mask_secrets_and_search(scene_backend):
    app = ConsoleApp(scene_backend, mode="logs")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert screen.server_id == C  # type: ignore[attr-defined]
        reason = static_text(app, "#reason")
        assert "FAILED" in reason
        assert "CUDA out of memory" in reason
        lines = list(screen.lines)  # type: ignore[attr-defined]
        assert any("'api_key': '***'" in line for line in lines)
        await pilot.press("slash")
        await pilot.press(*"sigquit", "enter")
        await settle(pilot)
        hit = lines[screen.match_at]  # type: ignore[attr-defined]
        assert "sigquit" in hit
        await pilot.press("e")
        await settle(pilot)
        assert "Traceback" in lines[screen.match_at] or "OutOfMemory" in lines[screen.match_at]  # type: ignore[attr-defined]


async def test_topology_shows_links_and_intended_vs_actual_binding(scene_backend):
    app = ConsoleApp(scene_backend, mode="topology")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        text = pane_text(app, "#topology")
        assert "G5x8/G5x16" in text
        mismatch = next(line for line in text.splitlines() if line.startswith(B))
        assert "node 1 (pin)" in mismatch
        assert "node 0-1" in mismatch
        assert "MISMATCH" in mismatch
        ok = next(line for line in text.splitlines() if line.startswith(A))
        assert ok.rstrip().endswith("ok")
        # At 80 columns the verdict keeps its room: the other columns fit their contents.
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        text = pane_text(app, "#topology")
        mismatch = next(line for line in text.splitlines() if line.startswith(B))
        assert mismatch.rstrip().endswith("MISMATCH")
        assert max(len(line) for line in text.splitlines()) <= 78


async def test_help_lists_the_screen_keys_and_says_quitting_keeps_servers(scene_backend):
    app = ConsoleApp(scene_backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        rows = dict(app.screen.rows)
        assert rows["f"] == "Next server"
        assert "Topology" in " ".join(rows.values())
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, HelpScreen)


async def test_footer_keeps_help_when_the_screen_keys_do_not_fit(scene_backend):
    app = ConsoleApp(scene_backend, mode="logs")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        wide = str(app.screen.query_one(KeyBar).render())
        assert "e Next error" in wide
        assert "? Help" in wide
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        narrow = str(app.screen.query_one(KeyBar).render()).rstrip()
        assert "e Next error" not in narrow  # left out whole, not cut
        assert narrow.endswith("? Help")
        assert len(narrow) <= 80
        assert narrow.startswith(" [ Prev server")


async def test_resize_from_200x50_to_80x24_keeps_every_screen_whole(scene_backend):
    app = ConsoleApp(scene_backend)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert "NAME" in pane_text(app, "#gpus")
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        gpus = pane_text(app, "#gpus")
        assert "LINK now/max" not in gpus
        assert "SM MHz" not in gpus
        assert max(len(line) for line in gpus.splitlines()) <= 80
        assert app.screen.query_one("#charts").has_class("narrow")
        for key in "sbrltd":
            await pilot.press(key)
            await settle(pilot)
            assert app.size.width == 80
        strip = pane_text(app, "#strip")
        assert all(len(line) <= 78 for line in strip.splitlines())
        assert A in strip  # whole ids, not cut


async def test_command_palette_offers_every_screen(scene_backend):
    app = ConsoleApp(scene_backend)
    async with app.run_test(size=(120, 40)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in (
            "Dashboard (d)",
            "Servers (s)",
            "Bench (b)",
            "Runs (r)",
            "Logs (l)",
            "Topology (t)",
        ):
            assert title in titles


async def test_bench_runs_list_fits_its_half_at_80_columns(scene_backend, monkeypatch):
    app = ConsoleApp(scene_backend, mode="bench")
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#recent", DataTable)
        assert [str(c.label) for c in table.columns.values()] == ["RUN", "STATUS", "CELLS", "NOW"]
        ids = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert ids
        assert all(i[:8].isdigit() for i in ids)
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        assert [str(c.label) for c in table.columns.values()] == ["NAME", "STATUS", "CELLS"]
        rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        assert len(rows) == len(ids)
        assert all(row[1] in ("done", "running", "failed", "partial") for row in rows)
        # Every column on screen: nothing pushed past the edge of the half it has.
        assert table.virtual_size.width <= table.size.width
        # A name too long for the room left is cut in the middle (its distinguishing end
        # stays), and still fits.
        long_name = "bench-qwen3.6-27b-tp1-ddtree-b64-with-a-very-long-suffix"
        screen = app.screen
        assert isinstance(screen, BenchScreen)
        extra = RunRow(
            run_id=f"20261130-000000-{long_name}",
            path=Path("/nonexistent"),
            name=long_name,
            kind="bench",
            status="done",
            cells_done=1,
            cells=1,
            created_wall=None,
            progress=None,
        )
        # Served by the backend as its oldest run (listed last, newest first), so the
        # screen's own refreshes keep it where the checks below look.
        recorded = scene_backend.runs()
        monkeypatch.setattr(scene_backend, "runs", lambda: [extra, *recorded])
        screen._show_runs([*screen.runs, extra])
        await settle(pilot)
        shown = str(table.get_row_at(table.row_count - 1)[0])
        head, tail = shown.split("…")
        assert long_name.startswith(head)
        assert long_name.endswith(tail)
        assert table.virtual_size.width <= table.size.width
        # Wider but still narrow: the name gets the new room at once, not on the next run.
        await pilot.resize_terminal(100, 24)
        await settle(pilot)
        wider = str(table.get_row_at(table.row_count - 1)[0])
        assert len(wider) > len(shown)
        assert "…" in wider
        assert table.virtual_size.width <= table.size.width


async def test_quitting_while_a_call_to_another_host_runs_asks_and_y_quits(scene_backend):
    app = ConsoleApp(scene_backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        remote_calls(app).start("alpha", "qwen-tp1", "restart")
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert "restart qwen-tp1 on alpha" in app.screen.detail
        await pilot.press("q")  # asked already: a second q does not stack a second question
        await settle(pilot)
        assert len(app.screen_stack) == 2
        await pilot.press("y")
        await settle(pilot)
        assert not app.is_running
