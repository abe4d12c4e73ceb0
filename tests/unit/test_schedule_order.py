"""The suite's test order (tests/conftest.py `scheduled`) spreads the long tests over the
chunks that xdist's `load` scheduler hands each worker first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import pytest

from tests.conftest import scheduled


@dataclass(frozen=True)
class FakeItem:
    """What `scheduled` reads of a test item: its name and its markers."""

    name: str
    marker: str | None = None

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == self.marker else None


def suite(sglang: int, slow: int, rest: int) -> list[pytest.Item]:
    items = [
        *(FakeItem(f"rest{i}") for i in range(rest // 2)),
        *(FakeItem(f"slow{i}", "slow") for i in range(slow)),
        *(FakeItem(f"sglang{i}", "sglang") for i in range(sglang)),
        *(FakeItem(f"rest{i}") for i in range(rest // 2, rest)),
    ]
    return cast(list[pytest.Item], items)


def first_chunks(order: list[pytest.Item], workers: int) -> list[list[str]]:
    """What each worker is handed first (xdist/scheduler/load.py, `schedule`)."""
    size = max(len(order) // workers // 4, 2)
    return [[item.name for item in order[w * size : (w + 1) * size]] for w in range(workers)]


def test_real_sglang_tests_go_to_one_worker_and_slow_ones_to_the_others() -> None:
    items = suite(sglang=70, slow=72, rest=1500)
    order = scheduled(items, 4)
    assert sorted(i.name for i in order) == sorted(i.name for i in items)
    first, *others = first_chunks(order, 4)
    assert [n for n in first if n.startswith("sglang")] == [f"sglang{i}" for i in range(70)]
    assert first[:70] == [f"sglang{i}" for i in range(70)]  # before the short ones
    slow_per_worker = [sum(n.startswith("slow") for n in chunk) for chunk in others]
    assert slow_per_worker == [24, 24, 24]
    for chunk in others:
        assert all(n.startswith("slow") for n in chunk[:24])


def test_long_tests_beyond_the_first_chunks_come_next_in_order() -> None:
    items = suite(sglang=6, slow=40, rest=40)  # 86 items: chunks of 5
    order = scheduled(items, 4)
    assert sorted(i.name for i in order) == sorted(i.name for i in items)
    chunks = first_chunks(order, 4)
    assert chunks[0] == [f"sglang{i}" for i in range(5)]
    assert all(name.startswith("slow") for chunk in chunks[1:] for name in chunk)
    after = [item.name for item in order[20:]]
    # The long ones that did not fit come before every short one.
    assert after[: 1 + 40 - 15] == ["sglang5", *(f"slow{i}" for i in range(15, 40))]
    assert all(name.startswith("rest") for name in after[26:])


def test_one_process_runs_the_long_tests_first() -> None:
    names = [item.name for item in scheduled(suite(sglang=2, slow=3, rest=4), 1)]
    assert names == [
        "sglang0",
        "sglang1",
        "slow0",
        "slow1",
        "slow2",
        "rest0",
        "rest1",
        "rest2",
        "rest3",
    ]
