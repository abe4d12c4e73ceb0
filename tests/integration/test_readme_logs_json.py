"""`logs --json` (the README: every verb that prints data accepts --json): one object with the
server's status and its log lines; with -f, JSON lines until the server ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from console.core.net import free_port
from tests.conftest import REPO


def dd(*args: str, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "console", *args, "--demo"],
        capture_output=True,
        text=True,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": "20"},
        cwd=REPO,
        timeout=90,
        check=False,
        **kwargs,
    )


def test_logs_json_once_and_following():
    up = dd("up", "qwen3.6-27b", "-l", "tp1", "--port", str(free_port()), "--json")
    assert up.returncode == 0, up.stderr
    server_id = json.loads(up.stdout)["id"]
    follow = subprocess.Popen(
        [sys.executable, "-m", "console", "logs", server_id, "-f", "--json", "--demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        once = dd("logs", server_id, "--json")
        assert once.returncode == 0, once.stderr
        report = json.loads(once.stdout)
        assert report["server"]["id"] == server_id
        assert report["server"]["state"] == "ready"
        assert any("The server is fired up and ready to roll!" in line for line in report["lines"])

        assert dd("down", server_id, "--grace", "2").returncode == 0
        out, err = follow.communicate(timeout=60)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.communicate()
        dd("down", "--all", "--grace", "2")
    assert follow.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert events[0]["server"]["id"] == server_id
    assert any("line" in e for e in events[1:-1])
    assert events[-1]["end"] == "stopped"
