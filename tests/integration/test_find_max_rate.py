"""A rate saturation search against a simulator: open-loop levels doubling from the first
`--rate`, each judged on every request, up to the limit when every level passes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli_subprocess
from tests.simproc import KIMI, running_sim


def test_a_rate_search_doubles_open_loop_levels_up_to_its_limit(tmp_path: Path) -> None:
    with running_sim(KIMI, tmp_path, speed=10) as sim:
        result = run_cli_subprocess(
            "bench",
            "--url",
            sim.url,
            "--find-max",
            "rate",
            "--rate",
            "20",
            "--find-max-limit",
            "70",
            "--requests",
            "8",
            "--input-len",
            "64",
            "--output-len",
            "8",
            # Far above anything a short prompt sees: every level passes.
            "--slo",
            "ttft=5s",
            "--json",
            timeout=120,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    cell = json.loads(result.stdout)["cells"][0]
    levels = sorted(cell["levels"], key=lambda lv: lv["level"])
    # Doubling from the first rate, the last level at the limit itself, never above it.
    assert [lv["rate"] for lv in levels] == [20.0, 40.0, 70.0]
    # Open loop with no cap on requests in flight; judged on every request (no window).
    assert all(lv["concurrency"] is None for lv in levels)
    assert all(lv["window"] == "all" for lv in levels)
    assert all(lv["slo_pass"] and lv["requests"] == 8 for lv in levels)
    knee = cell["knee"]
    assert (knee["kind"], knee["value"], knee["first_failing"]) == ("rate", 70.0, None)
    assert "searching rate from 20/s up to 70/s (step 10%)" in result.stdout + result.stderr
