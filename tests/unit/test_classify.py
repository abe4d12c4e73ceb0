"""Failure classification on log lines as real SGLang 0.5.23 writes them."""

from __future__ import annotations

import pytest

from console.server.classify import MEMORY_KINDS, Failure, classify, is_error_line, is_warning
from console.server.milestones import (
    LogFollower,
    Milestone,
    Phase,
    log_timestamp,
    milestone,
    tail_lines,
)
from tests.sglang_corpus import Entry, entries, failure_log


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


# --- the SGLang 0.5.23 corpus (tests/fixtures/sglang-0.5.23/corpus.toml) ----------------------

FAILURES = entries("failure")


@pytest.mark.parametrize("entry", FAILURES, ids=lambda entry: entry.id)
def test_every_corpus_failure_in_a_whole_log(entry: Entry) -> None:
    """Framed as SGLang writes it (startup, a startup warning, the traceback, the leader's
    SIGQUIT line) and with the exit status SGLang ends with (-9 after a child's failure)."""
    lines, code = failure_log(entry)
    failure = classify(code, lines, stop_requested=False)
    assert failure is not None
    assert (failure.kind, entry.id) == (entry.kind, entry.id)
    assert entry.reason in failure.reason
    assert failure.line is not None
    assert not is_warning(failure.line)
    assert failure.index is not None
    assert lines[failure.index] == failure.line


@pytest.mark.parametrize("entry", FAILURES, ids=lambda entry: entry.id)
def test_every_corpus_failure_text_alone(entry: Entry) -> None:
    """Only the text itself, as the last lines a tail shows, with an exit status that says
    nothing (a SIGKILL): the text decides."""
    failure = classify(-9, entry.example_lines, stop_requested=False)
    assert failure is not None
    if entry.kind == "scheduler-exception":
        # Without the "hit an exception" line it is just a traceback's last line.
        assert failure.kind == "killed"
        assert entry.example in failure.reason
        return
    assert failure.kind == entry.kind
    assert "SIGKILL" not in failure.reason


@pytest.mark.parametrize("warning", entries("warning"), ids=lambda entry: entry.id)
def test_a_warning_never_outranks_an_error(warning: Entry) -> None:
    """SGLang's startup warnings say "is incompatible with"; they are not import errors, and
    an error that follows them is the reason."""
    lines = [*warning.example_lines, "RuntimeError: CUDA error: an illegal memory access"]
    failure = classify(-9, lines, stop_requested=False)
    assert failure is not None
    assert failure.kind == "cuda-error"
    alone = classify(-9, warning.example_lines, stop_requested=False)
    assert alone is not None
    assert alone.kind == "killed"
    assert not is_error_line(warning.example)


def test_uvicorn_and_python_warnings_are_not_errors() -> None:
    for line in (
        "[2026-12-01 10:02:30] WARNING:  Invalid HTTP request received.",
        "/venv/lib/python3.11/site-packages/torch/cuda/__init__.py:63: FutureWarning: The "
        "pynvml package is deprecated. ImportError is raised when it is missing.",
    ):
        assert not is_error_line(line)
        assert classify(0, [line], stop_requested=False) == Failure(
            "exited", "exited on its own (status 0)", (line,)
        )


def test_sigkill_after_a_scheduler_exception_reads_as_that_exception() -> None:
    """sglang 0.5.23 srt/managers/scheduler.py:6372 then srt/utils/common.py:2550-2552."""
    (entry,) = [e for e in FAILURES if e.id == "kv-pool-oom"]
    lines, code = failure_log(entry)
    assert code == -9
    failure = classify(code, lines, stop_requested=False)
    assert failure is not None
    assert failure.kind in MEMORY_KINDS
    assert "SIGKILL" not in failure.reason
    assert failure.reason == (
        "not enough GPU memory for the KV cache: Not enough memory. Please try to increase "
        "--mem-fraction-static. Current value: mem_fraction_static=0.85"
    )


def test_the_first_error_is_the_cause_not_the_other_ranks_cascade() -> None:
    lines = [
        "[2026-12-01 10:01:19 TP1] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "scheduler.py", line 6362, in run_scheduler_process',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 1 has a "
        "total capacity of 94.97 GiB of which 0.10 GiB is free.",
        "",
        "[2026-12-01 10:01:19 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3690, remote "
        "process exited or there was a network error",
        "[2026-12-01 10:01:20] Received sigquit from a child process. It usually means the "
        "child failed.",
    ]
    failure = classify(-9, lines, stop_requested=False)
    assert failure is not None
    assert failure.reason == "CUDA out of memory: tried to allocate 1.00 GiB, GPU 1"
    assert failure.index == 2


def test_a_sigquit_without_its_traceback_is_still_a_child_failure() -> None:
    lines = [
        "[2026-12-01 10:01:20] Received sigquit from a child process. It usually means the "
        "child failed."
    ]
    failure = classify(-9, lines, stop_requested=False)
    assert failure is not None
    assert failure.kind == "scheduler-exception"


def test_gated_repo_says_where_to_accept_the_licence() -> None:
    (entry,) = [e for e in FAILURES if e.id == "gated-repo"]
    failure = classify(1, entry.example_lines, stop_requested=False)
    assert failure is not None
    assert failure.reason == (
        "gated model repo: accept its licence at "
        "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct and set HF_TOKEN"
    )


@pytest.mark.parametrize("entry", entries("milestone"), ids=lambda entry: entry.id)
def test_every_corpus_milestone(entry: Entry) -> None:
    found = milestone(entry.example)
    assert found is not None
    assert (found.phase.value, found.label) == (entry.phase, entry.label)
    assert log_timestamp(entry.example) == entry.example[1:20]


@pytest.mark.parametrize("prefix", ["", " TP3", " DP1 TP0", " DP0 PP1 TP2 EP2"])
@pytest.mark.parametrize(
    "what", ["target decode", "target verify", "target prefill", "draft decode", "draft extend"]
)
def test_cuda_graph_phase_with_every_rank_prefix(prefix: str, what: str) -> None:
    line = f"[2026-12-01 10:01:16{prefix}] Capture {what} CUDA graph begin. avail mem=8.21 GB"
    assert milestone(line) == Milestone(Phase.LOADING, f"capturing CUDA graph: {what}")
    end = line.replace("begin.", "end.")
    assert milestone(end) == Milestone(Phase.LOADING, f"CUDA graph captured: {what}")


def test_no_milestone_for_other_lines() -> None:
    for line in (
        "[2026-12-01 10:03:00] Decode batch, #running-req: 32, cuda graph: True",
        "[2026-12-01 10:00:01] Breakable CUDA graph is incompatible with x; disabling prefill "
        "CUDA graph.",
    ):
        assert milestone(line) is None


def test_a_request_error_while_serving_is_not_a_configuration_error() -> None:
    """A ValueError the server logged and kept serving after ended nothing; one the log ends
    with (argument resolution, sglang 0.5.23 srt/arg_groups/speculative_hook.py:324-327) did."""
    error = "ValueError: The input (40000 tokens) is longer than the model's context length."
    served = [
        "[2026-12-01 10:02:40] The server is fired up and ready to roll!",
        "Traceback (most recent call last):",
        error,
        "[2026-12-01 10:05:00] Decode batch, #running-req: 1, #token: 120",
    ]
    failure = classify(-9, served, stop_requested=False)
    assert failure is not None
    assert failure.reason == "killed by SIGKILL"
    ended = classify(1, served[:3], stop_requested=False)
    assert ended is not None
    assert ended.kind == "config-error"
