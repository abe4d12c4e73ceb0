"""`ddconsole runs stop RUN` and `console.bench.cancel`: a detached campaign or benchmark is
stopped as Ctrl-C stops it (the level in progress recorded as interrupted, the summary
rebuilt, the servers the campaign launched stopped, the run resumable), and only the run's
own runner is ever signalled. Demo mode, free ports, real detached runner processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.bench.cancel import RunNotRunning, UnknownRun, stop_prompt, stop_run
from console.bench.results import CANCELLED
from console.core.net import free_port
from tests.conftest import REPO, run_cli_subprocess
from tests.ptyrun import run_on_pty

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("free_port_profiles")]


@pytest.fixture(autouse=True)
def slow_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Simulators slow enough that a run is still going when it is stopped; nothing left
    running whatever the test did."""
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "4")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=os.environ.copy())


def campaign_file(tmp_path: Path, *, requests: int = 24) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(
        'name = "sweep"\nprofile = "qwen3.6-27b"\nlayouts = ["tp1"]\n'
        f'variants = ["off", "ddtree-b15"]\nconcurrency = [1, 2]\nrequests = {requests}\n'
        f"input_len = 64\noutput_len = 64\nport = {free_port()}\n"
    )
    return path


def start_detached(*args: str) -> dict[str, object]:
    result = run_cli_subprocess("--demo", *args, "--detach", "--json", timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    detached: dict[str, object] = json.loads(result.stdout)
    return detached


def wait_requests(run_dir: Path, count: int, timeout: float = 120) -> None:
    """Until the run has finished `count` requests (it is then mid-level)."""
    deadline = time.monotonic() + timeout
    path = run_dir / "requests.jsonl"
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"{run_dir.name}: fewer than {count} requests after {timeout:.0f} s")


def servers_running() -> list[str]:
    listed = run_cli_subprocess("--demo", "ps", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    return [s["id"] for s in json.loads(listed.stdout) if s["state"] not in ("stopped", "failed")]


def test_runs_stop_stops_a_campaign_cleanly_and_it_resumes(tmp_path: Path) -> None:
    source = campaign_file(tmp_path)
    detached = start_detached("campaign", str(source))
    run_dir = Path(str(detached["run_dir"]))
    run_id = str(detached["run_id"])
    wait_requests(run_dir, 2)
    runner_pid = int(str(detached["pid"]))
    # While it runs, `runs list` says where it is: the level, requests done, an ETA.
    listed = run_cli_subprocess("--demo", "runs", "list")
    assert "running: level 1 of 2, " in listed.stdout
    assert "/24 requests, ETA " in listed.stdout

    # Not a TTY: no question asked. A prefix of the id names the run.
    stopped = run_cli_subprocess("--demo", "runs", "stop", run_id[:17], "--json", timeout=90)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    outcome = json.loads(stopped.stdout)
    assert outcome["run_id"] == run_id
    assert outcome["status"] == "interrupted"
    assert outcome["pid"] == runner_pid
    assert outcome["resume"] == f"ddconsole campaign {source} --resume {run_id} --demo"
    assert outcome["message"].startswith(f"stopped campaign {run_id}: 0 of 2 cells done")

    # The runner is gone, its claim released, the level recorded as interrupted with what
    # it had finished, and the server it launched stopped.
    assert not Path(f"/proc/{runner_pid}").exists() or _zombie(runner_pid)
    assert not (run_dir / "owner.json").exists()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "interrupted"
    levels = [json.loads(line) for line in (run_dir / "levels.jsonl").read_text().splitlines()]
    assert levels[-1]["status"] == "interrupted"
    # The request in flight is recorded as cancelled, and is no error of the server's.
    rows = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    cancelled = [r for r in rows if r["error"] == CANCELLED]
    assert cancelled
    assert all(
        (r["cell"], r["level"]) == (levels[-1]["cell"], levels[-1]["level"]) for r in cancelled
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    stopped_level = summary["cells"][0]["levels"][-1]
    assert stopped_level["status"] == "interrupted"
    assert stopped_level["errors"] == 0
    assert stopped_level["requests"] == len(rows) - len(cancelled)
    assert servers_running() == []
    listed = json.loads(run_cli_subprocess("--demo", "ps", "--all", "--json").stdout)
    assert [s["reason"] for s in listed] == ["campaign stopped"]

    # Nothing left to stop: exit 1 with a reason; an unknown run: exit 2.
    again = run_cli_subprocess("--demo", "runs", "stop", run_id, "--yes")
    assert again.returncode == 1
    assert f"run {run_id} is not running (interrupted)" in again.stderr
    unknown = run_cli_subprocess("--demo", "runs", "stop", "no-such-run", "--yes")
    assert unknown.returncode == 2
    assert "unknown run 'no-such-run'" in unknown.stderr

    # Resumable: the command it printed finishes the campaign (a faster simulator now).
    resumed = _resume(source, run_id)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert [c["status"] for c in json.loads(resumed.stdout)["cells"]] == ["done", "done"]


def _resume(source: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    argv = ["--demo", "campaign", str(source), "--resume", run_id, "--json"]
    return subprocess.run(
        [sys.executable, "-m", "console", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": "40"},
    )


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


def test_stop_run_stops_a_benchmark_and_asks_first_on_a_tty(tmp_path: Path) -> None:
    port = str(free_port())
    up = run_cli_subprocess(
        "--demo", "up", "qwen3.6-27b", "-l", "tp1", "-v", "off", "--port", port, "--json",
        timeout=90,
    )  # fmt: skip
    assert up.returncode == 0, up.stdout + up.stderr
    server = json.loads(up.stdout)["id"]
    detached = start_detached(
        "bench", "--server", server, "--concurrency", "1", "--requests", "200",
        "--input-len", "64", "--output-len", "64",
    )  # fmt: skip
    run_dir = Path(str(detached["run_dir"]))
    run_id = str(detached["run_id"])
    wait_requests(run_dir, 1)

    question = stop_prompt(run_dir)
    assert question.startswith("stop benchmark ")
    assert "level 1, " in question

    # On a terminal the question is asked; anything but y keeps the run going.
    declined = _on_tty(["--demo", "runs", "stop", run_id], answer="n\n")
    assert declined[0] == 1
    assert "[y/N]" in declined[1]
    assert "not stopped" in declined[1]
    assert (run_dir / "owner.json").exists()

    message = stop_run(run_dir, timeout_s=60)
    assert message.startswith(f"stopped run {run_id}: 0 of 1 cell done; results in ")
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    # A benchmark does not stop the server it was given.
    assert servers_running() == [server]
    with pytest.raises(RunNotRunning, match="not running"):
        stop_run(run_dir)
    with pytest.raises(UnknownRun):
        stop_run(tmp_path / "nowhere")


def _on_tty(args: list[str], *, answer: str) -> tuple[int, str]:
    """`ddconsole ARGS` on a pseudo-terminal; `answer` is typed once it asks."""
    return run_on_pty(args, answer=answer, timeout=60)


def test_a_stranger_at_the_owners_pid_is_never_signalled(tmp_path: Path) -> None:
    """owner.json names a pid now used by another program (a later start time): the run
    is not running and that program keeps running."""
    from console.bench.rundir import RunDir
    from console.bench.runmeta import RunMeta
    from console.hw.procs import process_info

    run = RunDir.create(tmp_path / "runs", "stale", RunMeta(kind="campaign", status="running"))
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        info = process_info(stranger.pid)
        assert info is not None
        (run.path / "owner.json").write_text(
            json.dumps({"pid": stranger.pid, "start_ticks": info.start_ticks - 1})
        )
        with pytest.raises(RunNotRunning, match="is not running"):
            stop_run(run.path, timeout_s=2)
        # No start time recorded: a program that is not ddconsole is not trusted either.
        (run.path / "owner.json").write_text(json.dumps({"pid": stranger.pid}))
        with pytest.raises(RunNotRunning):
            stop_run(run.path, timeout_s=2)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
