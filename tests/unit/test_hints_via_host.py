"""Hints that name a command (`ddconsole down X`, `ddconsole runs show RUN`) work as printed
where they are read: relayed by `ddconsole --host alpha VERB`, the remote command runs with
DDCONSOLE_VIA_HOST=alpha and its hints say `ddconsole --host alpha ...`; run here, they say
plain `ddconsole ...` as before (trial finding F5)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from console.bench.rundir import RunDir
from console.cli.cmd_snapshot import _damaged_runs_line
from console.cli.runner import resume_hint
from console.cli.services import Services
from console.core.errors import StateError
from console.core.paths import StatePaths
from console.core.via_host import VIA_HOST_ENV
from console.server.records import Records
from tests.conftest import REPO, CliResult
from tests.fleet.test_fleet_runs import SGLANG_RESULT


@pytest.fixture(params=[None, "alpha"], ids=["here", "relayed"])
def dd(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The prefix a hint must carry: plain here, `--host alpha` when relayed from alpha."""
    if request.param is None:
        monkeypatch.delenv(VIA_HOST_ENV, raising=False)
        return "ddconsole"
    monkeypatch.setenv(VIA_HOST_ENV, request.param)
    return f"ddconsole --host {request.param}"


def _imported_run(cli, tmp_path: Path) -> str:
    result_file = tmp_path / "sglang.jsonl"
    result_file.write_text(json.dumps(SGLANG_RESULT) + "\n")
    made = cli("--demo", "runs", "import", str(result_file), "--name", "done", "--json")
    assert made.code == 0, made.err
    run_id: str = json.loads(made.out)["run_id"]
    return run_id


def test_a_damaged_server_record_names_the_down_that_removes_it(dd: str, tmp_path: Path) -> None:
    records = Records(StatePaths(tmp_path / "state").ensure())
    records.record_path("qwen-tp1").write_text("{not json")
    with pytest.raises(StateError) as caught:
        records.load("qwen-tp1")
    assert caught.value.hint == f"`{dd} down qwen-tp1` removes it"


def test_stopping_a_finished_run_names_the_runs_show_that_tells_it(
    dd: str, cli, tmp_path: Path
) -> None:
    run_id = _imported_run(cli, tmp_path)
    stopped: CliResult = cli("--demo", "runs", "stop", run_id, "--yes")
    assert stopped.code == 1
    assert f"hint: `{dd} runs show {run_id}` shows what it did" in stopped.err, stopped.err


def test_a_read_only_refusal_names_the_command_as_typed(dd: str, cli) -> None:
    refused = cli("--demo", "--read-only", "down", "qwen-tp1")
    assert refused.code == 2
    assert f"read-only (--read-only): `{dd} down` starts, stops" in refused.err, refused.err


def test_a_campaign_resume_hint_and_a_snapshot_warning_name_the_command(
    dd: str, cli, tmp_path: Path
) -> None:
    from console.bench.request import CampaignRequest

    services = Services.create(demo=True)
    run = RunDir.open(services.state.runs, _imported_run(cli, tmp_path))
    source = REPO / "campaigns" / "qwen-ddtree-budgets.toml"
    request = CampaignRequest.from_file(source)
    assert resume_hint(services, run, request) == (
        f"`{dd} campaign {source} --resume {run.run_id} --demo` continues"
    )
    line = _damaged_runs_line([(run.run_id, "run.json: not JSON")], in_markdown=False)
    assert line.endswith(f"; `{dd} runs show RUN` says why"), line


def test_down_without_ids_names_the_ps_that_lists_them(dd: str, cli) -> None:
    refused: CliResult = cli("--demo", "down")
    assert refused.code == 2
    assert f"name the servers to stop (see `{dd} ps`), or use --all" in refused.err, refused.err


# Where a literal "`ddconsole " may stay: help texts and completion describe the tool, and the
# fleet verbs speak on the console host about other hosts.
LITERAL_ALLOWED = {
    "console/cli/helptext.py",
    "console/cli/cmd_completion.py",
    "console/cli/complete.py",
    "console/cli/cmd_fleet.py",
}
SCANNED = ("cli", "server", "bench", "core", "export", "telemetry", "hw", "profiles", "topology")
HELP_KEYWORDS = {"help", "description", "epilog", "usage"}


def _literal_hints(path: Path) -> list[str]:
    """String pieces saying "`ddconsole " (not `--host`, which names its host already) outside
    docstrings, argparse help keywords and `*_HELP` constants, as `path:line: text`."""
    source = path.read_text()
    if "`ddconsole " not in source:
        return []  # most files: nothing to parse
    tree = ast.parse(source, str(path))
    exempt: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):  # docstrings, also those under attributes
            for statement in body:
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                    exempt.add(id(statement.value))
        if isinstance(node, ast.keyword) and node.arg in HELP_KEYWORDS:
            exempt.update(id(sub) for sub in ast.walk(node.value))
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id.endswith("HELP") for t in node.targets
        ):
            exempt.update(id(sub) for sub in ast.walk(node.value))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        text = node.value.replace("`ddconsole --host", "")
        if "`ddconsole " in text and id(node) not in exempt:
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    return found


def test_no_hint_spells_out_a_plain_ddconsole() -> None:
    """A new hint builds its command from ddconsole_command(), so it works when relayed."""
    found = [
        hit
        for package in SCANNED
        for path in sorted((REPO / "console" / package).rglob("*.py"))
        if str(path.relative_to(REPO)) not in LITERAL_ALLOWED
        for hit in _literal_hints(path)
    ]
    assert not found, "use console.core.via_host.ddconsole_command():\n" + "\n".join(found)
