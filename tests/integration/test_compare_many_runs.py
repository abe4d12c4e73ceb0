"""`ddconsole runs compare A B C`: recorded runs aligned by cell and level, a doctored
slowdown marked beyond noise, runs of one configuration never marked."""

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
AGAIN = "20261129-190100-budgets-again"


NOISE1 = "20261202-032536-noise1"
NOISE2 = "20261202-032548-noise2"
NOISE_SLOWER = "20261202-040000-noise1-slower-c4"
IDENTICAL = REPO / "tests" / "unit" / "fixtures" / "identical-runs"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """The two fixture runs, the first again as it was; two runs of one configuration
    against the simulator (concurrency 4 and 8, 48 requests each), and the first of them
    with its concurrency-4 level given three times its TTFT, each request ending that much
    later (summaries rebuilt from files)."""
    root = tmp_path / "runs"
    for name in (BUDGETS, RECHECK):
        shutil.copytree(FIXTURES / name, root / name)
    shutil.copytree(FIXTURES / BUDGETS, root / AGAIN)
    for stale in (root / AGAIN).glob("summary.*"):
        stale.unlink()
    for name in (NOISE1, NOISE2):
        shutil.copytree(IDENTICAL / name, root / name)
    shutil.copytree(IDENTICAL / NOISE1, root / NOISE_SLOWER)
    meta = root / NOISE_SLOWER / "run.json"
    doc = json.loads(meta.read_text(encoding="utf-8"))
    doc["run_id"], doc["name"] = NOISE_SLOWER, "noise1-slower-c4"
    meta.write_text(json.dumps(doc), encoding="utf-8")
    requests = root / NOISE_SLOWER / "requests.jsonl"
    lines = []
    for line in requests.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["level"] == 0 and row["ttft_s"]:
            row["e2e_s"] += row["ttft_s"] * 2
            row["ttft_s"] *= 3
        lines.append(json.dumps(row))
    requests.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_three_runs_align_by_cell_and_level_and_mark_what_exceeds_noise(cli, runs: Path) -> None:
    result = cli("runs", "compare", NOISE1, NOISE2, NOISE_SLOWER, "--out", str(runs), "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["schema_version"] == 1
    assert [r["label"] for r in doc["runs"]] == ["A", "B", "C"]
    assert doc["noise_rule"]["z"] == 2.0
    assert "batch means" in doc["noise_rule"]["text"]
    assert "heuristic" in doc["noise_rule"]["text"]
    assert doc["noise_rule"]["std_error"]["min_requests"] == 20
    rows = {row["load"]: row for row in doc["rows"]}
    assert sorted(rows) == ["4", "8"]
    slowed = rows["4"]["metrics"]["ttft_p50_s"]
    assert slowed["change_pct"][2] > 150  # x3 on the requests, the window moving with them
    assert slowed["beyond_noise"][2] is True
    # B is another run of the same configuration: its TTFT p50 moved about 25%, within
    # the noise its blocks show.
    assert slowed["change_pct"][1] < -20
    assert slowed["beyond_noise"][1] is False
    # Nothing else moved in C but that level's latencies: its step time and every other
    # level stay within noise; a p99 of 40 requests is not judged.
    marked = {
        (load, name)
        for load, row in rows.items()
        for name, metric in row["metrics"].items()
        if metric["beyond_noise"][2]
    }
    assert ("4", "ttft_p50_s") in marked
    assert marked <= {("4", "ttft_p50_s"), ("4", "e2e_p50_s"), ("4", "output_tok_s")}
    assert not any(
        metric["beyond_noise"][1] for row in rows.values() for metric in row["metrics"].values()
    )
    assert rows["8"]["metrics"]["ttft_p99_s"]["beyond_noise"][2] is None

    text = cli("runs", "compare", NOISE1, NOISE2, NOISE_SLOWER, "--out", str(runs))
    assert text.code == 0, text.err
    assert "TOK/S A / B / C" in text.out
    assert f"C = {NOISE_SLOWER}" in text.out
    assert "%*)" in text.out
    assert "a heuristic for run-to-run noise" in text.out
    assert "batch means" in text.out

    # Levels of 8 requests are too short for the blocks: no verdict either way.
    tiny = cli("runs", "compare", BUDGETS, RECHECK, "--out", str(runs), "--json")
    for row in json.loads(tiny.out)["rows"]:
        assert all(v is None for m in row["metrics"].values() for v in m["beyond_noise"])


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
