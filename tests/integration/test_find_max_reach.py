"""A fixed sweep's level that sent fewer requests than its concurrency never had that load in
flight: the run warns before it, and the knee leaves it out (it used to read `carries 1
concurrent ..., fails at 4 concurrent` from one request at "4 streams")."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli_subprocess
from tests.simproc import KIMI, running_sim


def test_a_level_below_its_streams_is_warned_of_and_not_in_the_knee(tmp_path: Path) -> None:
    with running_sim(KIMI, tmp_path, speed=10) as sim:
        result = run_cli_subprocess(
            "bench", "--url", sim.url, "--concurrency", "1,4", "--requests", "1",
            "--input-len", "64", "--output-len", "8", "--slo", "ttft=1ms", "--json",
            timeout=120,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    said = result.stdout + result.stderr
    assert "level 2 (concurrency 4) sends 1 requests, fewer than its streams" in said
    assert "give --requests (campaign: `requests`) of at least 15" in said
    cell = json.loads(result.stdout)["cells"][0]
    levels = sorted(cell["levels"], key=lambda lv: lv["level"])
    # Both levels ran and were judged (a 1 ms TTFT fails both) ...
    assert [(lv["concurrency"], lv["requests"]) for lv in levels] == [(1, 1), (4, 1)]
    assert [lv["slo_pass"] for lv in levels] == [False, False]
    # ... but only concurrency 1 is a load the sweep measured: one load makes no knee.
    assert cell["knee"] is None
