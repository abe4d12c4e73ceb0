"""Damaged files degrade one item, and the crash log is private (issue 17: F5, F10, F12, F16,
F17, F18). Real files on disk, the CLI in-process, the TUI headless."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import DataTable

from console.bench.rundir import RunDir, check_writable
from console.cli.crash import report_crash
from console.cli.services import Services
from console.core.errors import ProfileError
from console.core.jsonio import load_json_text
from console.profiles.loader import ProfileCatalog, load_profile_file
from console.server.records import Records
from console.tui.app import ConsoleApp
from console.tui.screens.runs import RunsScreen
from tests.conftest import REPO, CliResult
from tests.tui.conftest import settle, until

FIXTURES = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs"
GOOD = "20261129-185811-qwen-ddtree-budgets"
LATEST = "20261129-185848-qwen-b15-recheck"
BASE_PROFILE = (REPO / "profiles" / "qwen3.6-27b.toml").read_text(encoding="utf-8")


def demo_runs(*run_ids: str) -> Path:
    root = Services.create(demo=True).state.runs
    root.mkdir(parents=True, exist_ok=True)
    for run_id in run_ids:
        shutil.copytree(FIXTURES / run_id, root / run_id)
    return root


# -- F10: the crash log ----------------------------------------------------------------------


def _boom() -> RuntimeError:
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        return exc


def test_the_crash_log_is_a_new_private_file_in_the_state_dir() -> None:
    first, second = report_crash(_boom()), report_crash(_boom())
    assert first != second  # O_EXCL: a new file each time, never appended to another's
    for path in (first, second):
        assert path.parent == Services.create(demo=False).state.root
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert "RuntimeError: boom" in path.read_text()


def test_the_crash_log_never_uses_a_shared_tmp_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The state dir cannot be used (a file where the folder should be).
    blocker = tmp_path / "blocked"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    shared = tmp_path / "tmp"
    shared.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    (shared / "crash.log").symlink_to(victim)  # what an attacker would plant
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setattr("tempfile.tempdir", None)
    where = report_crash(_boom())
    assert victim.read_text() == "untouched\n"
    assert where.name != "crash.log"
    assert where.parent.parent == shared  # a mkdtemp folder, 0700
    assert stat.S_IMODE(where.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(where.stat().st_mode) == 0o600
    # And with no writable temp folder at all: stderr only.
    monkeypatch.setenv("TMPDIR", str(victim))
    monkeypatch.setattr("tempfile.tempdir", str(victim))
    capsys.readouterr()
    assert str(report_crash(_boom())) == "stderr"
    assert "RuntimeError: boom" in capsys.readouterr().err
    assert victim.read_text() == "untouched\n"


# -- F5 / F18: damaged run directories ------------------------------------------------------


def test_a_list_run_json_leaves_runs_and_snapshot_working(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    root = demo_runs(GOOD, LATEST)
    (root / LATEST / "run.json").write_text("[]")
    listed = cli("runs", "list", "--demo")
    assert listed.code == 0, listed.err
    row = next(line for line in listed.out.splitlines() if LATEST in line)
    assert "unreadable" in row
    assert "not a JSON object but an array" in row
    shown = cli("runs", "show", LATEST, "--demo")
    assert shown.code == 1
    assert "internal error" not in shown.err
    assert "not a JSON object" in shown.err
    assert cli("runs", "show", GOOD, "--demo").code == 0
    snap = cli("snapshot", "--demo", "--out", str(tmp_path / "snap"))
    assert snap.code == 0, snap.err
    assert "internal error" not in snap.err


@pytest.mark.parametrize("name", ["requests.jsonl", "levels.jsonl", "telemetry.jsonl"])
def test_non_utf8_bytes_in_a_run_file_are_one_line_and_spare_snapshot(
    cli: Callable[..., CliResult], tmp_path: Path, name: str
) -> None:
    root = demo_runs(GOOD, LATEST)
    with (root / LATEST / name).open("ab") as handle:
        handle.write(b'{"x": "\x00\xff\xfe"}\n')
    (root / LATEST / "summary.json").unlink(missing_ok=True)
    shown = cli("runs", "show", LATEST, "--demo")
    assert shown.code == 1, shown.out
    assert "internal error" not in shown.err
    lines = shown.err.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"run {LATEST} is unreadable" in lines[0]
    assert ("telemetry" if name == "telemetry.jsonl" else name) in lines[0]
    snap = cli("snapshot", "--demo", "--out", str(tmp_path / "snap"))
    assert snap.code == 0, snap.err
    assert "internal error" not in snap.err


def test_a_truncated_requests_file_is_reported_not_silently_dropped(
    cli: Callable[..., CliResult],
) -> None:
    root = demo_runs(LATEST)
    requests = root / LATEST / "requests.jsonl"
    data = requests.read_bytes()
    requests.write_bytes(data[:-40] + b"\nnot json at all\n" + data[-40:-20])  # torn tail
    shown = cli("runs", "show", LATEST, "--demo")
    assert shown.code == 0, shown.err
    warning = [line for line in shown.err.splitlines() if "warning" in line]
    assert len(warning) == 1, shown.err
    assert "requests.jsonl: 3 damaged lines skipped" in warning[0]


def test_a_crashed_bench_reads_interrupted_in_list_and_show(
    cli: Callable[..., CliResult],
) -> None:
    root = demo_runs(LATEST)
    meta_path = root / LATEST / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["status"] = "running"  # its runner died without saying so; no owner.json
    meta_path.write_text(json.dumps(meta))
    (root / LATEST / "owner.json").unlink(missing_ok=True)
    (root / LATEST / "summary.json").unlink(missing_ok=True)
    listed = cli("runs", "list", "--demo", "--json")
    assert [r["status"] for r in json.loads(listed.out)] == ["interrupted"]
    shown = cli("runs", "show", LATEST, "--demo", "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["status"] == "interrupted"


async def test_the_live_tui_starts_with_a_list_run_json() -> None:
    root = demo_runs(GOOD, LATEST)
    (root / LATEST / "run.json").write_text("[]")
    services = Services.create(demo=True)
    backend = services.live_backend(recordings=services.state.recordings)
    app = ConsoleApp(backend, mode="runs")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        table = screen.query_one("#runs", DataTable)
        await until(pilot, lambda: table.row_count == 2, what="both runs listed")
        assert any("not a JSON object" in str(table.get_row_at(i)[2]) for i in range(2))
        assert app.is_running


# -- F17: leftovers of failed writes and bad datasets ---------------------------------------


def test_a_failed_write_check_leaves_no_probe_file(tmp_path: Path) -> None:
    import resource
    import subprocess

    folder = tmp_path / "runs"
    folder.mkdir()
    script = (
        "import resource, signal, sys; from pathlib import Path\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.getrlimit("
        "resource.RLIMIT_FSIZE)[1]))\n"
        "from console.bench.rundir import check_writable\n"
        "from console.core.errors import UsageError\n"
        "try:\n    check_writable(Path(sys.argv[1]))\n"
        "except UsageError as exc:\n    print(exc.message)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "is not writable: File too large" in result.stdout
    assert list(folder.iterdir()) == []
    assert resource.getrlimit(resource.RLIMIT_FSIZE)  # the limit was the child's only
    check_writable(folder)  # and here, with no limit, it passes and leaves nothing
    assert list(folder.iterdir()) == []


def test_a_bad_dataset_leaves_no_run_folder(
    cli: Callable[..., CliResult], tmp_path: Path, free_port_profiles: dict[str, int]
) -> None:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("this is not json\n")
    campaign = tmp_path / "c.toml"
    campaign.write_text(
        'name = "c"\nprofile = "qwen3.6-27b"\nlayouts = ["tp1"]\nvariants = ["off"]\n'
        f'requests = 2\ndataset = "{dataset}"\n'
    )
    result = cli("campaign", str(campaign), "--demo")
    assert result.code == 2, result.out + result.err
    assert "line 1 is not JSON" in result.err
    runs = Services.create(demo=True).state.runs
    assert not runs.exists() or list(runs.iterdir()) == []


# -- F17 / F12: server records ---------------------------------------------------------------


def test_deep_or_binary_server_records_are_one_unreadable_line(
    cli: Callable[..., CliResult],
) -> None:
    servers = Services.create(demo=True).state.ensure().servers
    (servers / "deep-1.json").write_text("[" * 100_000 + "]" * 100_000)
    (servers / "binary-1.json").write_bytes(b"\x89PNG\xff\xfe\x00" * 50)
    (servers / "deep-1.spawn.json").write_text("{" * 100_000)
    listed = cli("ps", "--demo")
    assert listed.code == 0, listed.err
    out = listed.out + listed.err
    assert "internal error" not in out
    assert "deep-1.json: unreadable state file" in out
    assert "binary-1.json: unreadable state file" in out
    assert Records(Services.create(demo=True).state).spawn("deep-1") is None


def test_load_json_text_turns_deep_nesting_into_value_error() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        load_json_text("[" * 100_000 + "]" * 100_000)
    assert load_json_text('{"a": [1]}') == {"a": [1]}


# -- F12 / F16: profiles and campaign files --------------------------------------------------


def test_deep_profile_and_campaign_files_are_one_clear_line(
    cli: Callable[..., CliResult], user_profiles: Path, tmp_path: Path
) -> None:
    deep = "[" * 5000 + "]" * 5000
    (user_profiles / "deep.toml").write_text(
        BASE_PROFILE.replace("[server]", f"description = {deep}\n[server]", 1)
    )
    listed = cli("profiles", "list", "--demo")
    assert listed.code == 0, listed.err
    row = next(line for line in listed.out.splitlines() if line.startswith("deep "))
    assert "BROKEN" in row
    assert "nested too deeply" in row
    assert any(line.startswith("qwen3.6-27b ") for line in listed.out.splitlines())
    shown = cli("plan", "deep", "--demo")
    assert shown.code == 2
    assert "deep.toml: arrays or tables nested too deeply to read" in shown.err
    for label, content in (
        ("deep", f'name = "c"\nprofile = "qwen3.6-27b"\nlayouts = {deep}\n'.encode()),
        ("binary", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8),
    ):
        path = tmp_path / f"{label}.toml"
        path.write_bytes(content)
        result = cli("campaign", str(path), "--demo")
        assert result.code == 2, result.err
        assert "internal error" not in result.err
        assert str(path) in result.err
        assert len(result.err.strip().splitlines()) == 1, result.err


def test_a_value_nested_within_the_parser_limit_is_quoted_short(user_profiles: Path) -> None:
    port = "[" * 300 + "]" * 300
    text = BASE_PROFILE.replace("port = ", f"port = {port}\n#", 1)
    (user_profiles / "mid.toml").write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_profile_file(user_profiles / "mid.toml")
    assert "server.port: expected an integer, got [[[" in caught.value.message
    assert len(caught.value.message) < 300


def test_validation_messages_quote_the_regex_unchanged(user_profiles: Path) -> None:
    (user_profiles / "rx.toml").write_text(
        BASE_PROFILE.replace("[layouts.tp1]", '[layouts."../x"]', 1)
    )
    with pytest.raises(ProfileError) as caught:
        load_profile_file(user_profiles / "rx.toml")
    assert "'^[A-Za-z0-9][A-Za-z0-9._-]*$'" in caught.value.message


def test_profiles_list_shows_every_odd_toml_entry_as_broken(
    cli: Callable[..., CliResult], user_profiles: Path
) -> None:
    (user_profiles / "dangling.toml").symlink_to(user_profiles / "nowhere")
    (user_profiles / "loopa.toml").symlink_to(user_profiles / "loopb.toml")
    (user_profiles / "loopb.toml").symlink_to(user_profiles / "loopa.toml")
    (user_profiles / "dir.toml").mkdir()
    os.mkfifo(user_profiles / "fifo.toml")  # opened for reading, it would block forever
    started = time.monotonic()
    entries = {e.name: e for e in ProfileCatalog(user_dir=user_profiles).entries()}
    assert time.monotonic() - started < 30
    expected = {
        "dangling": "dangling symlink",
        "loopa": "symlink loop",
        "loopb": "symlink loop",
        "dir": "a directory",
        "fifo": "a FIFO",
    }
    for name, reason in expected.items():
        error = entries[name].error
        assert error is not None, name
        assert reason in error.reason, (name, error.reason)
    assert entries["qwen3.6-27b"].loaded is not None
    listed = cli("profiles", "list", "--demo")
    assert listed.code == 0, listed.err
    for name in expected:
        row = next(line for line in listed.out.splitlines() if line.startswith(f"{name} "))
        assert "BROKEN" in row
    shown = cli("profiles", "show", "fifo", "--demo")
    assert shown.code == 2
    assert "fifo.toml: cannot read: not a regular file (a FIFO)" in shown.err


def test_run_dir_damage_count_ignores_a_live_writers_torn_tail(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    (tmp_path / "requests.jsonl").write_text('{"a": 1}\n[1]\n{"b"')
    (tmp_path / "owner.json").write_text(json.dumps({"pid": os.getpid(), "start_ticks": None}))
    assert run.damaged_lines("requests.jsonl") == 1  # the array; the tail is being written
    (tmp_path / "owner.json").unlink()
    assert run.damaged_lines("requests.jsonl") == 2
