"""One launch at a time per state dir, across console processes (flock)."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from console.core.errors import ConsoleError, StateError


class LockBusy(ConsoleError):
    """Another console held the launch lock for too long."""


@contextmanager
def launch_lock(path: Path, timeout: float = 30.0) -> Iterator[None]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise StateError(
            f"not launching: cannot open the launch lock {path} ({exc.strerror or exc})",
            hint="free space there, make it writable, or set XDG_STATE_HOME to another directory",
        ) from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockBusy(
                        f"another console has been launching for {timeout:.0f} s "
                        f"(lock {path}); try again"
                    ) from None
                time.sleep(0.05)
        try:  # the holder's pid, for a person reading the file; the lock is the flock
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError:
            pass
        yield
    finally:
        os.close(fd)
