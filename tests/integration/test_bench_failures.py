"""Failures read as failures (issue 16): a level whose every request failed is `failed`, and
the benchmark exits non-zero saying why on its last line; partial failure is counted."""

from __future__ import annotations

import json
from pathlib import Path

from console.bench.results import CellSummary, LevelSummary, RunSummary
from console.core.net import free_port
from tests.conftest import run_cli_subprocess
from tests.simproc import SMALL, running_sim


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
    assert last.startswith("bench failed: level 1 (concurrency 1): 4/4 requests failed")
    assert "connection refused" in last
    (summary_file,) = out.glob("*/summary.json")
    level = json.loads(summary_file.read_text())["cells"][0]["levels"][0]
    assert level["status"] == "failed"
    assert level["error_kinds"] == {"connection refused": 4}
    # `runs show --follow` tells the level as the summary judges it, not as "done".
    followed = run_cli_subprocess(
        "runs", "show", summary_file.parent.name, "--follow", "--out", str(out)
    )
    # Followed to its end, the exit status says the run failed (as `bench` did).
    assert followed.returncode == 1, followed.stderr
    assert "level 1 failed: connection refused" in followed.stdout
    assert "level 1 done" not in followed.stdout
    # With --json, stdout is the summary document alone; the level lines go to stderr.
    as_json = run_cli_subprocess(
        "runs", "show", summary_file.parent.name, "--follow", "--json", "--out", str(out)
    )
    assert json.loads(as_json.stdout)["status"] == "failed"
    assert "level 1 failed: connection refused" in as_json.stderr
    # The run failed, and a level where no request finished measured nothing per step
    # (probe F9: it read VERIFY/STEP 1, ACCEPT/STEP 1.00, ACCEPT % 100%).
    assert json.loads((summary_file.parent / "run.json").read_text())["status"] == "failed"
    assert "[failed]" in done.stdout
    assert level["accepted_tokens_per_step"] is None
    assert level["verify_tokens_per_step"] is None
    assert level["accept_ratio"] is None
    row = next(line for line in done.stdout.splitlines() if "0 ok, 4 err" in line)
    assert "1.00" not in row
    assert "100%" not in row


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
    assert verdict == "level 1 (concurrency 4): 3/16 requests failed (most: HTTP 500: boom)"


def _bench_all_failing(url: str, out: Path) -> tuple[int, str, dict]:
    """`bench --url` of 4 requests whose every request fails: exit status, the output, and
    the level as summary.json records it."""
    done = run_cli_subprocess(
        "bench", "--url", url, "--requests", "4", "--input-len", "8", "--output-len", "4",
        "--warmup", "0", "--out", str(out), timeout=120,
    )  # fmt: skip
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    (summary_file,) = out.glob("*/summary.json")
    return done.returncode, text, json.loads(summary_file.read_text())["cells"][0]["levels"][0]


def test_bench_without_the_api_key_fails_with_http_401(tmp_path: Path) -> None:
    """A server started with --api-key answers a request without the key 401
    `{"error": "Unauthorized"}` (sglang 0.5.23 srt/utils/auth.py:17, 148-149, 192-203):
    every request fails, the level is failed with that reason, the bench exits 1 and says
    so last."""
    with running_sim([*SMALL, "--api-key", "K"], tmp_path, speed=0) as sim:
        code, text, level = _bench_all_failing(sim.url, tmp_path / "runs")
    reason = 'HTTP 401: {"error":"Unauthorized"}'
    assert code == 1, text
    assert text.strip().splitlines()[-1] == (
        f"bench failed: level 1 (concurrency 1): 4/4 requests failed: {reason}"
    )
    assert level["status"] == "failed"
    assert level["reason"] == reason
    assert level["output_tok_s"] is None  # no throughput for a level that served nothing
    # The progress line and the printed table say why instead of a throughput.
    assert f"level 1 failed: {reason} (0 requests, 4 errors)" in text
    assert f"0 ok, 4 err; failed: {reason}" in text


def test_bench_against_http_500_fails_with_its_reason(tmp_path: Path) -> None:
    """The simulator's `http-500` fault (probability 1) answers every generate request 500,
    an OpenAI-style error object: the level is failed with reason `HTTP 500: ...`."""
    with running_sim(SMALL, tmp_path, speed=0, env={"DDCONSOLE_SIM_FAULT": "http-500:1"}) as sim:
        code, text, level = _bench_all_failing(sim.url, tmp_path / "runs")
    assert code == 1, text
    last = text.strip().splitlines()[-1]
    assert last.startswith("bench failed: level 1 (concurrency 1): 4/4 requests failed: HTTP 500: ")
    assert level["status"] == "failed"
    assert level["reason"].startswith("HTTP 500: ")
    assert "Internal server error" in level["reason"]


def test_failed_level_without_a_stored_reason_reads_its_most_common_error() -> None:
    """A summary.json written before levels carried `reason` still says why a level failed."""
    level = LevelSummary.from_json(
        {"level": 0, "status": "failed", "errors": 3,
         "error_kinds": {"HTTP 500: x": 1, "connection refused": 2}}
    )  # fmt: skip
    assert level.reason == "connection refused"
    assert LevelSummary(level=0, errors=1, error_kinds={"x": 1}).reason is None
