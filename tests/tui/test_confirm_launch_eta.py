"""A demo launch says when the server should be ready and counts down on its milestones
(the simulator's own load time, at the speed the demo servers run at)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest

from console.cli.services import Services
from tests.conftest import run_cli_subprocess

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("free_port_profiles")]


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "1")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=os.environ.copy())


def test_a_demo_launch_shows_its_eta_on_the_way_to_ready() -> None:
    backend = Services.create(demo=True).live_backend(recordings=None)
    lines: list[str] = []
    server = backend.launch(backend.plan("qwen3.6-27b", "tp1", "off"), lines.append)
    assert server.state == "ready"
    first = next(line for line in lines if "ready in about" in line)
    estimate = int(re.search(r"ready in about (\d+)s", first)[1])  # type: ignore[index]
    assert 3 <= estimate <= 20
    counted = [int(m[1]) for line in lines if (m := re.search(r"\(ETA (\d+)s\)$", line))]
    assert counted, lines
    assert counted == sorted(counted, reverse=True)
    assert all(left <= estimate for left in counted)
