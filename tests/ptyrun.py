"""Run `ddconsole` on a real pseudo-terminal (stdin, stdout and stderr), as a user at a
terminal does; reads never block past the deadline, so a hung child fails the test instead
of hanging it."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

from tests.conftest import REPO


def run_on_pty(
    args: list[str],
    *,
    answer: str | None = None,
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """`ddconsole ARGS` on a pseudo-terminal; `answer` is typed once it asks `[y/N]`.
    Returns its exit status and everything it wrote; kills it after `timeout` seconds."""
    main, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", *args],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + timeout
    answered = answer is None
    try:
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([main], [], [], min(left, 1.0))
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed its side
                break
            if not chunk:
                break
            seen += chunk
            if not answered and b"[y/N]" in seen:
                os.write(main, (answer or "").encode())
                answered = True
        else:
            proc.kill()
            raise AssertionError(f"ddconsole {' '.join(args)} still running after {timeout} s")
    finally:
        os.close(main)
    return proc.wait(timeout=30), seen.decode(errors="replace")
