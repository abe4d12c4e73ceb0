"""Log text of SGLang 0.5.23's failures, as the real server writes them (tracebacks abridged).

Each error text is copied from the source it cites (`sglang 0.5.23 <path>:<line>`, or the
library named); the tracebacks keep the real frames nearest the error and drop the rest.
Where a failure happens decides how the process ends (see console.sim.failures): in a
scheduler (`Crash.in_scheduler`) the leader SIGKILLs itself, exit status -9; in the leader
before any scheduler starts, a plain traceback and exit status 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SITE = "/opt/sglang/.venv/lib/python3.11/site-packages"
SGLANG = f"{SITE}/sglang"


def _frame(path: str, line: int, function: str, code: str, under: str = "") -> list[str]:
    """One traceback frame; `under` is the part of the line Python 3.11 marks with carets
    (it marks none when the failing expression is the whole line)."""
    lines = [f'  File "{path}", line {line}, in {function}', f"    {code}"]
    if under:
        lines.append(" " * (4 + code.index(under)) + "^" * len(under))
    return lines


# sglang 0.5.23 srt/managers/scheduler.py:6362 (Scheduler built) and :6368 (event loop); the
# except clause at :6370-6372 logs "Scheduler hit an exception: " + the formatted traceback.
SCHEDULER_EXCEPTION = "Scheduler hit an exception: Traceback (most recent call last):"
_AT_INIT = _frame(
    f"{SGLANG}/srt/managers/scheduler.py",
    6362,
    "run_scheduler_process",
    "scheduler = Scheduler(server_args, port_args)",
    "Scheduler(server_args, port_args)",
)
_AT_LOOP = _frame(
    f"{SGLANG}/srt/managers/scheduler.py",
    6368,
    "run_scheduler_process",
    "scheduler.run_event_loop()",
)
# The Python traceback of an exception that leaves `python -m sglang.launch_server`
# (sglang 0.5.23 launch_server.py:84, run_server at :17-29).
_LAUNCH = [
    "Traceback (most recent call last):",
    '  File "<frozen runpy>", line 198, in _run_module_as_main',
    '  File "<frozen runpy>", line 88, in _run_code',
    *_frame(f"{SGLANG}/launch_server.py", 84, "<module>", "run_server(server_args)"),
]

# The leader's lines. Launch phase: sglang 0.5.23 srt/entrypoints/engine.py:1976-1980.
# Serving: srt/managers/tokenizer_manager.py:4072-4074, a handler added with
# loop.add_signal_handler (:2453-2456), so it is called without arguments.
LAUNCH_SIGQUIT = "Received sigquit from a child process. It usually means the child failed."
SERVING_SIGQUIT = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."


def kill_process_tree_line(pid: int, include_parent: bool) -> str:
    """sglang 0.5.23 srt/utils/common.py:2528-2531."""
    return f"kill_process_tree called: parent_pid={pid}, include_parent={include_parent}, pid={pid}"


@dataclass(frozen=True)
class Crash:
    """One load-time failure: its lines, and where SGLang raises it."""

    lines: tuple[str, ...]
    in_scheduler: bool
    """True: a scheduler raises it (SIGQUIT to the leader, exit -9). False: the leader
    raises it before starting any scheduler (traceback, exit 1)."""
    stage: str
    """When it strikes: `resolve` (before any scheduler), `init` (Init parallel),
    `weights` (Load weight), `pool` (after the weights, building the KV pool)."""


def fill(
    lines: Sequence[str],
    *,
    model: str,
    mem_fraction_static: float,
    endpoint: str,
    extra: Mapping[str, str] | None = None,
) -> list[str]:
    """The crash's lines with this launch's model, memory fraction and Hub endpoint in them,
    and any `extra` `{name}` values (a port's number, a timeout)."""
    values = {
        "{model}": model,
        "{mem_fraction_static}": f"{mem_fraction_static:g}",
        "{endpoint}": endpoint,
        **{f"{{{key}}}": value for key, value in (extra or {}).items()},
    }
    filled = []
    for line in lines:
        for key, value in values.items():
            line = line.replace(key, value)
        filled.append(line)
    return filled


def hub_endpoint(environ: Mapping[str, str]) -> str:
    """huggingface_hub's ENDPOINT: HF_ENDPOINT (a mirror) or the Hub (constants.py:69)."""
    return environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def _scheduler(stage: str, *lines: str) -> Crash:
    return Crash((SCHEDULER_EXCEPTION, *_AT_INIT, *lines, ""), True, stage)


def _leader(*lines: str) -> Crash:
    return Crash((*_LAUNCH, *lines), False, "resolve")


# The innermost frames of a DP-attention port that stays taken, and the error: sglang 0.5.23
# srt/server_args.py:883 (scheduler_input_port, checked last), srt/utils/network.py:80-104.
DP_PORT_FRAMES = (
    *_frame(
        f"{SGLANG}/srt/server_args.py",
        883,
        "init_new",
        'wait_port_available(scheduler_input_port, "scheduler_input_port")',
    ),
    *_frame(f"{SGLANG}/srt/utils/network.py", 102, "wait_port_available", "raise ValueError("),
)
DP_PORT_ERROR = (
    "ValueError: scheduler_input_port at {port} is not available in {timeout} seconds. "
    "scheduler_input_port at {port} is not available"
)
ZMQ_TCP_PORT_DELTA = 233
"""sglang 0.5.23 srt/server_args.py:728: DP attention's ports start this far above --port."""


def dp_attention_ports(port: int) -> dict[str, int]:
    """The TCP ports PortArgs.init_new derives from `--port` with DP attention on one node
    (sglang 0.5.23 srt/server_args.py:818-858; NUM_DERIVED_PORTS is 6)."""
    dist_init = port + ZMQ_TCP_PORT_DELTA
    if dist_init > 65535:
        dist_init = port - ZMQ_TCP_PORT_DELTA
    base = dist_init - 6 - 1 if dist_init + 6 > 65535 else dist_init + 1
    return {
        "dist_init_port": dist_init,
        "port_base": base,
        "detokenizer_port": base + 1,
        "scheduler_input_port": base + 4,
    }


def port_in_use_line(ports: Mapping[str, int], nccl_port: int) -> str:
    """The leader's logger.exception text before the traceback (srt/server_args.py:884-887)."""
    return (
        f"Port is already in use. dist_init_port={ports['dist_init_port']} "
        f"port_base={ports['port_base']} detokenizer_port={ports['detokenizer_port']} "
        f"nccl_port={nccl_port} scheduler_input_port={ports['scheduler_input_port']}"
    )


def port_waiting_line(port: int) -> str:
    """wait_port_available's warning at 15, 20, 25 s when no process holding the port is found
    (srt/utils/network.py:89-92)."""
    return f"The port {port} is in use, but we could not find the process that uses it."


LOAD_CRASHES: dict[str, Crash] = {
    # torch's allocator text (torch 2.14 libc10_cuda.so), raised while the pool is built.
    "oom": _scheduler(
        "pool",
        # Building the request pool: sglang 0.5.23 srt/mem_cache/kv_cache_configurator.py:1718.
        *_frame(
            f"{SGLANG}/srt/mem_cache/kv_cache_configurator.py",
            1718,
            "_build_hybrid_req_pool",
            "req_to_token_pool = HybridReqToTokenPool(",
        ),
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a "
        "total capacity of 95.59 GiB of which 1.13 GiB is free. Including non-PyTorch memory, "
        "this process has 94.45 GiB memory in use. Of the allocated memory 91.20 GiB is "
        "allocated by PyTorch, and 1.75 GiB is reserved by PyTorch but unallocated.",
    ),
    # sglang 0.5.23 srt/model_executor/pool_configurator.py:96-99.
    "kv-oom": _scheduler(
        "pool",
        *_frame(
            f"{SGLANG}/srt/model_executor/pool_configurator.py",
            99,
            "__post_init__",
            "raise RuntimeError(msg)",
        ),
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static={mem_fraction_static}",
    ),
    # sglang 0.5.23 srt/mem_cache/kv_cache_configurator.py:3392-3403 (hybrid models such as
    # Qwen3.6's Qwen3_5 GDN layers).
    "hybrid-oom": _scheduler(
        "pool",
        *_frame(
            f"{SGLANG}/srt/mem_cache/kv_cache_configurator.py",
            3393,
            "_handle_max_mamba_cache",
            "raise RuntimeError(",
        ),
        "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
        "Computed max_mamba_cache_size=0 (total_rest_memory=1.42 GB, "
        "mamba_cache_per_req=150.38 MB). Try: (1) reduce --max-running-requests, "
        "(2) increase --mem-fraction-static, (3) reduce --speculative-num-draft-tokens, or "
        "(4) use GPUs with more memory.",
    ),
    # torch's NCCL texts (libtorch_cuda.so), raised while the process groups come up.
    "nccl": _scheduler(
        "init",
        # The first collective: sglang 0.5.23 srt/distributed/bootstrap.py:164, 361.
        *_frame(
            f"{SGLANG}/srt/distributed/bootstrap.py",
            164,
            "init_parallel_runtime",
            "_prewarm_nccl()",
        ),
        *_frame(
            f"{SGLANG}/srt/distributed/bootstrap.py",
            361,
            "_prewarm_nccl",
            "dist.all_reduce(warmup_tensor, group=tp_group_handle)",
        ),
        "torch.distributed.DistBackendError: NCCL error in: "
        "/pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled cuda error (run with "
        "NCCL_DEBUG=INFO for details), NCCL version 2.27.7",
        "ncclUnhandledCudaError: Call to CUDA function failed.",
        "Last error:",
        "Cuda failure 217 'peer access is not supported between these two devices'",
    ),
    # SGLang 0.5.23 imports it at srt/layers/quantization/compressed_tensors/
    # compressed_tensors.py:21-25 (pinned compressed-tensors==0.18.0); Python's own message.
    "import": _leader(
        *_frame(
            f"{SGLANG}/srt/layers/quantization/compressed_tensors/compressed_tensors.py",
            21,
            "<module>",
            "from compressed_tensors.config import (",
        ),
        "ImportError: cannot import name 'SparsityStructure' from 'compressed_tensors.config' "
        f"({SITE}/compressed_tensors/config/__init__.py)",
    ),
    # transformers 5.19 utils/hub.py:619-623, with huggingface_hub's endpoint (the model config
    # is read while the arguments are resolved, in the leader).
    "notfound": _leader(
        *_frame(
            f"{SITE}/transformers/utils/hub.py",
            619,
            "cached_files",
            "raise OSError(",
        ),
        "OSError: We couldn't connect to '{endpoint}' to load the files, and "
        "couldn't find them in the cached files.",
        "Check your internet connection or see how to run the library in offline mode at "
        "'https://huggingface.co/docs/transformers/installation#offline-mode'.",
    ),
    # transformers 5.19 utils/hub.py:611-614; the 401 text is huggingface_hub's
    # (utils/_http.py:858-862).
    "gated": _leader(
        *_frame(f"{SITE}/transformers/utils/hub.py", 611, "cached_files", "raise OSError("),
        "OSError: You are trying to access a gated repo.",
        "Make sure to have access to it at https://huggingface.co/{model}.",
        "401 Client Error. (Request ID: Root=1-692cf1a0-3c5e0a1b7d2f4e6a8b9c0d1e;"
        "5f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b)",
        "",
        "Cannot access gated repo for url {endpoint}/{model}/resolve/main/config.json.",
        "Access to model {model} is restricted. You must have access to it and be "
        "authenticated to access it. Please log in.",
    ),
    # sglang 0.5.23 srt/utils/common.py:2422-2432, called from srt/entrypoints/engine.py:
    # 1961-1965 in the leader before any scheduler starts.
    "version": _leader(
        *_frame(
            f"{SGLANG}/srt/entrypoints/engine.py",
            1155,
            "_launch_subprocesses",
            "_set_envs_and_config(server_args)",
        ),
        *_frame(
            f"{SGLANG}/srt/entrypoints/engine.py",
            1962,
            "_set_envs_and_config",
            "assert_pkg_version(",
        ),
        *_frame(f"{SGLANG}/srt/utils/common.py", 2429, "assert_pkg_version", "raise Exception("),
        "Exception: sglang-kernel is installed with version 0.4.1, which is less than the "
        "minimum required version 0.4.9. Please reinstall the latest version with "
        "`pip install sglang-kernel --force-reinstall`",
    ),
    # DP attention's TCP ports, checked by the leader's PortArgs.init_new before any child
    # starts (sglang 0.5.23 srt/entrypoints/engine.py:1184, srt/server_args.py:867-887,
    # srt/utils/network.py:64-104); SimServer.wait_dp_ports logs what precedes this traceback.
    "dp-port": _leader(
        *_frame(f"{SGLANG}/launch_server.py", 67, "run_server", "launch_server(server_args)"),
        *_frame(
            f"{SGLANG}/srt/entrypoints/http_server.py",
            3156,
            "launch_server",
            ") = Engine._launch_subprocesses(",
        ),
        *_frame(
            f"{SGLANG}/srt/entrypoints/engine.py",
            1184,
            "_launch_subprocesses",
            "port_args = PortArgs.init_new(server_args)",
            "PortArgs.init_new(server_args)",
        ),
        *DP_PORT_FRAMES,
        DP_PORT_ERROR,
    ),
}

# A resolution-time config error, raised by `server_args.resolve_once()` (sglang 0.5.23
# launch_server.py:29) in srt/arg_groups/speculative_hook.py:324-327.
DFLASH_WITHOUT_DRAFT = _leader(
    *_frame(f"{SGLANG}/launch_server.py", 29, "run_server", "server_args.resolve_once()"),
    *_frame(
        f"{SGLANG}/srt/arg_groups/speculative_hook.py", 325, "_handle_dflash", "raise ValueError("
    ),
    "ValueError: DFLASH speculative decoding requires setting --speculative-draft-model-path.",
)

# argparse's exit 2 (sglang 0.5.23 srt/server_args.py:679-696): the real usage, then this.
BAD_FLAG = "unrecognized arguments: --speculative-tree-width 8"

# A scheduler failing while serving: a CUDA fault in the event loop.
MID_STREAM_CRASH = [
    SCHEDULER_EXCEPTION,
    *_AT_LOOP,
    *_frame(
        f"{SGLANG}/srt/managers/scheduler.py",
        2109,
        "event_loop_overlap",
        "batch_result = self.run_batch(batch)",
        "self.run_batch(batch)",
    ),
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    "",
]


def runtime_oom(tokens: int, available: int, *, prefill: bool = False) -> tuple[str, str]:
    """Decode (or prefill) out of memory while serving: the scheduler logs the message, then
    raises it (sglang 0.5.23 srt/mem_cache/allocation.py:612-620, prefill :238-246; the
    available line is srt/mem_cache/base_prefix_cache.py:741). Returns both log messages."""
    phase, line, function = (
        ("Prefill", 246, "alloc_paged_token_slots_extend")
        if prefill
        else ("Decode", 620, "alloc_paged_token_slots_decode")
    )
    message = (
        f"{phase} out of memory. Try to lower your batch size.\n"
        f"Try to allocate {tokens} tokens.\n"
        f"Available tokens: {available} (available_size={available} + evictable_size=0)\n"
    )
    frames = [
        SCHEDULER_EXCEPTION,
        *_AT_LOOP,
        *_frame(
            f"{SGLANG}/srt/mem_cache/allocation.py",
            line,
            function,
            "raise RuntimeError(error_msg)",
        ),
    ]
    return message, "\n".join(frames) + f"\nRuntimeError: {message}"
