"""A run judged against an SLO carries its SLO table and knee into `summary.md`, the CSV,
`runs show --json` and `snapshot.md`: a recorded Qwen3.6-27B campaign (off and DDTree
budget 15 at concurrency 1 and 4) judged at ITL ≤ 50 ms, which `off` meets at 1 (37 ms) and
misses at 4 (128 ms), and budget 15 meets at both (6 and 25 ms)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from console.bench.listing import DiskRuns
from console.bench.results import RunSummary
from console.bench.tables import to_csv, to_markdown
from console.export.snapshot import build_snapshot
from console.export.snapshot import to_markdown as snapshot_markdown
from console.telemetry.store import TimeSeriesStore

FIXTURE = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs"
RUN = "20261129-185848-qwen-b15-recheck"


def judged_run(tmp_path: Path) -> RunSummary:
    shutil.copytree(FIXTURE / RUN, tmp_path / RUN)
    (tmp_path / RUN / "summary.json").unlink()
    meta_path = tmp_path / RUN / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["request"] = {"kind": "campaign", "spec": {**meta["spec"], "slo": "itl=50ms"}}
    meta_path.write_text(json.dumps(meta))
    summary = DiskRuns(tmp_path).run_summary(RUN)
    assert summary is not None
    return summary


def test_the_slo_table_and_knees_reach_every_export(tmp_path: Path) -> None:
    summary = judged_run(tmp_path)
    off, b15 = summary.cells
    assert off.slo == "ITL ≤ 50 ms for 95% of requests"
    assert [lv.slo_pass for lv in off.levels] == [True, False]
    assert [lv.slo_pass for lv in b15.levels] == [True, True]
    assert off.knee is not None
    assert (off.knee.value, off.knee.first_failing) == (1, 4)
    assert b15.knee is not None
    assert (b15.knee.value, b15.knee.first_failing) == (4, None)
    markdown = to_markdown(summary)
    assert "## SLO: ITL ≤ 50 ms for 95% of requests" in markdown
    assert "| GOODPUT |" in markdown
    assert "carries 1 concurrent at ITL ≤ 50 ms for 95% of requests, fails at 4" in markdown
    assert "TTFT MET" not in markdown  # no TTFT target, no column
    header, *rows = to_csv(summary).splitlines()
    columns = header.split(",")
    off_at_4 = dict(zip(columns, rows[1].split(","), strict=True))
    assert float(off_at_4["goodput_tok_s"]) == 0.0
    assert off_at_4["slo_pass"] == "FAIL"
    document = build_snapshot(
        store=TimeSeriesStore(10),
        now_mono=time.monotonic(),
        servers=[],
        topology={"source": "none", "gpus": [], "numa_nodes": []},
        latest_run=summary,
        demo=True,
        source="live",
    )
    levels = json.loads(json.dumps(document))["latest_run"]["cells"][0]["levels"]
    assert [lv["slo_pass"] for lv in levels] == [True, False]
    snapshot = snapshot_markdown(document, summary)
    assert "SLO: ITL ≤ 50 ms for 95% of requests:" in snapshot
    assert "FAIL" in snapshot
