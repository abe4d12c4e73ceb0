"""Shared fixtures: isolated XDG folders, the CLI in-process, marker gating."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Captured before any fixture repoints XDG folders: where the sglang venv is cached.
REAL_CACHE_HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own config, state and cache folders."""
    home = tmp_path / "xdg"
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        folder = home / name.lower()
        folder.mkdir(parents=True)
        monkeypatch.setenv(name, str(folder))
    return home


@pytest.fixture
def user_profiles(isolated_dirs: Path) -> Path:
    folder = isolated_dirs / "xdg_config_home" / "ddconsole" / "profiles"
    folder.mkdir(parents=True)
    return folder


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run `ddconsole ARGS...` in-process; returns exit code, stdout and stderr."""
    from console.cli import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def run_cli_subprocess(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or os.environ.copy(),
        cwd=REPO,
        check=False,
    )


def _nvml_available() -> str | None:
    from console.hw.backend import GpuUnavailable
    from console.hw.nvml import NvmlBackend

    backend = NvmlBackend()
    try:
        backend.open()
        count = backend.device_count()
    except GpuUnavailable as exc:
        return exc.reason
    finally:
        backend.close()
    return None if count > 0 else "NVML reports no GPU"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items:
        reason = _nvml_available()
        if reason is not None:
            for item in gpu_items:
                item.add_marker(pytest.mark.skip(reason=f"no GPU here: {reason}"))
    if os.environ.get("DDCONSOLE_SKIP_SGLANG") == "1":
        for item in items:
            if item.get_closest_marker("sglang"):
                item.add_marker(pytest.mark.skip(reason="DDCONSOLE_SKIP_SGLANG=1 was set"))


@pytest.fixture(scope="session")
def sglang_python() -> str:
    """The interpreter of a venv with the real sglang==0.5.23 (built once, cached)."""
    env = os.environ.copy()
    env.setdefault("DDCONSOLE_SGLANG_VENV", str(REAL_CACHE_HOME / "ddconsole" / "sglang-0.5.23"))
    completed = subprocess.run(
        [str(REPO / "scripts" / "sglang-venv")],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    if completed.returncode != 0:
        pytest.fail(f"building the sglang venv failed:\n{completed.stderr[-3000:]}")
    return completed.stdout.strip().splitlines()[-1]
