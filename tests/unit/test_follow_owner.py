"""`runs show --follow` right after a detached start: the runner may not have claimed the run
yet (a loaded box), and the follower must wait for it instead of reading the run as ended."""

from __future__ import annotations

import io
import os
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

from console.bench.rundir import RunDir
from console.bench.runmeta import RunMeta
from console.cli.cmd_runs import OWNER_WAIT_S, _follow


def _runner(run: RunDir, claim_after_s: float, run_for_s: float) -> None:
    """What a detached runner does, in campaign.py's order: claim, `running`, final status
    while still owned, release."""
    time.sleep(claim_after_s)
    run.claim()
    run.update_meta(lambda meta: replace(meta, status="running", pid=os.getpid()))
    time.sleep(run_for_s)
    run.update_meta(lambda meta: replace(meta, status="done", ended_wall=time.time()))
    run.release()


def test_the_follower_waits_for_a_runner_that_has_not_claimed_the_run_yet(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "sweep", RunMeta(kind="campaign", status="created"))
    runner = threading.Thread(target=_runner, args=(run, 1.0, 0.5))
    runner.start()
    try:
        _follow(run, io.StringIO())
        # Followed to the end: the runner had written its final status when it ended.
        assert run.meta().status == "done"
    finally:
        runner.join()


def test_a_running_run_whose_process_is_gone_ends_the_follow_at_once(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    run = RunDir.create(tmp_path, "sweep", RunMeta(kind="campaign", status="running", pid=dead.pid))
    started = time.monotonic()
    _follow(run, io.StringIO())
    # Killed runner: no wait for it (a bound far above noise, far below the wait).
    assert time.monotonic() - started < OWNER_WAIT_S / 2


def test_an_ended_run_without_owner_is_not_waited_for(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "sweep", RunMeta(kind="campaign", status="done"))
    started = time.monotonic()
    _follow(run, io.StringIO())
    assert time.monotonic() - started < OWNER_WAIT_S / 2
