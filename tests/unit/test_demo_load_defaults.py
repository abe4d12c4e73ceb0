"""The demo's benchmark load is one set: `ddconsole bench --demo` and the TUI's `g` on a
demo server send the same requests, and each takes about a minute against the slowest
demo server (by the estimate the confirmations show, which the simulator's speed model
drives)."""

from __future__ import annotations

import contextlib
import io

from console.bench import demo_defaults
from console.bench.estimate import estimate_bench
from console.bench.request import BenchRequest
from console.cli.parser import build_parser
from console.profiles.loader import ProfileCatalog
from console.tui.screens.bench import DEMO_LOAD_DEFAULTS
from console.tui.sim_speed import sim_cell_speed

SLOWEST = ("qwen3.6-27b", "tp1", "off")


def cli_help(verb: str) -> str:
    """`ddconsole VERB --help`, one line (argparse wraps it)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser().parse_args([verb, "--help"])
    return " ".join(out.getvalue().split())


def test_the_cli_and_the_tui_send_the_same_demo_requests() -> None:
    text = cli_help("bench")
    assert f"requests per level (default 16, {demo_defaults.DEMO_REQUESTS} with --demo" in text
    assert f"(default 512, {demo_defaults.DEMO_INPUT_LEN} with --demo)" in text
    assert f"(default 256, {demo_defaults.DEMO_OUTPUT_LEN} with --demo)" in text
    assert {
        "concurrency": "1,4",
        "requests": str(demo_defaults.DEMO_REQUESTS),
        "input-len": str(demo_defaults.DEMO_INPUT_LEN),
        "output-len": str(demo_defaults.DEMO_OUTPUT_LEN),
    } == DEMO_LOAD_DEFAULTS


def test_both_take_about_a_minute_on_the_slowest_demo_server() -> None:
    speed = sim_cell_speed(ProfileCatalog(), SLOWEST)
    for concurrency in ((1,), demo_defaults.DEMO_TUI_CONCURRENCY):
        request = BenchRequest(
            server_id="demo",
            concurrency=concurrency,
            requests=demo_defaults.DEMO_REQUESTS,
            input_len=demo_defaults.DEMO_INPUT_LEN,
            output_len=demo_defaults.DEMO_OUTPUT_LEN,
        )
        seconds = estimate_bench(request, speed).seconds
        assert seconds is not None
        assert 30 <= seconds <= 80, (concurrency, seconds)
