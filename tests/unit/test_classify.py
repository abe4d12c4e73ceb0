"""Failure classification on log lines as real SGLang 0.5.23 writes them."""

from __future__ import annotations

import pytest

from console.server.classify import classify
from console.server.milestones import LogFollower, Phase, milestone, tail_lines


@pytest.mark.parametrize(
    ("lines", "code", "kind", "reason"),
    [
        (
            [
                "OSError: Repo id must be in the form 'repo_name' or "
                "'namespace/repo_name': '/tmp/x'. Use repo_type argument if needed."
            ],
            1,
            "model-not-found",
            "model not found or hub unreachable",
        ),
        (
            [
                "sglang serve: error: argument --tp-size/--tensor-parallel-size: "
                "invalid int value: 'two'"
            ],
            2,
            "bad-flag",
            "unknown or invalid flag: argument --tp-size",
        ),
        (
            ["ModuleNotFoundError: No module named 'vllm'"],
            137,
            "import-error",
            "Python import or version mismatch: ModuleNotFoundError: No module named 'vllm'",
        ),
        (
            [
                "[2026-01-01 10:00:00 TP3] Watchdog caught collective operation timeout: WorkNCCL("
                "SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out."
            ],
            -6,
            "nccl",
            "NCCL error",
        ),
        (
            ["INFO:     Started server process [1]", "some normal line"],
            -9,
            "killed",
            "killed by SIGKILL",
        ),
        (["done"], 3, "exited", "exited with status 3"),
    ],
)
def test_real_sglang_failures(lines: list[str], code: int, kind: str, reason: str):
    failure = classify(code, lines, stop_requested=False)
    assert failure is not None
    assert failure.kind == kind
    assert failure.reason.startswith(reason)


def test_a_requested_stop_is_not_a_failure():
    assert (
        classify(-9, ["torch.OutOfMemoryError: CUDA out of memory."], stop_requested=True) is None
    )


def test_excerpt_shows_the_lines_around_the_cause():
    lines = (
        [f"line {i}" for i in range(10)]
        + ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB."]
        + ["after"]
    )
    failure = classify(1, lines, stop_requested=False)
    assert failure is not None
    assert "torch.OutOfMemoryError" in failure.excerpt[3]
    assert failure.reason == "CUDA out of memory: tried to allocate 2.50 GiB"


def _phase(line: str) -> Phase | None:
    found = milestone(line)
    return None if found is None else found.phase


def test_milestones():
    assert _phase("[2026-01-01 10:00:00] Load weight begin. avail mem=94.0 GB") is Phase.LOADING
    assert _phase("INFO:     Uvicorn running on http://127.0.0.1:30000") is Phase.WARMING
    assert _phase("[x] The server is fired up and ready to roll!") is Phase.READY
    assert _phase("Decode batch, #running-req: 1") is None


def test_log_follower_and_tail(tmp_path):
    path = tmp_path / "server.log"
    path.write_text("one\ntw")
    follower = LogFollower(str(path))
    assert follower.read_new_lines() == ["one"]
    with path.open("a") as handle:
        handle.write("o\nthree\n")
    assert follower.read_new_lines() == ["two", "three"]
    assert tail_lines(str(path), 2) == ["two", "three"]
    path.write_text("new\n")  # replaced
    assert follower.read_new_lines() == ["new"]
