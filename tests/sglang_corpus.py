"""The SGLang 0.5.23 text corpus (tests/fixtures/sglang-0.5.23/corpus.toml) and whole logs built
from it, the way a real server writes them around each failure."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

CORPUS_PATH = Path(__file__).parent / "fixtures" / "sglang-0.5.23" / "corpus.toml"

# Secrets as real SGLang logs them, in clear, in its `server_args={...}` line (the corpus
# entry "server-args"; sglang 0.5.23 srt/entrypoints/engine.py:173-174, 1185): every framed
# log carries them, so diagnose must keep them out of what it prints.
CORPUS_API_KEY = "sk-corpus-5f0e1d2c3b4a5968"
CORPUS_SSL_PASSWORD = "pw-corpus-2468"
# The startup a scheduler goes through before a load-time failure (sglang 0.5.23
# srt/distributed/bootstrap.py:115, srt/model_executor/model_runner.py:1274,1373).
_STARTUP = (
    "[2026-12-01 10:00:00] server_args={'model_path': 'Qwen/Qwen3.6-27B', "
    f"'ssl_keyfile_password': '{CORPUS_SSL_PASSWORD}', 'tp_size': 1, "
    f"'api_key': '{CORPUS_API_KEY}', 'admin_api_key': None, 'watermark_config': '<redacted>'}}",
    "[2026-12-01 10:00:02] Init parallel begin.",
    "[2026-12-01 10:00:05] Load weight begin. avail mem=94.12 GB",
    "[2026-12-01 10:01:13] Load weight end. elapsed=68.77 s, "
    "type=Qwen3_5ForConditionalGeneration, avail mem=40.12 GB, mem usage=54.00 GB.",
)
# A startup warning that mentions "is incompatible with" (srt/arg_groups/overrides.py:1626):
# every framed failure carries one, so no test passes by ignoring warnings by luck.
_WARNING = "[2026-12-01 10:00:01] Pipeline parallelism is incompatible with overlap schedule."
_SERVING = (
    "[2026-12-01 10:02:30] INFO:     Started server process [4242]",
    "[2026-12-01 10:02:30] INFO:     Application startup complete.",
    "[2026-12-01 10:02:30] INFO:     Uvicorn running on http://127.0.0.1:30000 "
    "(Press CTRL+C to quit)",
    "[2026-12-01 10:02:40] The server is fired up and ready to roll!",
    "[2026-12-01 10:03:00] Decode batch, #running-req: 32, #token: 41210, token usage: 0.97, "
    "cuda graph: True, gen throughput (token/s): 812.40, #queue-req: 12",
)
_FRAMES = (
    '  File "/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", '
    "line 6362, in run_scheduler_process",
    "    scheduler = Scheduler(server_args, port_args)",
    "                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
)
# sglang 0.5.23 srt/entrypoints/engine.py:1978 and srt/managers/tokenizer_manager.py:4074.
_SIGQUIT_LAUNCH = (
    "[2026-12-01 10:01:20] Received sigquit from a child process. "
    "It usually means the child failed."
)
_SIGQUIT_SERVING = (
    "[2026-12-01 10:20:45] SIGQUIT received. signum=None, frame=None. "
    "It usually means one child failed."
)


@dataclass(frozen=True)
class Entry:
    id: str
    group: str
    source: str
    file: str
    line: int
    constants: tuple[str, ...]
    example: str
    context: str = ""
    kind: str = ""
    reason: str = ""
    phase: str = ""
    label: str = ""

    @property
    def example_lines(self) -> list[str]:
        return self.example.strip("\n").split("\n")


def load() -> list[Entry]:
    with CORPUS_PATH.open("rb") as handle:
        data = tomllib.load(handle)
    entries = []
    for raw in data["entry"]:
        constant = raw.pop("constant")
        constants = (constant,) if isinstance(constant, str) else tuple(constant)
        entries.append(Entry(constants=constants, **raw))
    return entries


def entries(group: str) -> list[Entry]:
    return [entry for entry in load() if entry.group == group]


def failure_log(entry: Entry) -> tuple[list[str], int]:
    """A whole server log ending in this failure, and the leader's exit status (sglang 0.5.23:
    a child's failure SIGQUITs the leader, whose kill_process_tree ends in SIGKILL of itself,
    srt/utils/common.py:2550-2552; a main-process traceback exits 1; argparse exits 2; uvicorn
    exits 3 on a bind failure)."""
    lines = [_STARTUP[0], _WARNING]
    example = entry.example_lines
    if entry.context in ("scheduler", "dp-controller", "serving"):
        who = "DataParallelController" if entry.context == "dp-controller" else "Scheduler"
        body = list(_STARTUP[1:])
        if entry.context == "serving":
            body += list(_SERVING)
        if example[0].startswith("["):
            # Logged (with its traceback) before the exception reaches the process's handler.
            body += example
            example = [example[-1]]
        lines += body
        lines.append(
            f"[2026-12-01 10:01:19] {who} hit an exception: Traceback (most recent call last):"
        )
        lines += [*_FRAMES, *example, ""]
        lines.append(_SIGQUIT_SERVING if entry.context == "serving" else _SIGQUIT_LAUNCH)
        return lines, -9
    if entry.context == "leader":
        if example[0].startswith("["):
            # Logged (with its traceback) before the exception leaves the process.
            lines += example
            example = [example[-1]]
        lines += [
            "Traceback (most recent call last):",
            '  File "<frozen runpy>", line 198, in _run_module_as_main',
            '  File "/venv/lib/python3.11/site-packages/sglang/launch_server.py", '
            "line 30, in <module>",
            "    run_server(server_args)",
            *example,
        ]
        return lines, 1
    if entry.context == "argparse":
        lines = [
            "usage: sglang serve [-h] [--model-path MODEL_PATH]",
            "                    [--tokenizer-path TOKENIZER_PATH]",
            *example,
        ]
        return lines, 2
    if entry.context == "uvicorn":
        lines += list(_STARTUP[1:]) + list(_SERVING[:1]) + example
        lines.append("[2026-12-01 10:02:31] INFO:     Waiting for application shutdown.")
        return lines, 3
    raise ValueError(f"{entry.id}: unknown context {entry.context!r}")
