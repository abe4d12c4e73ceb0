"""`ddconsole sim` takes SGLang's launch arguments as the README writes them (issue 17, F7):
`--model-path ...` and `--help` go to the simulator, not to ddconsole's parser."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from console.cli.parser import build_parser
from console.core.net import free_port
from tests.conftest import REPO


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["sim", "--model-path", "Q", "--port", "5"], ["--model-path", "Q", "--port", "5"]),
        (["sim", "--help"], ["--help"]),
        (["--demo", "sim", "-h"], ["-h"]),
        (["sim", "--", "--model-path", "Q"], ["--", "--model-path", "Q"]),
        (["sim"], []),
    ],
)
def test_every_argument_after_sim_is_the_simulators(argv: list[str], expected: list[str]) -> None:
    assert build_parser().parse_args(argv).sim_args == expected


def test_sim_help_after_model_path_prints_the_simulators_usage() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "console", "sim", "--model-path", "Qwen/Qwen3.6-27B", "--help"],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: sglang serve")
    assert "--model-path" in proc.stdout
    assert "unrecognized arguments" not in proc.stderr


@pytest.mark.parametrize("separator", [[], ["--"]])
def test_the_readmes_sim_command_serves(tmp_path: Path, separator: list[str]) -> None:
    port = free_port()
    argv = [
        sys.executable, "-m", "console", "sim", *separator,
        "--model-path", "Qwen/Qwen3.6-27B", "--served-model-name", "qwen3.6-27b",
        "--port", str(port), "--enable-metrics", "--sim-speed", "20",
    ]  # fmt: skip
    log = tmp_path / "sim.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
            env=os.environ.copy(), start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text(errors="replace")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["qwen3.6-27b"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(timeout=10)
