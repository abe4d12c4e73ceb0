"""A run on disk: append-only JSONL as things happen, summaries derived from it.

`run.json` (what was asked, the fingerprint, the cells), `levels.jsonl` (one line per finished
level, with the server counters before and after), `requests.jsonl` (one line per finished
request), `telemetry-N.ddrec.gz` (each cell's samples in the recording format; older runs
kept `telemetry.jsonl`), and `summary.json|csv|md` rebuilt from those after every
level. A kill loses at most the requests in flight.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from console.bench.results import JsonDict, JsonObject
from console.bench.runmeta import SCHEMA_VERSION, RunMeta
from console.core.errors import ConsoleError, UsageError
from console.core.jsonio import atomic_write_json, atomic_write_text, dumps_line, load_json_text

__all__ = ["SCHEMA_VERSION", "RunDir", "RunWriteError", "check_writable", "slug"]


class RunWriteError(ConsoleError):
    """The results directory stopped accepting writes (full disk, permissions)."""


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "run"


def check_writable(folder: Path) -> None:
    """Fail before anything starts when results could not be kept."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        try:
            probe.write_text("x" * 4096)
        finally:
            probe.unlink(missing_ok=True)
    except OSError as exc:
        raise UsageError(
            f"results directory {folder} is not writable: {exc.strerror or exc}",
            hint="choose another with --out",
        ) from None


@dataclass
class RunDir:
    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @classmethod
    def create(cls, root: Path, name: str, meta: RunMeta) -> RunDir:
        """A new run folder under `root`, its `run.json` the given one with the run's id,
        name and creation time."""
        check_writable(root)
        run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{slug(name)}"
        path = root / run_id
        suffix = 1
        while path.exists():
            suffix += 1
            path = root / f"{run_id}-{suffix}"
        path.mkdir(parents=True)
        run = cls(path)
        run.write_meta(replace(meta, run_id=path.name, name=name, created_wall=time.time()))
        return run

    @classmethod
    def open(cls, root: Path, run: str, *, exact: bool = False) -> RunDir:
        """A run by id, unique id prefix, or path; with `exact`, by that very id under
        `root` only (a caller acting on the run it was shown must not reach another)."""
        candidate = Path(run)
        if not exact and candidate.is_dir() and (candidate / "run.json").exists():
            return cls(candidate)
        if not root.is_dir():
            raise UsageError(f"no run {run!r}: no runs yet in {root}")
        ids = sorted(p.name for p in root.iterdir() if (p / "run.json").exists())
        if run in ids:
            return cls(root / run)
        if exact:
            raise UsageError(f"no run with the exact id {run!r} (--exact)")
        matches = [i for i in ids if i.startswith(run) or run in i]
        if len(matches) == 1:
            return cls(root / matches[0])
        listed = ", ".join(ids[-8:]) or "none"
        raise UsageError(
            f"{'ambiguous' if matches else 'unknown'} run {run!r}; recent runs: {listed}"
        )

    # -- files ---------------------------------------------------------------------------

    def meta(self) -> RunMeta:
        """`run.json`; ConsoleError naming the file and what is wrong with it."""
        path = self.path / "run.json"
        try:
            data = load_json_text(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConsoleError(f"{path}: unreadable ({exc})") from None
        try:
            return RunMeta.from_json(data)
        except ValueError as exc:
            raise ConsoleError(f"{path}: {exc}") from None

    def write_meta(self, meta: RunMeta) -> None:
        self._guard(lambda: atomic_write_json(self.path / "run.json", meta.to_json()))

    def update_meta(self, change: Callable[[RunMeta], RunMeta]) -> RunMeta:
        """Read `run.json`, change it (`lambda meta: replace(meta, status="done")`: mypy
        checks the fields) and write it back."""
        meta = change(self.meta())
        self.write_meta(meta)
        return meta

    def append(self, name: str, record: JsonDict, *, finite: bool = True) -> None:  # a line
        """One JSON line, flushed at once. `finite=False` skips turning NaN/inf into null
        (for records that never hold them; the walk costs as much as the dump)."""
        line = (dumps_line(record) if finite else json.dumps(record, separators=(",", ":"))) + "\n"

        def write() -> None:
            with (self.path / name).open("a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()

        self._guard(write)

    def opened(self, name: str) -> TextIO:
        return (self.path / name).open("a", encoding="utf-8")

    def read_jsonl(self, name: str) -> list[JsonObject]:  # lines just read
        """Every complete line; a torn last line (a kill mid-write) is ignored."""
        rows: list[JsonObject] = []
        try:
            with (self.path / name).open(encoding="utf-8") as handle:
                for line in handle:
                    if not line.endswith("\n"):
                        break
                    try:
                        row = json.loads(line)
                    except (ValueError, RecursionError):
                        continue
                    if isinstance(row, dict):
                        rows.append(row)
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConsoleError(f"{self.path / name}: {reason}") from None
        return rows

    def damaged_lines(self, name: str) -> int:
        """How many lines of a JSONL file `read_jsonl` skips: not JSON, not an object, or
        torn at the end (counted once no live campaign is still writing it). Streams the file;
        0 when it cannot be read (that is reported where it is read)."""
        damaged = 0
        try:
            with (self.path / name).open("rb") as handle:
                for raw in handle:
                    if not raw.endswith(b"\n"):
                        if self.owner_alive() is None:
                            damaged += 1
                        break
                    try:
                        row = json.loads(raw)
                    except (ValueError, RecursionError):
                        damaged += 1
                        continue
                    if not isinstance(row, dict):
                        damaged += 1
        except OSError:
            return 0
        return damaged

    def write_text(self, name: str, text: str) -> None:
        self._guard(lambda: atomic_write_text(self.path / name, text, mode=0o644))

    def _guard(self, action: Callable[[], object]) -> None:
        try:
            action()
        except OSError as exc:
            raise RunWriteError(
                f"cannot write to {self.path}: {exc.strerror or exc}",
                hint="free space there; everything written before this stays usable",
            ) from None

    # -- ownership (a running campaign) --------------------------------------------------

    def claim(self) -> None:
        from console.hw.procs import process_info

        info = process_info(os.getpid())
        atomic_write_json(
            self.path / "owner.json",
            {
                "pid": os.getpid(),
                "start_ticks": info.start_ticks if info else None,
                "since_wall": time.time(),
            },
        )

    def release(self) -> None:
        try:
            (self.path / "owner.json").unlink()
        except FileNotFoundError:
            pass

    def owner_alive(self) -> int | None:
        from console.hw.procs import is_running

        try:
            owner = json.loads((self.path / "owner.json").read_text())
        except (OSError, ValueError):
            return None
        pid = owner.get("pid")
        if isinstance(pid, int) and is_running(pid, owner.get("start_ticks")):
            return pid
        return None
