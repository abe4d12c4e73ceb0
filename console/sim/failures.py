"""How a simulated SGLang 0.5.23 process ends when something fails.

- A scheduler fails: it logs `Scheduler hit an exception: <traceback>` and SIGQUITs the
  leader (sglang 0.5.23 srt/managers/scheduler.py:6370-6373). The leader logs its launch-phase
  or serving-phase SIGQUIT line (crashes.LAUNCH_SIGQUIT, crashes.SERVING_SIGQUIT), then
  `kill_process_tree(os.getpid())` kills the children and SIGKILLs the leader itself
  (srt/utils/common.py:2546-2549): exit status -9.
- The leader fails before any scheduler (argument resolution, a version check, a model that
  cannot be fetched): Python prints the traceback, `launch_server`'s `finally` runs
  `kill_process_tree(..., include_parent=False)` first (launch_server.py:83-86): exit status 1.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from console.sim.crashes import LAUNCH_SIGQUIT, SERVING_SIGQUIT, kill_process_tree_line


def die_by_sigquit(
    logger: logging.Logger, *, serving: bool, cleanup: Callable[[], None]
) -> NoReturn:
    """The leader's SIGQUIT handler: log, kill the tree, SIGKILL itself."""
    logger.error(SERVING_SIGQUIT if serving else LAUNCH_SIGQUIT)
    die_by_kill_tree(logger, cleanup=cleanup)


def launch_server_finally(logger: logging.Logger, *, cleanup: Callable[[], None]) -> None:
    """`kill_process_tree(os.getpid(), include_parent=False)` in launch_server's `finally`
    (sglang 0.5.23 launch_server.py:83-86): the children go, the leader exits on its own."""
    logger.info(kill_process_tree_line(os.getpid(), False))
    cleanup()
    sys.stdout.flush()


def exit_with_traceback(
    logger: logging.Logger, lines: Sequence[str], *, cleanup: Callable[[], None]
) -> int:
    """An exception that leaves the leader's main: the `finally`, then Python prints the
    traceback; exit status 1."""
    launch_server_finally(logger, cleanup=cleanup)
    print("\n".join(lines), file=sys.stderr, flush=True)
    return 1


def die_by_kill_tree(logger: logging.Logger, *, cleanup: Callable[[], None]) -> NoReturn:
    """`kill_process_tree(os.getpid())`: the children, then SIGKILL of the leader itself."""
    pid = os.getpid()
    logger.info(kill_process_tree_line(pid, True))
    cleanup()
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(pid, signal.SIGKILL)
    raise SystemExit(-9)  # not reached: SIGKILL cannot be caught
