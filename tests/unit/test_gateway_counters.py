"""A level's counters through SGLang's model gateway carry the workers they were summed over:
an increase across readings of other workers is no increase."""

from __future__ import annotations

from console.bench.results import Counters

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
