"""States are true on the dashboard (issue 16): the now line of a stopped or failed server
shows no live figures, only its last ones, marked `last`, with how long before they were read."""

from __future__ import annotations

import pytest

from console.telemetry.store import TimeSeriesStore
from console.tui.views import ServerView
from console.tui.widgets.now_line import now_line
from tests.export.test_stopped_servers import lifecycle, sample


def store_with(server_id: str, t: float) -> TimeSeriesStore:
    store = TimeSeriesStore(100)
    store.put_latest(sample(t, server_id, 26.0))
    store.commit()
    return store


def test_a_ready_server_shows_its_figures_as_now():
    view = ServerView.from_json(lifecycle("qwen", "ready", 30101))
    text = now_line(store_with("qwen", 100.0), view, now=101.0).plain
    assert text.startswith("now qwen")
    assert "tok/s 26.0" in text
    assert "running 1" in text


@pytest.mark.parametrize("state", ["failed", "stopped"])
def test_a_stopped_server_shows_last_values_never_as_now(state: str):
    view = ServerView.from_json(lifecycle("kimi", state, 30102))
    text = now_line(store_with("kimi", 100.0), view, now=130.0).plain
    assert not text.startswith("now")
    assert "tok/s 26.0" not in text
    assert "running 1 " not in text
    assert text.startswith(f"{state} kimi")
    assert "no live figures · last 26.0 tok/s, running 1, queued 2" in text
    assert "read 30 s before now" in text


def test_a_stopped_server_that_never_reported_says_so():
    view = ServerView.from_json(lifecycle("kimi", "stopped", 30102))
    text = now_line(TimeSeriesStore(100), view, now=130.0).plain
    assert "no live figures (none were read before it stopped)" in text
