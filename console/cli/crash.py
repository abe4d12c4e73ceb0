"""Keep the traceback of an unexpected error in a file instead of the user's terminal.

The file is new (O_CREAT|O_EXCL), never a symlink (O_NOFOLLOW), mode 0600, and lives in a
private directory: the state dir, else a fresh mkdtemp folder (0700, unpredictable name).
There is no shared fallback path such as /tmp/crash.log that another user could plant.
When neither can be written the traceback goes to stderr."""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import time
import traceback
from pathlib import Path

from console.core.paths import state_root

FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _write_new(folder: Path, text: str) -> Path:
    """Write `text` to a new file in `folder`; OSError when that cannot be done safely."""
    name = f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}.log"
    path = folder / name
    fd = os.open(path, FLAGS, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            fd = -1
            handle.write(text + "\n")
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            path.unlink()
        except OSError:
            pass
        raise
    return path


def _state_folder() -> Path:
    folder = state_root(False)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.is_symlink() or not folder.is_dir():
        raise OSError(f"{folder} is not a directory")
    return folder


def report_crash(exc: BaseException) -> Path:
    """Where the traceback was written; `Path("stderr")` when it was printed there."""
    text = "".join(traceback.format_exception(exc))
    try:
        return _write_new(_state_folder(), text)
    except OSError:
        pass
    try:
        return _write_new(Path(tempfile.mkdtemp(prefix="ddconsole-crash-")), text)
    except OSError:
        pass
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return Path("stderr")
