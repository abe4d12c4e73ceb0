"""`ddconsole sim` takes SGLang's arguments as the README writes them: the README's own line
(read from README.md), on a free port, serves the model it names and stops on Ctrl-C with
status 0, also when the Ctrl-C comes during warm-up: SGLang warms up on a thread beside the
already-serving HTTP server (sglang 0.5.23 srt/entrypoints/http_server.py:450-454)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from console.core.net import free_port
from tests.integration.test_readme_commands import readme_commands

DDCONSOLE = Path(sys.executable).with_name("ddconsole")


def test_the_readme_sim_line_runs_a_simulator(tmp_path: Path):
    lines = [c.text for c in readme_commands() if c.text.startswith("ddconsole sim ")]
    assert len(lines) == 1
    argv = shlex.split(lines[0].replace("\\\n", " "))
    assert "--port" in argv
    port = free_port()
    argv[argv.index("--port") + 1] = str(port)  # the suite holds the README's 30000
    proc = subprocess.Popen(
        [str(DDCONSOLE), *argv[1:]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("DDCONSOLE_SIM_")},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "the simulator exited"
            try:
                models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
                if models.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the simulator never answered"
            time.sleep(0.2)
        assert [m["id"] for m in models.json()["data"]] == ["qwen3.6-27b"]
        info = httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=5).json()
        assert info["model_path"] == "Qwen/Qwen3.6-27B"
        assert info["enable_metrics"] is True
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=30)
        assert proc.stdout is not None
        output = proc.stdout.read().decode(errors="replace")
        proc.stdout.close()
    assert code == 0, output[-2000:]
    assert "The server is fired up and ready to roll!" in output
    assert "unrecognized arguments" not in output
