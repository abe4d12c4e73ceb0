"""Benchmarks and campaigns start from a typed request stored in `run.json`, the same way
from the TUI's LiveBackend and from `ddconsole bench --detach`: the detached runner's command
line names only the run folder (no `bench`/`campaign` argv rebuilt from options), no TOML is
written, and the run then progresses to its end. Demo mode, free ports, real processes.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.bench.request import BenchRequest, CampaignRequest
from console.bench.runner_verb import RUNNER_VERB
from console.cli.services import Services
from console.core.net import free_port
from console.tui.backend import ActionRefused
from console.tui.live import LiveBackend
from tests.conftest import run_cli_subprocess

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("free_port_profiles")]


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fast simulators, and nothing left running whatever the test did."""
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=os.environ.copy())


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where `tempfile` writes, in this process and the ones it starts (a TOML written
    there to start work would show up)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return folder


def up_server(speed: str) -> str:
    """A ready qwen3.6-27b tp1 server on a free port; `speed` is its simulator's speed."""
    env = {**os.environ, "DDCONSOLE_SIM_SPEED": speed}
    port = str(free_port())
    result = run_cli_subprocess(
        "--demo", "up", "qwen3.6-27b", "-l", "tp1", "-v", "off", "--port", port, "--json",
        env=env, timeout=90,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return str(json.loads(result.stdout)["id"])


def runner_argv(run_dir: Path) -> list[str]:
    """The command line of the process that owns the run now."""
    owner = json.loads((run_dir / "owner.json").read_text())
    raw = Path(f"/proc/{owner['pid']}/cmdline").read_bytes()
    return [part.decode() for part in raw.split(b"\0") if part]


def wait_status(run_dir: Path, wanted: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        meta = json.loads((run_dir / "run.json").read_text())
        if meta["status"] == wanted and not (run_dir / "owner.json").exists():
            return dict(meta)
        time.sleep(0.2)
    raise AssertionError(f"{run_dir.name} not {wanted} after {timeout:.0f} s: {meta['status']}")


def expected_argv(run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "console", RUNNER_VERB, str(run_dir)]


def test_the_tui_starts_a_benchmark_and_a_campaign_from_typed_requests(temp_dir: Path) -> None:
    backend: LiveBackend = Services.create(demo=True).live_backend(recordings=None)
    # A slow simulator (speed 2): the benchmark is still running when its runner is read.
    server = up_server("2")

    request = BenchRequest(
        server_id=server[:8], concurrency=(1,), requests=6, input_len=64, output_len=32
    )
    run_id = backend.start_bench(request)
    run_dir = backend.runs_root / run_id
    assert runner_argv(run_dir) == expected_argv(run_dir)
    stored = json.loads((run_dir / "run.json").read_text())["request"]
    # The prefix the screen was given is stored as the server's full id.
    assert BenchRequest.from_json(stored) == BenchRequest(
        server_id=server, concurrency=(1,), requests=6, input_len=64, output_len=32
    )
    meta = wait_status(run_dir, "done")
    assert meta["cells"][0]["status"] == "done"
    levels = [json.loads(line) for line in (run_dir / "levels.jsonl").read_text().splitlines()]
    assert [(lv["status"], lv["level"]) for lv in levels] == [("done", 0)]
    assert "fingerprint" in meta  # written by the runner, which has the GPU backend

    # A campaign of one chosen cell, on the GPU and port the test picks (the server above
    # holds GPU 0).
    campaign = CampaignRequest.from_cells(
        (("qwen3.6-27b", "tp1", "ddtree-b15"),), concurrency=(1,), requests=3
    ).placed(gpus=(7,), port=free_port())
    run_id = backend.start_campaign(campaign)
    run_dir = backend.runs_root / run_id
    assert runner_argv(run_dir) == expected_argv(run_dir)
    stored = json.loads((run_dir / "run.json").read_text())["request"]
    assert CampaignRequest.from_json(stored) == campaign
    meta = wait_status(run_dir, "done")
    assert [c["status"] for c in meta["cells"]] == ["done"]
    assert meta["cells"][0]["cell_id"] == "qwen3.6-27b/tp1/ddtree-b15"

    # The demo sweep is a request too, placed beside what runs (GPU 0 is held).
    demo = backend.demo_campaign()
    assert demo.spec.gpus == [7]
    assert demo.spec.port is not None
    assert str(demo.source).endswith("qwen-ddtree-budgets.toml")

    assert list(temp_dir.rglob("*.toml")) == []


def test_cli_bench_detach_takes_the_same_path(temp_dir: Path) -> None:
    server = up_server("2")
    result = run_cli_subprocess(
        "--demo", "bench", "--server", server, "--concurrency", "1", "--requests", "6",
        "--input-len", "64", "--output-len", "32", "--detach", "--json",
        env=os.environ.copy(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    detached = json.loads(result.stdout)
    run_dir = Path(detached["run_dir"])
    assert detached["pid"] is not None
    assert runner_argv(run_dir) == expected_argv(run_dir)
    meta = json.loads((run_dir / "run.json").read_text())
    assert BenchRequest.from_json(meta["request"]) == BenchRequest(
        server_id=server, concurrency=(1,), requests=6, input_len=64, output_len=32
    )
    wait_status(run_dir, "done")
    shown = run_cli_subprocess("--demo", "runs", "show", detached["run_id"], "--json")
    summary = json.loads(shown.stdout)
    assert summary["cells"][0]["levels"][0]["requests"] == 6
    assert list(temp_dir.rglob("*.toml")) == []


def test_a_refused_request_makes_no_run(temp_dir: Path) -> None:
    backend: LiveBackend = Services.create(demo=True).live_backend(recordings=None)
    with pytest.raises(ActionRefused, match="no server 'nope'"):
        backend.start_bench(BenchRequest(server_id="nope", concurrency=(1,), requests=1))
    bad = CampaignRequest.from_cells((("qwen3.6-27b", "tp9", "off"),), concurrency=(1,), requests=1)
    with pytest.raises(ActionRefused, match="tp9"):
        backend.start_campaign(bad)
    assert not backend.runs_root.exists() or list(backend.runs_root.iterdir()) == []


def test_a_run_that_cannot_start_says_why_in_its_folder(tmp_path: Path) -> None:
    """The server went away between the request and its runner: detach reports the
    runner's reason, and the run is marked failed with it (not left 'created')."""
    from console.bench.launch import create_run, detach
    from console.core.errors import ConsoleError

    run = create_run(
        BenchRequest(server_id="gone-1", concurrency=(1,), requests=1),
        runs_root=tmp_path / "runs",
        name="gone",
        demo=True,
    )
    with pytest.raises(ConsoleError, match="no server 'gone-1'"):
        detach(run)
    meta = run.meta()
    assert meta.status == "failed"
    assert "no server 'gone-1'" in (meta.error or "")
