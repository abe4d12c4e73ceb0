"""A level's counters through SGLang's model gateway carry the workers they were summed over:
an increase across readings of other workers is no increase."""

from __future__ import annotations

import json
from pathlib import Path

from console.bench.results import Counters
from console.bench.workers import level_table, level_workers

A = "http://127.0.0.1:41101"
B = "http://127.0.0.1:41102"


def test_the_workers_round_trip_through_the_level_record() -> None:
    counters = Counters(
        generation_tokens=120.0,
        spec_verify_calls=30.0,
        workers=(A, B),
        worker_generation_tokens=(70.0, 50.0),
    )
    data = counters.to_json()
    assert data["workers"] == [A, B]
    assert data["worker_generation_tokens"] == [70.0, 50.0]
    assert Counters.from_json(data) == counters
    # One server's /metrics: no workers key, as before.
    plain = Counters(generation_tokens=5.0)
    assert "workers" not in plain.to_json()
    assert Counters.from_json(plain.to_json()) == plain


def test_an_increase_is_none_when_the_gateway_workers_changed() -> None:
    before = Counters(generation_tokens=100.0, spec_verify_calls=20.0, workers=(A, B))
    same = Counters(generation_tokens=400.0, spec_verify_calls=80.0, workers=(A, B))
    assert before.delta(same, "generation_tokens") == 300.0
    assert before.delta(same, "spec_verify_calls") == 60.0
    # B was killed and removed mid-level (A alone now), or a new worker joined with its
    # lifetime's counts: neither sum's difference is this level's.
    fewer = Counters(generation_tokens=250.0, spec_verify_calls=50.0, workers=(A,))
    assert before.delta(fewer, "generation_tokens") is None
    more = Counters(generation_tokens=900.0, spec_verify_calls=90.0, workers=(A, B, "c"))
    assert before.delta(more, "spec_verify_calls") is None


def test_a_worker_that_restarted_mid_level_voids_the_increase() -> None:
    before = Counters(
        generation_tokens=1000.0,
        spec_verify_calls=200.0,
        workers=(A, B),
        worker_generation_tokens=(600.0, 400.0),
    )
    # B restarted (its counters from zero) while A grew more than B had counted: the sum
    # still grows, but 1100 - 1000 is not this level's tokens.
    restarted = Counters(
        generation_tokens=1100.0,
        spec_verify_calls=230.0,
        workers=(A, B),
        worker_generation_tokens=(1050.0, 50.0),
    )
    assert before.delta(restarted, "generation_tokens") is None
    assert before.delta(restarted, "spec_verify_calls") is None
    grown = Counters(
        generation_tokens=1500.0,
        spec_verify_calls=300.0,
        workers=(A, B),
        worker_generation_tokens=(900.0, 600.0),
    )
    assert before.delta(grown, "generation_tokens") == 500.0


def _level(
    level: int,
    before: tuple[float, float],
    after: tuple[float, float],
    after_workers: tuple[str, ...] = (A, B),
) -> str:
    """A levels.jsonl line through a gateway of workers A and B (their own counts)."""
    from console.bench.results import LevelRecord

    record = LevelRecord(
        cell="qwen3.6-27b/dp2-gateway/off",
        level=level,
        label=f"concurrency {4 * (level + 1)}",
        wall_s=2.0,
        counters_before=Counters(
            workers=(A, B), worker_generation_tokens=before, worker_requests=(10.0, 10.0)
        ),
        counters_after=Counters(
            workers=after_workers,
            worker_generation_tokens=after,
            worker_requests=(14.0, 12.0),
        ),
    )
    return json.dumps(record.to_json())


def test_each_level_gets_its_own_per_worker_figures(tmp_path: Path) -> None:
    (tmp_path / "levels.jsonl").write_text(
        "\n".join(
            [
                _level(0, (100.0, 100.0), (400.0, 200.0)),
                _level(1, (400.0, 200.0), (450.0, 20.0)),  # B restarted: left out
                _level(2, (450.0, 20.0), (500.0, 60.0), after_workers=(A,)),  # B gone
            ]
        )
        + "\n"
    )
    [level] = level_workers(tmp_path)
    assert (level.level, level.label, level.seconds) == (0, "concurrency 4", 2.0)
    a, b = level.workers
    assert (a.worker, a.output_tokens, a.requests, a.output_tok_s) == (A, 300, 4, 150.0)
    assert (b.worker, b.output_tokens, b.requests, b.output_tok_s) == (B, 100, 2, 50.0)
    assert (a.share, b.share) == (0.75, 0.25)
    table = level_table([level])
    assert table is not None
    assert f"concurrency 4: {A} 300 tok 4 req 150.0 tok/s 75%" in table
    assert level_table([]) is None
