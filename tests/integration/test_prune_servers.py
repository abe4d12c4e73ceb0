"""Tidy state on the CLI: `ps` folds stopped servers older than the configured age away,
`ps --all` shows them, `prune` removes their records and logs after a confirmation and never
touches a live server. Real simulator processes on free ports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.core.net import free_port
from console.core.paths import StatePaths
from tests.conftest import REPO
from tests.ptyrun import run_on_pty


def dd(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args, "--demo"],
        capture_output=True,
        text=True,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": "20"},
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def on_a_terminal(args: list[str], answer: str, timeout: float = 60) -> tuple[int, str]:
    """Run `ddconsole ARGS --demo` with a terminal for stdin/stdout; type `answer` once it
    asks [y/N]. Returns the exit status and everything it printed."""
    return run_on_pty([*args, "--demo"], answer=answer + "\n", timeout=timeout)


@pytest.fixture
def fold_now(isolated_dirs: Path) -> None:
    """config.toml: every stopped server is folded as soon as it has ended."""
    folder = isolated_dirs / "xdg_config_home" / "ddconsole"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text('[console]\nfold_stopped_after = "0s"\n')


def test_ps_folds_and_prune_removes_only_ended_servers(fold_now: None):
    ran = dd("up", "qwen3.6-27b", "-l", "tp1", "--port", str(free_port()), "--json")
    assert ran.returncode == 0, ran.stderr
    live = json.loads(ran.stdout)
    gone = dd("up", "qwen3.6-27b", "-l", "tp1", "--gpus", "5", "--port", str(free_port()), "--json")
    assert gone.returncode == 0, gone.stderr
    ended = json.loads(gone.stdout)
    try:
        assert dd("down", ended["id"], "--grace", "2").returncode == 0
        time.sleep(0.05)  # its end strictly in the past

        shown = dd("ps")
        assert live["id"] in shown.stdout
        assert ended["id"] not in shown.stdout
        assert "1 stopped server hidden; `ddconsole ps --all --demo` shows them" in shown.stdout
        everything = dd("ps", "--all", "--json")
        states = {s["id"]: s["state"] for s in json.loads(everything.stdout)}
        assert states == {live["id"]: "ready", ended["id"]: "stopped"}

        # Without a terminal and without --yes: refused, nothing removed.
        refused = dd("prune")
        assert refused.returncode == 2
        assert "confirm with --yes" in refused.stderr
        assert "would remove 1 stopped server:" in refused.stdout  # not "removing"
        dry = dd("prune", "--dry-run", "--json")
        assert dry.returncode == 0
        assert [(r["id"], r["result"]) for r in json.loads(dry.stdout)] == [
            (ended["id"], "would remove")
        ]
        assert Path(ended["log_path"]).exists()

        # On a terminal it lists what goes and asks; "n" keeps everything.
        code, text = on_a_terminal(["prune"], "n")
        assert code == 1, text
        assert ended["id"] in text
        assert live["id"] not in text
        assert "nothing removed" in text
        assert Path(ended["log_path"]).exists()

        code, text = on_a_terminal(["prune", "--older-than", "0"], "y")
        assert code == 0, text
        assert f"removed {ended['id']}" in text
        assert not Path(ended["log_path"]).exists()
        servers = StatePaths.for_mode(True).servers
        assert not (servers / f"{ended['id']}.json").exists()
        # The live server keeps its record and log, and still runs.
        assert Path(live["log_path"]).exists()
        after = json.loads(dd("ps", "--all", "--json").stdout)
        assert [(s["id"], s["state"]) for s in after] == [(live["id"], "ready")]
        assert dd("prune", "--yes", "--older-than", "0").stdout.startswith("nothing to prune")
    finally:
        dd("down", "--all", "--grace", "2")


def test_prune_rejects_a_bad_duration(cli):
    result = cli("prune", "--older-than", "soon")
    assert result.code == 2
    assert "argument --older-than: 'soon' is not a duration" in result.err


def test_ps_and_down_without_demo_point_at_the_demo_servers(cli):
    """Demo servers live in their own state dir: `ps`/`down --all` without --demo say so
    instead of looking empty (F3 of the new-user trial)."""
    servers = StatePaths.for_mode(True).ensure().servers
    servers.mkdir(parents=True, exist_ok=True)
    (servers / "qwen3.6-27b-tp1-1.json").write_text("{}")
    shown = cli("ps")
    assert shown.code == 0
    assert "no managed servers; 1 demo server: `ddconsole ps --demo`" in shown.out
    stopped = cli("down", "--all")
    assert stopped.code == 0
    assert "no managed servers to stop; 1 demo server: `ddconsole down --all --demo`" in (
        stopped.out
    )


def test_a_damaged_config_warns_ps_and_stops_prune(cli, isolated_dirs: Path):
    """Listing servers survives a bad config.toml (a warning, the default age); prune, which
    removes files by that age, refuses until the file is fixed or --older-than is given."""
    folder = isolated_dirs / "xdg_config_home" / "ddconsole"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text('[console]\nfold_stopped_after = "soon"\n')
    listed = cli("ps", "--demo")
    assert listed.code == 0
    assert "config.toml: console.fold_stopped_after: 'soon' is not a duration" in listed.err
    assert "folding after 1h" in listed.err
    refused = cli("prune", "--demo")
    assert refused.code == 2
    assert "config.toml: console.fold_stopped_after" in refused.err
    assert cli("prune", "--demo", "--older-than", "2d").code == 0
