"""Helpers for the multi-node-across-hosts tests: ddconsole run on the console host (this
process's temp state) or on a fake host over SSH, a host's servers, and what is left."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from console.core.net import port_is_free
from console.hw.procs import argv_of, is_running, live_processes
from tests.conftest import REPO

T = TypeVar("T")


def dd(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    """`ddconsole --demo ARGS` on the console host; (status, stdout, stderr)."""
    return finish(start(*args), args, timeout)


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "console", "--demo", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        cwd=REPO,
    )


def finish(
    proc: subprocess.Popen[str], args: tuple[str, ...], timeout: float
) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler: where it hung
        out, err = proc.communicate()
        raise AssertionError(f"{args!r} took over {timeout} s:\n{err[-5000:]}") from None
    return proc.returncode, out, err


def servers_on(host: str) -> dict[str, dict[str, Any]]:
    """`ps --json --all` on `host` over its link, managed servers by id."""
    code, out, err = dd("--host", host, "ps", "--json", "--all")
    assert code == 0, err
    return {s["id"]: s for s in json.loads(out) if not s.get("external")}


def wait_for(check: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.3)


def gang_processes(dist_init_addr: str) -> list[int]:
    """Every live process started with this rendezvous address (every node's leader)."""
    found = []
    for proc in live_processes():
        pairs = itertools.pairwise(argv_of(proc.pid))
        if any(a == "--dist-init-addr" and b == dist_init_addr for a, b in pairs):
            found.append(proc.pid)
    return found


def nothing_left(dist_init_addr: str, ports: list[tuple[str, int]], pids: list[int]) -> None:
    """No process of the gang, none of the given pids, none of its (address, port) bound."""
    wait_for(lambda: not gang_processes(dist_init_addr), 20, f"the gang ({dist_init_addr}) ended")
    wait_for(lambda: not [p for p in pids if is_running(p, None)], 15, f"pids {pids} to be gone")
    wait_for(lambda: all(port_is_free(p, a) for a, p in ports), 15, f"ports {ports} to be free")
