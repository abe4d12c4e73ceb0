"""Goodput against a real dp2 simulator: equal to throughput when every request meets the
SLO, lower when the `dp-slow` fault (one DP rank's forward passes 4x as long,
console/sim/dispatch.py) pushes that rank's requests over it. An ITL target of 200 ms sits
3x above the healthy server's per-request ITL (about 66 ms here at concurrency 4) and 2x
below the slow rank's (about 470 ms), so machine load does not move a request across it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.simproc import QWEN, running_sim

pytestmark = pytest.mark.slow

SLO = "itl=200ms"


def _bench(fault: str | None, tmp_path: Path) -> dict:
    args = [*QWEN, "--dp-size", "2", *(["--sim-fault", fault] if fault else [])]
    with running_sim(args, tmp_path, speed=20) as sim:
        result = subprocess.run(
            [sys.executable, "-m", "console", "bench", "--url", sim.url, "--demo",
             "--concurrency", "4", "--requests", "24", "--output-len", "64",
             "--slo", SLO, "--json", "--out", str(tmp_path / "runs")],
            capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
            env={k: v for k, v in os.environ.items() if not k.startswith("DDCONSOLE_SIM_")},
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (cell,) = json.loads(result.stdout)["cells"]
    assert cell["slo"] == "ITL ≤ 200 ms for 95% of requests"
    (level,) = cell["levels"]
    return dict(level)


def test_goodput_equals_throughput_on_a_healthy_server(tmp_path: Path) -> None:
    level = _bench(None, tmp_path)
    assert level["window"] == "steady"
    assert level["slo_attainment"] == 1.0
    assert level["slo_pass"] is True
    assert level["goodput_tok_s"] == pytest.approx(level["output_tok_s"], rel=1e-9)


def test_a_slow_rank_pushes_requests_over_the_slo_and_goodput_falls(tmp_path: Path) -> None:
    level = _bench("dp-slow:1:4", tmp_path)
    assert 0.0 < level["slo_attainment"] < 0.95
    assert level["slo_pass"] is False
    assert 0.0 < level["goodput_tok_s"] < 0.95 * level["output_tok_s"]
    assert level["slo_met"] < level["slo_counted"]
