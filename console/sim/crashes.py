"""Log text of SGLang failures, as the real server writes them (tracebacks abridged)."""

from __future__ import annotations

SITE = "/opt/sglang/.venv/lib/python3.11/site-packages"

_SCHEDULER_HEAD = [
    "Scheduler hit an exception: Traceback (most recent call last):",
    f'  File "{SITE}/sglang/srt/managers/scheduler.py", line 3108, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, "
    "dp_rank)",
]

LOAD_CRASHES: dict[str, list[str]] = {
    "oom": [
        *_SCHEDULER_HEAD,
        f'  File "{SITE}/sglang/srt/model_executor/model_runner.py", line 1984, in '
        "init_memory_pool",
        "    self.req_to_token_pool = ReqToTokenPool(",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a "
        "total capacity of 95.59 GiB of which 1.13 GiB is free. Including non-PyTorch memory, "
        "this process has 94.45 GiB memory in use. Of the allocated memory 91.20 GiB is "
        "allocated by PyTorch, and 1.75 GiB is reserved by PyTorch but unallocated.",
        "",
        "Received sigquit from a child process. It usually means the child failed.",
    ],
    "nccl": [
        *_SCHEDULER_HEAD,
        f'  File "{SITE}/sglang/srt/distributed/parallel_state.py", line 1290, in '
        "init_distributed_environment",
        "    torch.distributed.barrier()",
        "torch.distributed.DistBackendError: NCCL error in: "
        "/pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled cuda error (run with "
        "NCCL_DEBUG=INFO for details), NCCL version 2.27.7",
        "ncclUnhandledCudaError: Call to CUDA function failed.",
        "Last error:",
        "Cuda failure 217 'peer access is not supported between these two devices'",
        "",
        "Received sigquit from a child process. It usually means the child failed.",
    ],
    "import": [
        "Traceback (most recent call last):",
        f'  File "{SITE}/sglang/srt/layers/quantization/compressed_tensors/'
        'compressed_tensors.py", line 12, in <module>',
        "    from compressed_tensors.config import CompressionFormat, SparsityStructure",
        "ImportError: cannot import name 'SparsityStructure' from 'compressed_tensors.config' "
        f"({SITE}/compressed_tensors/config/__init__.py). compressed-tensors 0.9.1 is installed; "
        "this SGLang needs compressed-tensors==0.18.0",
    ],
    "notfound": [
        "Traceback (most recent call last):",
        f'  File "{SITE}/huggingface_hub/file_download.py", line 1546, in '
        "_raise_on_head_call_error",
        "    raise LocalEntryNotFoundError(",
        "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to "
        "locate the file on the Hub and we cannot find the requested files in the local cache.",
        "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and "
        "couldn't find them in the cached files.",
    ],
}

BAD_FLAG = [
    "usage: sglang serve [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH] ...",
    "sglang serve: error: unrecognized arguments: --speculative-tree-width 8",
]

MID_STREAM_CRASH = [
    *_SCHEDULER_HEAD[:1],
    f'  File "{SITE}/sglang/srt/managers/scheduler.py", line 1422, in event_loop_overlap',
    "    batch_result = self.run_batch(batch)",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    "",
    "Received sigquit from a child process. It usually means the child failed.",
]
