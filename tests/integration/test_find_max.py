"""The saturation search (`--find-max`) against the simulator: the knee it finds matches an
exhaustive sweep over the same levels, failing levels stop early, and `--resume` of a search
cut short continues it from its `levels.jsonl`.

The load is Kimi K2.6 TP8 `off` (profiles/kimi-k2.6.toml; catalog: prefill 40,000 tok/s at
TP8, 8 ms per prefill batch, a 37 ms decode step). With 16,384-token prompts each request
adds about 0.41 s of prefill, and in a closed loop of N streams the requests that arrive
together wait for each other's prefill, so TTFT grows by about 0.41 s per stream. Measured on
a loaded 2-core box (load average 5, simulator at 5x, two sweeps of 16 requests per level):

    2 streams: every TTFT 0.45-0.94 s
    3 streams: a third at 0.47-0.89 s, two thirds at 1.21-1.42 s

The SLO is TTFT 1.1 s for 75% of requests, judged on each level's steady window (about 12
requests). Three streams cannot pass: a stall only lengthens TTFTs, and two thirds already
miss. Two streams fail only if 4 requests of the window stall past 1.1 s (0.16 s of server
time, 32 ms of real time at 5x, each). So the knee is 2, found by bracketing (1, 2, 4) and
one bisection (3), and both failing levels stop early; should load still flip a level, the
search and the sweep may differ by one stream, the search's own step.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.bench.find_max import Search, bracket, next_load
from console.core.paths import StatePaths
from tests.conftest import REPO

# Each test launches a demo Kimi server and runs several levels: 20-40 s.
pytestmark = pytest.mark.slow

SPEED = "5"
SLO = "ttft=1.1s"
ATTAINMENT = "0.75"
LIMIT = 6
WORKLOAD = ["--requests", "16", "--input-len", "16384", "--output-len", "8", "--flush-cache"]


def dd(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": SPEED},
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


@pytest.fixture(autouse=True)
def demo_servers(
    monkeypatch: pytest.MonkeyPatch, free_port_profiles: dict[str, int]
) -> Iterator[None]:
    """Shipped profiles on free ports, no injected fault; every demo server stopped after."""
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    dd("down", "--all", "--grace", "2", "--demo")


def _verdicts(cell: dict) -> list[tuple[float, bool]]:
    """(concurrency, passed) of each finished level in the order measured."""
    return [
        (float(level["concurrency"]), bool(level["slo_pass"]) and not level.get("early_stop"))
        for level in sorted(cell["levels"], key=lambda lv: lv["level"])
        if level["status"] == "done"
    ]


def _follows_the_driver(search: Search, verdicts: list[tuple[float, bool]]) -> None:
    """Each load is the one the driver proposes given the verdicts before it, and the search
    ended where the driver says it is done."""
    measured: dict[float, bool] = {}
    for load, passed in verdicts:
        assert next_load(search, measured) == load, (measured, load)
        measured[load] = passed
    assert next_load(search, measured) is None, measured


def test_search_finds_the_knee_of_an_exhaustive_sweep() -> None:
    up = dd("up", "kimi-k2.6", "-l", "tp8", "-v", "off", "--json", "--demo")
    assert up.returncode == 0, up.stderr
    server = json.loads(up.stdout)["id"]
    target = ["--server", server, "--slo", SLO, "--attainment", ATTAINMENT, *WORKLOAD]
    target += ["--json", "--demo"]

    found = dd("bench", *target, "--find-max", "concurrency", "--find-max-limit", str(LIMIT))
    assert found.returncode == 0, found.stderr[-3000:]
    search_cell = json.loads(found.stdout)["cells"][0]
    assert (search_cell["profile"], search_cell["variant"]) == ("kimi-k2.6", "off")
    verdicts = _verdicts(search_cell)
    _follows_the_driver(Search(kind="concurrency", start=1, limit=LIMIT), verdicts)
    knee = search_cell["knee"]
    assert knee["kind"] == "concurrency"
    assert knee["loads"] == [load for load, _ in verdicts]
    # Fewer levels than the sweep: bracketing and bisection, not every load.
    assert len(verdicts) < LIMIT

    sweep = dd("bench", *target, "--concurrency", ",".join(str(c) for c in range(1, LIMIT + 1)))
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    sweep_cell = json.loads(sweep.stdout)["cells"][0]
    assert [lv["concurrency"] for lv in sweep_cell["levels"]] == list(range(1, LIMIT + 1))
    sweep_knee = sweep_cell["knee"]["value"]

    # The sweep has a knee inside its range (neither every level failing nor passing), and
    # the search finds it within its step of one stream.
    assert sweep_knee is not None
    assert 1 <= sweep_knee < LIMIT, sweep_cell["knee"]
    assert knee["value"] is not None
    assert abs(knee["value"] - sweep_knee) <= 1, (knee, sweep_cell["knee"])
    assert knee["value"] == bracket(dict(verdicts)).passing

    # A failing level of the search stopped once its window could no longer reach 75%,
    # before its 16 requests, as done (not interrupted), saying why.
    failing = [lv for lv in search_cell["levels"] if not lv["slo_pass"] or lv.get("early_stop")]
    assert all(lv["status"] == "done" for lv in failing)
    stopped = [lv for lv in failing if lv.get("early_stop")]
    assert stopped, failing
    assert all("stopped early" in lv["early_stop"] for lv in stopped)
    # A level plans max(16, 3 x streams + 3) requests, enough for a steady window.
    planned = {lv["level"]: max(16, 3 * lv["concurrency"] + 3) for lv in stopped}
    assert all(lv["requests"] + lv["errors"] < planned[lv["level"]] for lv in stopped), stopped
    # The sweep ran every request of its failing levels (no search, no early stop).
    assert all(lv["requests"] == 16 for lv in sweep_cell["levels"])
    assert not any(lv.get("early_stop") for lv in sweep_cell["levels"])
    # The run's lines said what it searched and what it found.
    said = found.stderr + found.stdout
    assert f"searching concurrency from 1 up to {LIMIT} (step 1) for TTFT ≤ 1.1 s at 75%" in said
    assert "each level sends max(16, 3 x streams + 3) requests" in said
    assert f"carries {knee['value']:g} concurrent at TTFT ≤ 1.1 s for 75% of requests" in said
    assert "SLO met by 100% (passes), goodput" in said
    assert "(fails: stopped early)" in said
    # `runs show` reports the knee with the loads measured, in the order measured.
    shown = dd("runs", "show", json.loads(found.stdout)["run_id"], "--demo")
    assert shown.returncode == 0, shown.stderr
    tried = ", ".join(f"{load:g}" for load, _ in verdicts)
    assert f"carries {knee['value']:g} concurrent" in shown.stdout
    assert tried in shown.stdout


def test_resume_continues_a_search_from_its_levels(tmp_path: Path) -> None:
    campaign = tmp_path / "search.toml"
    campaign.write_text(
        'name = "kimi-search"\nprofile = "kimi-k2.6"\nlayouts = ["tp8"]\nvariants = ["off"]\n'
        f'find_max = "concurrency"\nfind_max_limit = {LIMIT}\nslo = "{SLO}"\n'
        f"attainment = {ATTAINMENT}\nrequests = 16\ninput_len = 16384\noutput_len = 8\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "campaign", str(campaign), "--demo"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": SPEED},
    )
    runs = StatePaths.for_mode(True).runs
    deadline = time.monotonic() + 120
    levels_file = None
    while time.monotonic() < deadline and proc.poll() is None:
        found = list(runs.glob("*/levels.jsonl"))
        if found and found[0].read_text().splitlines():
            levels_file = found[0]
            break
        time.sleep(0.02)
    assert levels_file is not None, "the search did not finish its first level"
    # Interrupted in its second level (about a second long at 5x): at least one level to go.
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    first_attempt = [json.loads(line) for line in levels_file.read_text().splitlines()]
    done_before = [row for row in first_attempt if row["status"] == "done"]
    assert done_before
    assert any(row["status"] == "interrupted" for row in first_attempt)

    resumed = dd("campaign", str(campaign), "--resume", levels_file.parent.name, "--demo", "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    cell = summary["cells"][0]
    assert cell["status"] == "done"
    # Levels are numbered 0, 1, 2, ... with no gap and no index twice: a level the interrupt
    # cut short was measured again under its own index.
    indices = [lv["level"] for lv in cell["levels"]]
    assert indices == list(range(len(indices)))
    assert all(lv["status"] == "done" for lv in cell["levels"])
    # The resumed attempt kept the first attempt's finished levels and went on from them as
    # the driver would have without the interrupt.
    verdicts = _verdicts(cell)
    _follows_the_driver(Search(kind="concurrency", start=1, limit=LIMIT), verdicts)
    kept = {row["level"]: row["concurrency"] for row in done_before}
    assert all(cell["levels"][i]["concurrency"] == c for i, c in kept.items())
    rows = [json.loads(line) for line in levels_file.read_text().splitlines()]
    assert {row["attempt"] for row in rows} == {1, 2}
    assert all(row["attempt"] == 1 for row in rows if row["level"] in kept)
    assert cell["knee"]["value"] == bracket(dict(verdicts)).passing
