"""scripts/prometheus-setup: idempotent, honours DDCONSOLE_PROMETHEUS, and the tests' skip."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.promproc import prometheus_binary as find_prometheus

SETUP = str(REPO / "scripts" / "prometheus-setup")


def test_setup_finds_the_same_binary_again(prometheus_binary):
    again = subprocess.run([SETUP], capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == prometheus_binary
    version = subprocess.run(
        [prometheus_binary, "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    assert "prometheus, version" in (version.stdout + version.stderr)


def test_a_named_binary_that_is_not_one_is_refused(tmp_path: Path):
    env = {**os.environ, "DDCONSOLE_PROMETHEUS": str(tmp_path / "nothing")}
    done = subprocess.run([SETUP], capture_output=True, text=True, env=env, timeout=30, check=False)
    assert done.returncode == 1
    assert "DDCONSOLE_PROMETHEUS=" in done.stderr
    assert "is not an executable" in done.stderr


def test_skip_variable_gives_the_reason(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DDCONSOLE_SKIP_PROMETHEUS", "1")
    assert find_prometheus() == (None, "DDCONSOLE_SKIP_PROMETHEUS=1 was set")
