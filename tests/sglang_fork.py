"""Run Python in the real-SGLang venv without paying SGLang's import each time.

Every `sglang_python -m sglang.benchmark.serving` or `-c "from sglang.srt.server_args ..."`
imports torch and SGLang first: about 15 s of CPU a run. A fork server imports them once per
test worker; each run is a fork of that untouched interpreter that then executes the module,
code or script as `python -m`, `-c` or a script path would, with its own argv, cwd,
environment and output files. SGLang's code runs unmodified; only its imports are shared.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
from pathlib import Path

# Imported before the first fork: what the runs import (the benchmark client, the server's
# argument parser, the tokenizer libraries). The client itself is dropped from sys.modules so
# that each run executes it afresh as __main__, as `python -m` does.
_PRELOAD = (
    "sglang.benchmark.serving",
    "sglang.srt.server_args",
    "sglang.cli.utils",
    "sglang.srt.utils.server_args_config_parser",
    "tokenizers",
    "transformers",
)

_SERVER = r"""
import importlib, json, os, runpy, sys, traceback
for name in PRELOAD:
    importlib.import_module(name)
del sys.modules["sglang.benchmark.serving"]
requests = os.fdopen(0, "rb", buffering=0)
replies = os.fdopen(os.dup(1), "w")
def child(request):
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    kind, target, args = request["kind"], request["target"], request["args"]
    code = 0
    try:
        if kind == "module":
            sys.argv = [target, *args]
            sys.path[0] = os.getcwd()
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        elif kind == "code":
            sys.argv = ["-c", *args]
            sys.path[0] = ""
            exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = [target, *args]
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return code
line = b""
while True:
    chunk = requests.read(65536)
    if not chunk:
        break
    line += chunk
    while b"\n" in line:
        raw, line = line.split(b"\n", 1)
        request = json.loads(raw)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = child(request)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()
"""


class SglangForkServer:
    """One fork server in the SGLang venv, started on first use; `run` is `subprocess.run`
    of `sglang_python ARGV...` with captured text output."""

    def __init__(self, python: str, folder: Path) -> None:
        self.python = python
        self.proc: subprocess.Popen[bytes] | None = None
        self.folder = folder
        self.count = 0

    def _start(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            code = _SERVER.replace("PRELOAD", repr(_PRELOAD))
            with (self.folder / "server.log").open("ab") as log:
                self.proc = subprocess.Popen(
                    [self.python, "-c", code],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env={**os.environ, "HF_HUB_OFFLINE": "1"},
                    start_new_session=True,
                )
        return self.proc

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path | str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 600,
    ) -> subprocess.CompletedProcess[str]:
        """`argv` as after the interpreter: `-m MODULE ARGS`, `-c CODE ARGS` or `SCRIPT ARGS`."""
        if argv[0] == "-m":
            kind, target, args = "module", argv[1], argv[2:]
        elif argv[0] == "-c":
            kind, target, args = "code", argv[1], argv[2:]
        else:
            kind, target, args = "script", argv[0], argv[1:]
        self.count += 1
        out, err = (self.folder / f"{self.count}.{name}" for name in ("out", "err"))
        request = {
            "kind": kind,
            "target": target,
            "args": args,
            "cwd": str(cwd or os.getcwd()),
            "env": dict(os.environ if env is None else env),
            "stdout": str(out),
            "stderr": str(err),
        }
        proc = self._start()
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            self.close()
            raise subprocess.TimeoutExpired([self.python, *argv], timeout)
        reply = proc.stdout.readline()
        if not reply:
            self.close()
            log = (self.folder / "server.log").read_text(errors="replace")
            raise AssertionError(f"the SGLang fork server exited:\n{log[-3000:]}")
        code = int(json.loads(reply)["rc"])
        return subprocess.CompletedProcess(
            [self.python, *argv],
            code,
            out.read_text(errors="replace"),
            err.read_text(errors="replace"),
        )

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        if self.proc is not None:
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
        self.proc = None
