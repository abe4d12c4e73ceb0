"""The simulator's startup, logs, failures and exits against SGLang 0.5.23's real ones.

Every test runs `python -m console.sim` as a real process and reads its log and exit status.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import REPO
from tests.simproc import (
    MTP,
    QWEN,
    SMALL,
    running_sim,
    start_sim,
    stop_sim,
    wait_for_log,
    wait_ready,
)

SCHEDULER_LINES = (
    "Init parallel begin.",
    "Load weight begin.",
    "Load weight end.",
    "Memory pool end.",
    "Capture target decode CUDA graph begin.",
    "Capture target decode CUDA graph end.",
)
LAUNCH_SIGQUIT = "Received sigquit from a child process. It usually means the child failed."
SERVING_SIGQUIT = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."


def _prefixes(log: str, message: str) -> list[str]:
    """The bracket prefix (after the timestamp) of every line carrying `message`."""
    pattern = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d([^\]]*)\] " + re.escape(message), re.M)
    return pattern.findall(log)


@pytest.mark.parametrize(
    ("tp", "dp", "expected"),
    [
        (1, 1, [""]),
        (2, 1, [" TP0", " TP1"]),
        (1, 2, [" DP0", " DP1"]),
        (2, 2, [" DP0 TP0", " DP0 TP1", " DP1 TP0", " DP1 TP1"]),
    ],
)
def test_each_rank_logs_its_load_lines_with_its_prefix(
    tmp_path: Path, tp: int, dp: int, expected: list[str]
):
    """`[%(asctime)s{prefix}] ` with the scheduler's prefix (sglang 0.5.23
    srt/managers/scheduler.py:6279-6291, srt/utils/common.py:2630); the leader has none."""
    args = [*SMALL, "--tp-size", str(tp), "--dp-size", str(dp)]
    with running_sim(args, tmp_path, speed=50) as sim:
        log = sim.log()
    for message in SCHEDULER_LINES:
        assert _prefixes(log, message) == expected, message
    assert _prefixes(log, "The server is fired up and ready to roll!") == [""]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--pp-size", "2"], [" PP0", " PP1"]),
        (["--tp-size", "2", "--pp-size", "2"], [" PP0 TP0", " PP0 TP1", " PP1 TP0", " PP1 TP1"]),
        (["--tp-size", "4", "--ep-size", "2"], [" TP0 EP0", " TP1 EP0", " TP2 EP1", " TP3 EP1"]),
        (
            ["--tp-size", "2", "--dp-size", "2", "--pp-size", "2"],
            [f" DP{d} PP{p} TP{t}" for d in (0, 1) for p in (0, 1) for t in (0, 1)],
        ),
        # attn_cp_rank = tp_rank // (tp / cp), moe_dp_rank = tp_rank // (tp / moe_dp)
        # (srt/runtime_context.py:126-127).
        (
            ["--tp-size", "4", "--attn-cp-size", "2", "--moe-dp-size", "2"],
            [f" ATTN_CP{t // 2} MOE_DP{t // 2} TP{t}" for t in range(4)],
        ),
    ],
    ids=["pp2", "tp2-pp2", "tp4-ep2", "dp2-pp2-tp2", "tp4-cp2-moedp2"],
)
def test_pipeline_and_expert_ranks_show_in_prefixes_and_titles(
    tmp_path: Path, flags: list[str], expected: list[str]
):
    """` PP{p}` and ` EP{e}` join the prefix in SGLang's order, DP, PP, ..., TP, EP (sglang
    0.5.23 srt/managers/scheduler.py:6279-6291); the EP rank is tp_rank // (tp / ep)
    (srt/runtime_context.py:128-132); each pipeline stage is a scheduler of its own on its own
    GPU (srt/entrypoints/engine.py:931-937), and the title is the prefix with `_` (:6294)."""
    wanted = sorted("sglang::scheduler" + p.replace(" ", "_") for p in expected)
    with running_sim([*SMALL, *flags], tmp_path, speed=50) as sim:
        log = sim.log()
        # Each child retitles itself once its interpreter is up: wait for them.
        deadline = time.monotonic() + 30
        while (titles := _scheduler_titles(sim.proc.pid)) != wanted:
            assert time.monotonic() < deadline, titles
            time.sleep(0.05)
    assert _prefixes(log, "Init parallel begin.") == expected


def test_each_dp_rank_logs_its_own_batches(tmp_path: Path):
    """ "Prefill batch" / "Decode batch" come from each DP rank's stats-logging scheduler, its
    attention TP rank 0 (sglang 0.5.23 srt/observability/metrics_collector.py:1361-1363,
    srt/managers/scheduler_components/metrics_reporter.py:803), with that rank's prefix."""
    with running_sim([*SMALL, "--tp-size", "2", "--dp-size", "2"], tmp_path, speed=50) as sim:
        log = sim.log()  # the warmup sends one prompt to each DP rank
    assert sorted(set(_prefixes(log, "Prefill batch, "))) == [" DP0 TP0", " DP1 TP0"]


def _scheduler_titles(pid: int) -> list[str]:
    """The `sglang::scheduler*` titles of every process below `pid` (the DP controller's
    schedulers included), sorted."""
    titles: list[str] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{parent}/task").iterdir():
                children = [int(c) for c in (task / "children").read_text().split()]
                todo.extend(children)
                for child in children:
                    with contextlib.suppress(OSError):
                        title = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0]
                        if title.startswith(b"sglang::scheduler"):
                            titles.append(title.decode())
    return sorted(titles)


def test_cuda_graph_lines_appear_while_capturing(tmp_path: Path):
    """Capture lines in 0.5.23's texts (sglang 0.5.23 srt/model_executor/
    model_runner_components/cuda_graph_setup.py:683-698, 750-790): prefill first, then decode;
    the server refuses connections until the capture is over. The `hold-capture` fault keeps
    the decode capture going until the test releases it, however slowly the test runs."""
    release = tmp_path / "release"
    sim = start_sim([*SMALL, "--sim-fault", f"hold-capture:{release}"], tmp_path=tmp_path, speed=50)
    try:
        log = wait_for_log(sim, "Capture target decode CUDA graph begin.")
        time.sleep(0.3)  # the hold is deterministic: nothing moves on meanwhile
        log = sim.log()
        assert "Capture target decode CUDA graph end." not in log
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{sim.url}/ready", timeout=1)
        prefill = re.search(
            r"Capture target prefill CUDA graph begin\. backend=breakable, num_tokens=\[4, 8, .*"
            r"\], avail mem=[\d.]+ GB\n.*Capture target prefill CUDA graph end\. elapsed=[\d.]+ s,"
            r" mem usage=[\d.]+ GB, avail mem=[\d.]+ GB\.",
            log,
        )
        assert prefill, log
        assert re.search(
            r"Capture target decode CUDA graph begin\. backend=full, num_tokens_per_req=1, "
            r"avail mem=[\d.]+ GB",
            log,
        )
        release.touch()
        wait_ready(sim, timeout=60)
        assert re.search(
            r"Capture target decode CUDA graph end\. bs=\[1, 2, 4, 8, 12, 16, .*\], "
            r"elapsed=[\d.]+ s, mem usage=[\d.]+ GB, avail mem=[\d.]+ GB\.",
            sim.log(),
        )
    finally:
        stop_sim(sim)


def test_speculative_capture_has_verify_and_draft_graphs(tmp_path: Path):
    """Speculative target: a verify graph; an EAGLE-style draft with several steps: draft
    decode and extend graphs on rank 0 only (sglang 0.5.23 srt/speculative/
    eagle_worker_v2.py:515, 533, 634, 654)."""
    with running_sim([*MTP, "--tp-size", "2"], tmp_path, speed=50) as sim:
        log = sim.log()
    begin = "Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4,"
    assert _prefixes(log, begin) == [" TP0", " TP1"]
    assert "Capture target decode CUDA graph" not in log
    for kind, per_req in (("decode", 1), ("extend", 4)):
        line = f"Capture draft {kind} CUDA graph begin. backend=full, num_tokens_per_req={per_req}"
        assert _prefixes(log, line) == [" TP0"]
        assert _prefixes(log, f"Capture draft {kind} CUDA graph end. elapsed=") == [" TP0"]
    order = [
        log.index(text)
        for text in (
            "Memory pool end.",
            "Capture target prefill CUDA graph begin.",
            "Capture target verify CUDA graph end.",
            "Capture draft decode CUDA graph begin.",
            "Capture draft extend CUDA graph end.",
            "The server is fired up",
        )
    ]
    assert order == sorted(order)


def test_dflash_draft_captures_a_verify_graph(tmp_path: Path):
    """The DFLASH draft runner carries the target's algorithm, so its capture is "draft
    verify" (sglang 0.5.23 srt/speculative/dflash_worker_v2.py:424, 748-750)."""
    args = [
        *QWEN,
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-draft-model-path",
        "z-lab/Qwen3.6-27B-DFlash",
        "--speculative-num-draft-tokens",
        "16",
    ]
    with running_sim(args, tmp_path, speed=50) as sim:
        log = sim.log()
    target = log.index("Capture target verify CUDA graph end.")
    draft = log.index("Capture draft verify CUDA graph begin. backend=full, num_tokens_per_req=16")
    assert target < draft < log.index("Capture draft verify CUDA graph end. bs=[1, 2, 3,")
    assert "Capture draft decode" not in log


def _run_sim(
    args: list[str], timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.sim", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": "50", **(env or {})},
        check=False,
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--made-up-flag", "1"], "sglang serve: error: unrecognized arguments: --made-up-flag 1"),
        (
            ["--cuda-graph-max-bs", "8"],
            "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
            "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",
        ),
        (
            ["--tp-size", "two"],
            "sglang serve: error: argument --tp-size/--tensor-parallel-size: invalid int value: "
            "'two'",
        ),
    ],
)
def test_argparse_errors_exit_2_with_the_real_usage(extra: list[str], message: str):
    """prepare_server_args' plain argparse parser (sglang 0.5.23 srt/server_args.py:679-696)."""
    result = _run_sim([*SMALL, "--port", "1", *extra])
    assert result.returncode == 2
    assert result.stderr.startswith("usage: sglang serve [-h] --model-path MODEL_PATH\n")
    assert result.stderr.rstrip("\n").endswith(message)
    assert "Traceback" not in result.stderr


def test_a_unique_prefix_is_accepted(tmp_path: Path):
    with running_sim([*SMALL, "--tp", "2", "--mem-fraction", "0.8"], tmp_path, speed=50) as sim:
        log = sim.log()
    assert _prefixes(log, "Init parallel begin.") == [" TP0", " TP1"]


def test_dflash_without_a_draft_path_fails_resolution_with_exit_1():
    """A resolution-time config error: a traceback from the leader, exit 1, no scheduler
    (sglang 0.5.23 launch_server.py:29, srt/arg_groups/speculative_hook.py:324-327)."""
    result = _run_sim([*QWEN, "--port", "1", "--speculative-algorithm", "DFLASH"])
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert result.stderr.rstrip().endswith(
        "ValueError: DFLASH speculative decoding requires setting --speculative-draft-model-path."
    )
    assert "Init parallel begin." not in result.stdout
    assert "include_parent=False" in result.stdout


def test_model_not_found_names_the_hub_mirror():
    """transformers 5.19 utils/hub.py:619-623 names huggingface_hub's ENDPOINT, which
    HF_ENDPOINT sets (huggingface_hub constants.py:69)."""
    result = _run_sim(
        [*SMALL, "--port", "1", "--sim-fault", "crash-at-load:notfound"],
        env={"HF_ENDPOINT": "https://hf-mirror.example/"},
    )
    assert result.returncode == 1
    assert (
        "OSError: We couldn't connect to 'https://hf-mirror.example' to load the files"
        in result.stderr
    )


def test_startup_warning_is_incompatible_with_then_a_real_failure(tmp_path: Path):
    """A resolution warning with 'is incompatible with' (sglang 0.5.23
    srt/arg_groups/overrides.py:1626) comes before an unrelated failure of the launch."""
    sim = start_sim(
        [*SMALL, "--pp-size", "2", "--sim-fault", "crash-at-load:kv-oom"],
        tmp_path=tmp_path,
        speed=50,
    )
    try:
        assert sim.proc.wait(timeout=60) == -signal.SIGKILL
        log = sim.log()
        warning = "] Pipeline parallelism is incompatible with overlap schedule."
        assert log.index(warning) < log.index("Init parallel begin.")
        assert "Not enough memory. Please try to increase --mem-fraction-static." in log
    finally:
        stop_sim(sim)


@pytest.mark.parametrize(
    ("flags", "warning"),
    [
        # sglang 0.5.23 srt/arg_groups/cuda_graph_hook.py:219, 244
        (
            ["--enable-two-batch-overlap"],
            "Breakable CUDA graph is incompatible with two-batch overlap; disabling prefill CUDA "
            "graph.",
        ),
        # sglang 0.5.23 srt/arg_groups/kv_shard_hook.py:330
        (
            ["--enable-kv-cache-sharding"],
            "Prefill CUDA graph (breakable) is incompatible with --enable-kv-cache-sharding; "
            "disabling it.",
        ),
    ],
)
def test_a_prefill_graph_conflict_warns_and_skips_that_capture(
    tmp_path: Path, flags: list[str], warning: str
):
    with running_sim([*SMALL, *flags], tmp_path, speed=50) as sim:
        log = sim.log()
    assert _prefixes(log, warning) == [""]  # the leader, while resolving
    assert "Capture target prefill CUDA graph" not in log
    assert _prefixes(log, "Disable prefill CUDA graph because cuda_graph_config resolved") == [""]
    assert "Capture target decode CUDA graph end." in log


def test_runtime_oom_ends_the_server_by_the_serving_sigquit_path(tmp_path: Path):
    """sglang 0.5.23 srt/mem_cache/allocation.py:612-620, then the serving-phase handler
    (srt/managers/tokenizer_manager.py:4072-4081) and kill_process_tree: exit -9."""
    sim = start_sim([*SMALL, "--sim-fault", "runtime-oom:16"], tmp_path=tmp_path, speed=20)
    try:
        wait_ready(sim)
        with pytest.raises(httpx.HTTPError):
            httpx.post(
                f"{sim.url}/generate",
                timeout=30,
                json={
                    "input_ids": [1] * 8,
                    "sampling_params": {"max_new_tokens": 400, "ignore_eos": True},
                },
            )
        assert sim.proc.wait(timeout=30) == -signal.SIGKILL
        log = sim.log()
        first = log.index("] Decode out of memory. Try to lower your batch size.\nTry to allocate")
        raised = log.index("Scheduler hit an exception: Traceback (most recent call last):", first)
        error = log.index("RuntimeError: Decode out of memory. Try to lower your batch size.")
        quit_line = log.index(f"] {SERVING_SIGQUIT}")
        assert first < raised < error < quit_line < log.index("include_parent=True")
    finally:
        stop_sim(sim)


def test_sigquit_from_a_child_while_loading_and_while_serving(tmp_path: Path):
    """The leader's two SIGQUIT handlers (sglang 0.5.23 srt/entrypoints/engine.py:1976-1980
    while launching, srt/managers/tokenizer_manager.py:4072-4081 once serving): both end in
    kill_process_tree and the leader's own SIGKILL."""
    loading = start_sim([*SMALL, "--sim-fault", "slow-start"], tmp_path=tmp_path, speed=1)
    try:
        deadline = time.monotonic() + 30
        while "Init parallel begin." not in loading.log():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(loading.proc.pid, signal.SIGQUIT)
        assert loading.proc.wait(timeout=30) == -signal.SIGKILL
        assert f"] {LAUNCH_SIGQUIT}" in loading.log()
    finally:
        stop_sim(loading)
    with running_sim(SMALL, tmp_path, speed=50, name="serving") as serving:
        os.kill(serving.proc.pid, signal.SIGQUIT)
        assert serving.proc.wait(timeout=30) == -signal.SIGKILL
        log = serving.log()
    assert f"] {SERVING_SIGQUIT}" in log
    assert LAUNCH_SIGQUIT not in log


def test_uvicorn_lines_then_one_non_streaming_warmup_request(tmp_path: Path):
    """uvicorn's startup lines, then SGLang's warmup: one non-streaming /generate of 8 new
    tokens before the ready line (sglang 0.5.23 srt/entrypoints/http_server.py:2405-2445,
    2494-2502, 2600)."""
    with running_sim(SMALL, tmp_path, speed=50) as sim:
        text = httpx.get(f"{sim.url}/metrics").text
        log = sim.log()
    order = [
        log.index(line)
        for line in (
            "Capture target decode CUDA graph end.",
            "INFO:     Started server process [",
            "INFO:     Waiting for application startup.",
            "INFO:     Application startup complete.",
            f"INFO:     Uvicorn running on http://127.0.0.1:{sim.port} (Press CTRL+C to quit)",
            "The server is fired up and ready to roll!",
        )
    ]
    assert order == sorted(order)
    # uvicorn logs in SGLang's format (sglang 0.5.23 srt/utils/common.py:3509-3516).
    assert _prefixes(log, "INFO:     Uvicorn running on") == [""]
    counts = {
        sample.labels.get("is_streaming"): sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "sglang:num_requests"
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert counts.get("false") == 1
    assert counts.get("true", 0) == 0


def test_access_log_as_sglang_configures_uvicorn(tmp_path: Path):
    """Every request gets an access line in SGLang's format; --uvicorn-access-log-exclude-
    prefixes drops the ones it names (sglang 0.5.23 srt/utils/common.py:3452-3575)."""
    args = [*SMALL, "--uvicorn-access-log-exclude-prefixes", "/metrics"]
    with running_sim(args, tmp_path, speed=50) as sim:
        httpx.get(f"{sim.url}/metrics")
        httpx.get(f"{sim.url}/model_info?probe=1")
        deadline = time.monotonic() + 10
        while "/model_info?probe=1" not in sim.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        log = sim.log()
    assert re.search(
        r"^\[[\d -:]+\] INFO:     127\.0\.0\.1:\d+ - \"POST /generate HTTP/1\.1\" 200 OK$",
        log,
        re.M,
    )
    assert '"GET /model_info?probe=1 HTTP/1.1" 200 OK' in log
    assert '"GET /metrics' not in log


def test_warmup_sends_one_prompt_per_dp_rank(tmp_path: Path):
    """With dp > 1 SGLang's warmup carries one prompt per DP rank (sglang 0.5.23
    srt/entrypoints/http_server.py:2441-2445)."""
    with running_sim([*SMALL, "--dp-size", "2"], tmp_path, speed=50) as sim:
        text = httpx.get(f"{sim.url}/metrics").text
    total = sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "sglang:num_requests"
        for sample in family.samples
        if sample.name.endswith("_total")
    )
    assert total == 2
