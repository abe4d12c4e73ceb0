"""Keep the traceback of an unexpected error in a file instead of the user's terminal."""

from __future__ import annotations

import tempfile
import traceback
from pathlib import Path

from console.core.paths import state_root


def report_crash(exc: BaseException) -> Path:
    text = "".join(traceback.format_exception(exc))
    for folder in (state_root(False), Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = folder / "crash.log"
            with path.open("a", encoding="utf-8") as handle:
                handle.write(text + "\n")
            return path
        except OSError:
            continue
    return Path("stderr")
