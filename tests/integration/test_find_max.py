"""The saturation search (`--find-max`) against the simulator: the knee it finds matches an
exhaustive sweep over the same levels, failing levels stop early, and `--resume` of a search
cut short continues it from its `levels.jsonl`.

The load is Kimi K2.6 TP8 `off` (profiles/kimi-k2.6.toml; catalog: prefill 40,000 tok/s at
TP8, 8 ms per prefill batch, a 37 ms decode step). With 16,384-token prompts each request
adds about 0.41 s of prefill, so in a closed loop of N streams the last of the first round's
requests waits for the others' prefill: the level's highest TTFT grows by about 0.41 s per
stream. With 8 requests per level and a 95% attainment every request must meet the target,
so a level passes when its highest TTFT does. Measured on a loaded 2-core box (load average
6, simulator at 5x, three sweeps): highest TTFT 1.31-1.37 s at 3 streams, 1.82-1.87 s at 4.
The SLO of 1.6 s sits mid-way, about 0.22 s (44 ms of real time at 5x) from either: the knee
is 3, with bracketing (1, 2, 4) and one bisection (3). Should a stall still push one level
across, the search and the sweep may differ by one stream, the search's own step.
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

SPEED = "5"
SLO = "ttft=1.6s"
LIMIT = 8
WORKLOAD = ["--requests", "8", "--input-len", "16384", "--output-len", "8", "--flush-cache"]


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
    target = ["--server", server, "--slo", SLO, *WORKLOAD, "--json", "--demo"]

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

    # The knee lands mid-range (neither end of the sweep), and the search finds it within
    # its step of one stream.
    assert sweep_knee is not None
    assert 2 <= sweep_knee <= LIMIT - 2, sweep_cell["knee"]
    assert knee["value"] is not None
    assert abs(knee["value"] - sweep_knee) <= 1, (knee, sweep_cell["knee"])
    assert knee["value"] == bracket(dict(verdicts)).passing

    # A failing level of the search stopped as soon as one request missed (8 requests at
    # 95%: one miss is already too many), is done rather than interrupted, and says why.
    failing = [lv for lv in search_cell["levels"] if not lv["slo_pass"] or lv.get("early_stop")]
    assert failing
    for level in failing:
        assert level["status"] == "done"
        assert "stopped early" in level["early_stop"]
    assert any(lv["requests"] + lv["errors"] < 8 for lv in failing)
    # The sweep ran every request of its failing levels (no search, no early stop).
    assert all(lv["requests"] == 8 for lv in sweep_cell["levels"])
    assert not any(lv.get("early_stop") for lv in sweep_cell["levels"])
    # The run's lines said what it searched and what it found.
    assert "searching concurrency from 1 up to 8 (step 1)" in found.stderr + found.stdout
    assert "carries" in found.stderr + found.stdout


def test_resume_continues_a_search_from_its_levels(tmp_path: Path) -> None:
    campaign = tmp_path / "search.toml"
    campaign.write_text(
        'name = "kimi-search"\nprofile = "kimi-k2.6"\nlayouts = ["tp8"]\nvariants = ["off"]\n'
        f'find_max = "concurrency"\nfind_max_limit = {LIMIT}\nslo = "{SLO}"\n'
        "attainment = 0.95\nrequests = 8\ninput_len = 16384\noutput_len = 8\n"
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
