"""Workloads by name: the built-in kinds, the shipped `workloads/` files, the user's, or a path.

A file is a dataset of prompts (JSONL with `prompt`, or ShareGPT JSON) or a trace (JSONL
with `timestamp`: this project's format or Mooncake's); its first row says which.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from console.bench.workload import Workload, load_dataset
from console.bench.workload_kinds import LengthDistribution, MultiTurn, SharedPrefix
from console.bench.workload_trace import TraceReplay, load_trace
from console.core.errors import UsageError
from console.core.paths import config_dir

BUILTIN = ("random", "chat", "shared-prefix", "multi-turn")
SUFFIXES = (".jsonl", ".json")


def shipped_workloads_dir() -> Path:
    """`workloads/` of a source checkout, else the copy packed inside the wheel."""
    package_dir = Path(__file__).resolve().parent.parent
    checkout = package_dir.parent / "workloads"
    if checkout.is_dir() and (package_dir.parent / "pyproject.toml").is_file():
        return checkout
    return package_dir / "_shipped_workloads"


def user_workloads_dir() -> Path:
    return config_dir() / "workloads"


def workload_files() -> dict[str, Path]:
    """Workload files by name (file name less its suffix); the user's replace shipped ones."""
    found: dict[str, Path] = {}
    for folder in (shipped_workloads_dir(), user_workloads_dir()):
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                if path.suffix in SUFFIXES and path.is_file():
                    found[path.stem] = path
    return found


def workload_names() -> list[str]:
    return [*BUILTIN, *sorted(workload_files())]


def resolve(name: str, base: Workload, label: str = "--workload") -> Workload:
    """`base` (its lengths, seed, vocabulary) turned into the workload `name` says: a built-in
    kind, a named file, or a file's path. UsageError of one line when it is none of these."""
    seed, vocab = base.seed, base.vocab_size
    if name == "random":
        return base
    if name == "chat":
        return replace(base, source=LengthDistribution(vocab_size=vocab, seed=seed))
    if name == "shared-prefix":
        return replace(base, source=SharedPrefix(vocab_size=vocab, seed=seed).validate())
    if name == "multi-turn":
        return replace(base, source=MultiTurn(vocab_size=vocab, seed=seed).validate())
    path = workload_files().get(name)
    if path is None:
        candidate = Path(name).expanduser()
        if candidate.suffix in SUFFIXES or candidate.exists():
            path = candidate
    if path is None:
        known = ", ".join(workload_names())
        raise UsageError(f"{label} {name}: unknown workload (known: {known}; or a file's path)")
    return from_file(path, base, label)


def from_file(path: Path, base: Workload, label: str = "--workload") -> Workload:
    """A dataset or trace file as a workload (its kind from its first row)."""
    if is_trace(path, label):
        trace = load_trace(path, label)
        return replace(base, source=TraceReplay(trace, vocab_size=base.vocab_size, seed=base.seed))
    prompts = load_dataset(path, base.output_len)
    return replace(base, dataset=path, prompts_from_file=prompts)


def is_trace(path: Path, label: str = "--workload") -> bool:
    """Whether the file's first row is a trace row (it has a `timestamp`)."""
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    break
            else:
                return False
    except OSError as exc:
        raise UsageError(f"{label} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{label} {path}: not UTF-8 text") from None
    if line.lstrip().startswith("["):
        return False
    try:
        row = json.loads(line)
    except ValueError:
        return False  # the dataset reader names the line
    return isinstance(row, dict) and "timestamp" in row
