"""`ddconsole runs compare A B C`: recorded demo runs aligned by cell and level, a doctored
slowdown marked beyond noise, identical runs never marked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURES = REPO / "tests" / "tui" / "fixtures" / "runs"
SCHEMA = json.loads((REPO / "docs" / "compare.schema.json").read_text(encoding="utf-8"))
BUDGETS = "20261129-185811-qwen-ddtree-budgets"
RECHECK = "20261129-185848-qwen-b15-recheck"
SLOWER = "20261129-190000-budgets-slower-b15"
AGAIN = "20261129-190100-budgets-again"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """The two fixture runs, the first again as it was, and the first with ddtree-b15's
    concurrency-4 level (8 requests, all counted: too short for a steady window) given three
    times its TTFT, each request ending that much later
    (its summaries rebuilt from files)."""
    root = tmp_path / "runs"
    for name in (BUDGETS, RECHECK):
        shutil.copytree(FIXTURES / name, root / name)
    for name in (SLOWER, AGAIN):
        shutil.copytree(FIXTURES / BUDGETS, root / name)
        for stale in (root / name).glob("summary.*"):
            stale.unlink()
    requests = root / SLOWER / "requests.jsonl"
    lines = []
    for line in requests.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["cell"] == "qwen3.6-27b/tp1/ddtree-b15" and row["level"] == 1 and row["ttft_s"]:
            row["e2e_s"] += row["ttft_s"] * 2
            row["ttft_s"] *= 3
        lines.append(json.dumps(row))
    requests.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_three_runs_align_by_cell_and_level_and_mark_what_exceeds_noise(cli, runs: Path) -> None:
    result = cli("runs", "compare", BUDGETS, RECHECK, SLOWER, "--out", str(runs), "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["schema_version"] == 1
    assert [r["label"] for r in doc["runs"]] == ["A", "B", "C"]
    assert doc["noise_rule"]["z"] == 2.0
    assert "standard error" in doc["noise_rule"]["text"]
    rows = {(row["cell"], row["load"]): row for row in doc["rows"]}
    # Every level of A is in C; the recheck has off and ddtree-b15 only.
    assert len(rows) == 8
    b32 = rows[("qwen3.6-27b/tp1/ddtree-b32", "1")]["metrics"]["output_tok_s"]
    assert b32["values"][1] is None
    assert b32["beyond_noise"] == [None, None, False]
    slowed = rows[("qwen3.6-27b/tp1/ddtree-b15", "4")]["metrics"]["ttft_p50_s"]
    assert slowed["change_pct"][2] == pytest.approx(200.0, abs=0.5)
    assert slowed["beyond_noise"][2] is True
    # The recheck is another run of the same cells: its TTFT moved a few percent at most.
    assert slowed["beyond_noise"][1] is False
    # Nothing else moved in C but that level's latencies: its step time, its throughput
    # and every other level stay within noise; a p99 of 8 requests is not judged.
    marked = {
        (key, name)
        for key, row in rows.items()
        for name, metric in row["metrics"].items()
        if metric["beyond_noise"][2]
    }
    b15 = ("qwen3.6-27b/tp1/ddtree-b15", "4")
    assert (b15, "ttft_p50_s") in marked
    assert marked <= {(b15, "ttft_p50_s"), (b15, "e2e_p50_s")}
    assert rows[("qwen3.6-27b/tp1/off", "1")]["metrics"]["ttft_p99_s"]["beyond_noise"][2] is None

    text = cli("runs", "compare", BUDGETS, RECHECK, SLOWER, "--out", str(runs))
    assert text.code == 0, text.err
    assert "TOK/S A / B / C" in text.out
    assert "C = 20261129-190000-budgets-slower-b15" in text.out
    assert "(+200%*)" in text.out
    assert text.out.count("%*)") == 1  # E2E P50 is not among the columns shown
    assert "beyond noise (*) when it exceeds both 2 x the combined standard error" in text.out


def test_two_runs_keep_their_output_and_identical_runs_differ_by_nothing(cli, runs: Path) -> None:
    two = cli("runs", "compare", BUDGETS, RECHECK, "--out", str(runs), "--json")
    doc = json.loads(two.out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["run_a"] == BUDGETS
    assert doc["run_b"] == RECHECK
    assert [row["concurrency"] for row in doc["rows"]] == [1, 4, 1, 4]
    assert all(row["output_tok_s_delta_pct"] is not None for row in doc["rows"])
    assert sorted(doc["only_a"]) == [
        "qwen3.6-27b/tp1/ddtree-b32 @ 1",
        "qwen3.6-27b/tp1/ddtree-b32 @ 4",
        "qwen3.6-27b/tp1/ddtree-b64 @ 1",
        "qwen3.6-27b/tp1/ddtree-b64 @ 4",
    ]
    text = cli("runs", "compare", BUDGETS, RECHECK, "--out", str(runs))
    assert "TOK/S A / B" in text.out
    assert "only in A: qwen3.6-27b/tp1/ddtree-b32 @ 1" in text.out
    same = cli("runs", "compare", BUDGETS, AGAIN, "--out", str(runs))
    assert same.code == 0, same.err
    assert "%*)" not in same.out
    assert "(+0%)" in same.out
