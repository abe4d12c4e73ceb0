"""Why a server died: its exit status and its log's last lines, as a kind and a short reason.

The texts are SGLang 0.5.23's and its libraries' (tests/fixtures/sglang-0.5.23/corpus.toml
lists each with its source file and line). How SGLang fails decides the search: a child
process (scheduler, DP controller, detokenizer) logs `<Name> hit an exception: <traceback>`
and SIGQUITs the leader, which kills its own tree, so the leader exits -9 (sglang 0.5.23
srt/managers/scheduler.py:6372, srt/entrypoints/engine.py:1976-1980,
srt/utils/common.py:2550-2552); that traceback is the cause, whatever the exit status says.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Failure:
    kind: str
    """cuda-oom, kv-oom, runtime-oom, nccl, port-in-use, gated-repo, model-not-found,
    bad-flag, version-mismatch, import-error, cuda-error, config-error, scheduler-exception,
    killed, exited, unknown."""
    reason: str
    """One line for `ps` and the TUI."""
    excerpt: tuple[str, ...] = field(default_factory=tuple)
    """The log lines that show it."""
    line: str | None = None
    """The log line the reason comes from, as written."""
    index: int | None = None
    """That line's position in the lines classified."""


MEMORY_KINDS = frozenset({"cuda-oom", "kv-oom", "runtime-oom"})
"""Kinds that mean the GPU ran out of memory (torch's allocator or SGLang's own pools)."""

# The log prefix: `[%(asctime)s{prefix}] ` (sglang 0.5.23 srt/utils/common.py:2630), torch's
# `[rank0]:[E1201 ...] ` and uvicorn's level prefix (`ERROR:    `, srt/utils/common.py:3513).
_PREFIX = re.compile(
    r"^(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\]\s*)?(?:\[rank\d+\]:)?"
    r"(?:\[[A-Z]\d{4} [^\]]*\]\s*)?(?:(?:INFO|ERROR|CRITICAL|DEBUG):\s+)?"
)
# A line that warns: uvicorn's/logging's level name, Python's `...Warning:` categories and
# torch's `[W...]` records. SGLang's own logger.warning lines carry no level, and match no
# rule below (their "is incompatible with" is not an exception line).
_WARNING = re.compile(r"\bWARNING\b|Warning: |^\s*warnings\.warn|^(?:\[rank\d+\]:)?\[W\d{4} ")
# Exception types whose name adds nothing to the message in a reason.
_PLAIN_TYPE = re.compile(r"^(?:builtins\.)?(?:OSError|ValueError|RuntimeError|Exception):\s*")
# `<Name> hit an exception:` from a child process (sglang 0.5.23
# srt/managers/scheduler.py:6372, data_parallel_controller.py:1011, detokenizer_manager.py:566).
_CHILD_EXCEPTION = re.compile(
    r"\b(Scheduler|DataParallelController|DetokenizerManager|TokenizerManager|"
    r"MultiDetokenizerRouter|MultiTokenizerRouter) hit an exception:"
)
_CHILD_NAMES = {
    "Scheduler": "scheduler",
    "DataParallelController": "data parallel controller",
    "DetokenizerManager": "detokenizer",
    "TokenizerManager": "tokenizer manager",
    "MultiDetokenizerRouter": "detokenizer router",
    "MultiTokenizerRouter": "tokenizer router",
}
# The leader's SIGQUIT lines (sglang 0.5.23 srt/entrypoints/engine.py:1978,
# srt/managers/tokenizer_manager.py:4074).
_SIGQUIT = re.compile(
    r"Received sigquit from a child process\. It usually means the child failed\.|"
    r"SIGQUIT received\. .*It usually means one child failed\."
)
_NEW_RECORD = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
# The last line of a Python traceback: `pkg.Type: message`, or a bare `Type`.
_EXCEPTION_LINE = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b(?::|$)"
)


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    label: str
    detail: Callable[[str, Sequence[str], int], str]


def _message(text: str) -> str:
    """The message of an exception line, without a type name that adds nothing."""
    return _PLAIN_TYPE.sub("", text)[:200]


def _first_sentences(text: str, limit: int = 160) -> str:
    text = _message(text)
    if len(text) <= limit:
        return text
    cut = text.rfind(". ", 0, limit)
    return text[: cut + 1] if cut > 0 else text[:limit] + "..."


def _oom_detail(text: str, lines: Sequence[str], index: int) -> str:
    match = re.search(r"Tried to allocate ([\d.]+ [GMK]iB)", text)
    gpu = re.search(r"GPU (\d+) has a total capacity", text)
    if not match and not gpu:
        return _first_sentences(text)
    parts = []
    if match:
        parts.append(f"tried to allocate {match.group(1)}")
    if gpu:
        parts.append(f"GPU {gpu.group(1)}")
    return ", ".join(parts)


def _port_detail(text: str, lines: Sequence[str], index: int) -> str:
    match = re.search(r"address \(('?[\w.:]+'?), (\d+)\)", text)
    if match:
        return f"{match.group(1).strip(chr(39))}:{match.group(2)}"
    return _first_sentences(text)


def _flag_detail(text: str, lines: Sequence[str], index: int) -> str:
    match = re.search(r"error: (.*)$", text)
    return match.group(1) if match else text[:120]


def _gated_detail(text: str, lines: Sequence[str], index: int) -> str:
    """Where to accept the licence: transformers names the repo on the next line
    (transformers 5.19 utils/hub.py:611); huggingface_hub names its URL."""
    for line in lines[index : index + 6]:
        match = re.search(r"https://\S+", line)
        if match:
            url = match.group(0).rstrip(".").split("/resolve/")[0].replace("/api/models/", "/")
            return f"accept its licence at {url} and set HF_TOKEN"
    return "accept its licence on the Hub and set HF_TOKEN"


def _cuda_detail(text: str, lines: Sequence[str], index: int) -> str:
    match = re.search(r"CUDA error: .*", text)
    return match.group(0)[:160] if match else _first_sentences(text)


def _text_detail(text: str, lines: Sequence[str], index: int) -> str:
    return _first_sentences(text)


def _raw_detail(text: str, lines: Sequence[str], index: int) -> str:
    return text[:160]


# Specific failures, most specific first (one line can match several: the first wins).
_RULES: tuple[_Rule, ...] = (
    # torch 2.14 libc10_cuda.so; triton backends/nvidia/driver.c:76.
    _Rule(
        "cuda-oom",
        re.compile(r"CUDA out of memory|OutOfMemoryError|Triton Error \[CUDA\]: out of memory"),
        "CUDA out of memory",
        _oom_detail,
    ),
    # sglang 0.5.23 srt/model_executor/pool_configurator.py:96,
    # srt/mem_cache/kv_cache_configurator.py:3394.
    _Rule(
        "kv-oom",
        re.compile(
            r"Not enough memory\. Please try to increase --mem-fraction-static|"
            r"Not enough GPU memory for hybrid \(mamba/linear-attention\) state cache"
        ),
        "not enough GPU memory for the KV cache",
        _text_detail,
    ),
    # sglang 0.5.23 srt/mem_cache/allocation.py:239, 613.
    _Rule(
        "runtime-oom",
        re.compile(r"(?:Decode|Prefill) out of memory\. Try to lower your batch size"),
        "KV cache out of memory while serving",
        _text_detail,
    ),
    # torch 2.14 libtorch_cuda.so.
    _Rule(
        "nccl",
        re.compile(
            r"NCCL error|ncclUnhandled|ncclSystemError|NCCL timeout|"
            r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*timeout"
        ),
        "NCCL error",
        _raw_detail,
    ),
    # asyncio/uvloop bind error (uvicorn exits 3); sglang 0.5.23 srt/server_args.py:886,
    # srt/utils/network.py:104 (the DP-attention port checks).
    _Rule(
        "port-in-use",
        re.compile(
            r"address already in use|\[Errno 98\]|Port is already in use\.|"
            r"_port at \d+ is not available in \d+ seconds"
        ),
        "port already in use",
        _port_detail,
    ),
    # transformers 5.19 utils/hub.py:611, 708; huggingface_hub utils/_http.py:860.
    _Rule(
        "gated-repo",
        re.compile(
            r"You are trying to access a gated repo|Cannot access gated repo for url|"
            r"is a gated repository|GatedRepoError"
        ),
        "gated model repo",
        _gated_detail,
    ),
    # transformers 5.19 utils/hub.py:471, 570, 621 (any HF_ENDPOINT); huggingface_hub.
    _Rule(
        "model-not-found",
        re.compile(
            r"couldn't connect to '[^']+' to load the files|LocalEntryNotFoundError|"
            r"RepositoryNotFoundError|Repo id must be in the form|does not appear to have a "
            r"file named config\.json|is not a local folder and is not a valid model identifier"
        ),
        "model not found or hub unreachable",
        _text_detail,
    ),
    # argparse with prog "sglang serve" (sglang 0.5.23 srt/server_args.py:679): exit 2.
    _Rule(
        "bad-flag",
        re.compile(
            r"error: unrecognized arguments|error: argument --|"
            r"error: ambiguous option|invalid (?:int|float|choice) value"
        ),
        "unknown or invalid flag",
        _flag_detail,
    ),
    # sglang 0.5.23 srt/utils/common.py:2429-2437 (assert_pkg_version).
    _Rule(
        "version-mismatch",
        re.compile(
            r"is installed with version \S+, which is less than the minimum required version|"
            r"with minimum required version \S+ is not installed"
        ),
        "version mismatch",
        _text_detail,
    ),
    _Rule(
        "import-error",
        re.compile(r"^(?:[\w.]+\.)?(?:ImportError|ModuleNotFoundError)\b"),
        "Python import or version mismatch",
        _raw_detail,
    ),
    _Rule(
        "cuda-error",
        re.compile(r"CUDA error:|illegal memory access|cudaErrorLaunchFailure"),
        "CUDA error",
        _cuda_detail,
    ),
)
# Argument resolution raises ValueError in the leader before any scheduler starts (e.g.
# sglang 0.5.23 srt/arg_groups/speculative_hook.py:169-172, 324-327): exit 1.
_CONFIG = _Rule(
    "config-error",
    re.compile(r"^(?:builtins\.)?ValueError: "),
    "configuration error",
    _text_detail,
)


def strip_prefix(line: str) -> str:
    """The message of a log line, without SGLang's, torch's or uvicorn's prefix."""
    return _PREFIX.sub("", line.strip(), count=1)


def is_warning(line: str) -> bool:
    return bool(_WARNING.search(line))


def _match(lines: Sequence[str], indices: range, *, fallback: bool) -> Failure | None:
    """The earliest line in `indices` that a specific rule matches: the first error is the
    cause, what follows (other ranks' NCCL errors, the leader's SIGQUIT) is its consequence.
    With `fallback`, else a configuration error the log ends with: a ValueError that the
    server logged more records after (a request's error while serving) ended nothing."""
    config: Failure | None = None
    for index in indices:
        line = lines[index]
        if config is not None and _NEW_RECORD.match(line):
            config = None
        text = strip_prefix(line)
        for rule in _RULES:
            if rule.pattern.search(text):
                if is_warning(line):
                    break
                return _matched(rule, text, lines, index)
        else:
            if fallback and config is None and _CONFIG.pattern.search(text):
                config = _matched(_CONFIG, text, lines, index)
    return config


def _matched(rule: _Rule, text: str, lines: Sequence[str], index: int) -> Failure:
    detail = rule.detail(text, lines, index)
    reason = f"{rule.label}: {detail}" if detail else rule.label
    return _failure(rule.kind, reason, lines, index)


def _failure(kind: str, reason: str, lines: Sequence[str], index: int) -> Failure:
    excerpt = tuple(lines[max(0, index - 3) : index + 3])
    return Failure(kind, reason, excerpt, lines[index], index)


def _block_end(lines: Sequence[str], start: int) -> int:
    """Where the traceback logged at `start` ends: at the next log record."""
    end = start + 1
    while end < len(lines) and not _NEW_RECORD.match(lines[end]):
        end += 1
    return end


def _exception_line(lines: Sequence[str], indices: range) -> int | None:
    """The last unindented `Type: message` line (a traceback's own line) in `indices`."""
    found = None
    for index in indices:
        line = lines[index]
        if line[:1].isspace():
            continue
        if _EXCEPTION_LINE.match(strip_prefix(line)):
            found = index
    return found


def _child_failure(lines: Sequence[str]) -> Failure | None:
    """The first child process's traceback, classified."""
    for start, line in enumerate(lines):
        if " hit an exception:" not in line:
            continue
        child = _CHILD_EXCEPTION.search(line)
        if child is None:
            continue
        block = range(start, _block_end(lines, start))
        found = _match(lines, block, fallback=False)
        if found is not None:
            return found
        who = _CHILD_NAMES[child.group(1)]
        index = _exception_line(lines, block)
        if index is None:
            return _failure("scheduler-exception", f"{who} failed", lines, start)
        text = strip_prefix(lines[index])[:160]
        return _failure("scheduler-exception", f"{who} failed: {text}", lines, index)
    return None


def find_failure(lines: Sequence[str]) -> Failure | None:
    """What the log says went wrong, or None when it shows no failure."""
    found = _child_failure(lines)
    if found is not None:
        return found
    found = _match(lines, range(len(lines)), fallback=True)
    if found is not None:
        return found
    for index, line in enumerate(lines):
        if _SIGQUIT.search(line):
            reason = "a child process failed (its traceback is not in the log)"
            return _failure("scheduler-exception", reason, lines, index)
    return None


def classify(
    returncode: int | None, log_tail: Sequence[str], *, stop_requested: bool
) -> Failure | None:
    """None when the process ended because we stopped it; otherwise what went wrong."""
    if stop_requested:
        return None
    found = find_failure(log_tail)
    if found is not None:
        return found
    last = tuple(line for line in log_tail[-8:] if line.strip())
    # An unclassified traceback the log ends with still names the error: keep its line.
    index = _exception_line(log_tail, range(len(log_tail)))
    if index is not None and any(_NEW_RECORD.match(line) for line in log_tail[index + 1 :]):
        index = None
    error = f": {strip_prefix(log_tail[index])[:160]}" if index is not None else ""
    line = log_tail[index] if index is not None else None
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return Failure("killed", f"killed by {name}{error}", last, line, index)
    if returncode is not None:
        if returncode == 0:
            return Failure("exited", f"exited on its own (status 0){error}", last, line, index)
        return Failure("exited", f"exited with status {returncode}{error}", last, line, index)
    return Failure("unknown", f"process gone; exit status unknown{error}", last, line, index)


_ERROR_LINE = re.compile(
    r"Traceback \(most recent call last\)|\b(?:ERROR|CRITICAL|FATAL)\b|"
    r"\b\w+(?:Error|Exception)\b(?::|$)|\bKilled\b|hit an exception:"
)


def is_error_line(line: str) -> bool:
    """A log line worth highlighting: a known failure pattern, a traceback, an error level.
    Warnings are not (a warning never reads as an error)."""
    if is_warning(line):
        return False
    text = strip_prefix(line)
    return bool(_ERROR_LINE.search(line)) or any(rule.pattern.search(text) for rule in _RULES)
