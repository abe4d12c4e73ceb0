"""Failures read as failures (issue 16): a level whose every request failed is `failed`, and
the benchmark exits non-zero saying why on its last line; partial failure is counted."""

from __future__ import annotations

import json
from pathlib import Path

from console.bench.results import CellSummary, LevelSummary, RunSummary
from console.core.net import free_port
from tests.conftest import run_cli_subprocess


def test_bench_url_to_closed_port_exits_nonzero_with_connection_refused_last(
    isolated_dirs: Path, tmp_path: Path
) -> None:
    port = free_port()  # nothing listens on it
    out = tmp_path / "runs"
    done = run_cli_subprocess(
        "bench",
        "--url",
        f"http://127.0.0.1:{port}",
        "--requests",
        "4",
        "--input-len",
        "4",
        "--output-len",
        "4",
        "--out",
        str(out),
    )
    assert done.returncode != 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    last = (done.stdout + done.stderr).strip().splitlines()[-1]
    assert last.startswith("bench failed: level 0 (concurrency 1): 4/4 requests failed")
    assert "connection refused" in last
    (summary_file,) = out.glob("*/summary.json")
    level = json.loads(summary_file.read_text())["cells"][0]["levels"][0]
    assert level["status"] == "failed"
    assert level["error_kinds"] == {"connection refused": 4}


def test_partial_failure_is_counted_with_its_most_common_error_but_passes() -> None:
    from console.cli.run_common import failure_verdict

    level = LevelSummary(
        level=0,
        concurrency=4,
        requests=13,
        errors=3,
        error_kinds={"HTTP 500: boom": 2, "connection reset": 1},
    )
    summary = RunSummary(
        run_id="r", run_dir="/x", cells=(CellSummary(cell_id="c", status="done", levels=(level,)),)
    )
    verdict, failed = failure_verdict(summary)
    assert not failed
    assert verdict == "level 0 (concurrency 4): 3/16 requests failed (most: HTTP 500: boom)"
