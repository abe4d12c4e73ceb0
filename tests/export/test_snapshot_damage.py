"""Damage is reported where the user looks (issue 17, F5/F18): a run that cannot be read is
named with its reason in snapshot.md and in one warning line on the CLI, and the readable
runs are reported as before. Real run folders on disk, the CLI in-process."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import jsonschema

from console.cli.services import Services
from console.export.snapshot import to_markdown
from tests.conftest import CliResult

FIXTURES = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs"
GOOD = "20261129-185811-qwen-ddtree-budgets"
DAMAGED = "20261129-185848-qwen-b15-recheck"
HEADING = "## Runs that could not be read"
SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "docs" / "snapshot.schema.json").read_text()
)


def demo_runs() -> Path:
    """The demo state's results folder: a good run next to a newer one whose run.json is
    valid JSON but not an object."""
    root = Services.create(demo=True).state.runs
    root.mkdir(parents=True, exist_ok=True)
    for run_id in (GOOD, DAMAGED):
        shutil.copytree(FIXTURES / run_id, root / run_id)
    (root / DAMAGED / "run.json").write_text("[]")
    return root


def test_snapshot_names_an_unreadable_run_in_the_report_and_one_cli_line(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    demo_runs()
    out = tmp_path / "snap"
    result = cli("snapshot", "--demo", "--out", str(out), "--format", "json,md")
    assert result.code == 0, result.err
    assert "internal error" not in result.err
    warnings = [line for line in result.err.splitlines() if "warning" in line]
    assert len(warnings) == 1, result.err
    assert warnings[0].startswith("ddconsole: warning: 1 run could not be read")
    assert DAMAGED in warnings[0]
    assert "not a JSON object" in warnings[0]
    assert "snapshot.md" in warnings[0]
    markdown = (out / "snapshot.md").read_text()
    assert HEADING in markdown
    section = markdown.split(HEADING, 1)[1]
    row = next(line for line in section.splitlines() if DAMAGED in line)
    assert "not a JSON object but an array" in row
    # The good run is still the one reported as the latest.
    latest = markdown.split("## Latest run", 1)[1].split(HEADING, 1)[0]
    assert GOOD in latest
    assert DAMAGED not in latest
    # snapshot.json lists it too, with the same reason, and still matches its schema.
    document = json.loads((out / "snapshot.json").read_text())
    jsonschema.validate(document, SCHEMA)
    assert [entry["id"] for entry in document["unreadable_runs"]] == [DAMAGED]
    assert "not a JSON object but an array" in document["unreadable_runs"][0]["reason"]
    assert document["latest_run"]["run_id"] == GOOD


def test_without_damage_the_report_has_no_such_section(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    root = demo_runs()
    shutil.rmtree(root / DAMAGED)
    out = tmp_path / "snap"
    result = cli("snapshot", "--demo", "--out", str(out), "--format", "json,md")
    assert result.code == 0, result.err
    assert "warning" not in result.err
    assert HEADING not in (out / "snapshot.md").read_text()
    assert json.loads((out / "snapshot.json").read_text())["unreadable_runs"] == []


def test_without_markdown_the_cli_line_points_to_runs_list(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    demo_runs()
    result = cli("snapshot", "--demo", "--out", str(tmp_path / "snap"), "--format", "json")
    assert result.code == 0, result.err
    warning = next(line for line in result.err.splitlines() if "warning" in line)
    assert "ddconsole runs show RUN" in warning


def test_a_run_whose_requests_cannot_be_read_is_named_too(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """Its run.json is fine (the listing shows it), but its summary cannot be rebuilt: the
    older run is reported as the latest, and the newer one is named with its reason."""
    root = demo_runs()
    shutil.rmtree(root / DAMAGED)
    shutil.copytree(FIXTURES / DAMAGED, root / DAMAGED)
    with (root / DAMAGED / "requests.jsonl").open("ab") as handle:
        handle.write(b'{"x": "\x00\xff\xfe"}\n')
    (root / DAMAGED / "summary.json").unlink(missing_ok=True)
    out = tmp_path / "snap"
    result = cli("snapshot", "--demo", "--out", str(out), "--format", "md")
    assert result.code == 0, result.err
    warning = next(line for line in result.err.splitlines() if "warning" in line)
    assert DAMAGED in warning
    assert "requests.jsonl" in warning
    section = (out / "snapshot.md").read_text().split(HEADING, 1)[1]
    assert DAMAGED in section
    assert "requests.jsonl" in section


def test_a_reason_with_pipes_and_line_breaks_keeps_to_its_row() -> None:
    document = {
        "created_wall": 0.0,
        "host": {"hostname": "h"},
        "generator": "ddconsole test",
        "source": "live",
        "demo": False,
        "servers": [],
        "topology": {},
        "reading": {"servers": [], "gpus": [], "sources": []},
        "history": {"seconds": 300.0, "series": {}},
        "latest_run": None,
    }
    markdown = to_markdown(
        document, unreadable_runs=[("run|1", "run.json: a | b\nsecond line | c")]
    )
    section = markdown.split(HEADING, 1)[1].split("History:", 1)[0]
    rows = section.strip().splitlines()
    # Header, rule, one row: nothing in the reason split or ended it.
    assert rows == [
        "| run | reason |",
        "| --- | --- |",
        "| run\\|1 | run.json: a \\| b second line \\| c |",
    ]
    assert "No readable runs." in markdown
