"""Workloads by name: the built-in kinds, the shipped `workloads/` files, the user's, or a path.

A file is a dataset of prompts (JSONL with `prompt`, or ShareGPT JSON) or a trace (JSONL
with `timestamp`: this project's format or Mooncake's); its first row says which.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.bench.workload import MAX_TOKENS, Workload, load_dataset
from console.bench.workload_kinds import LengthDistribution, LogNormal, MultiTurn, SharedPrefix
from console.bench.workload_trace import Trace, TraceReplay, load_trace
from console.core.errors import UsageError
from console.core.paths import config_dir

if TYPE_CHECKING:
    # The level runner pulls in httpx: requests are built before the TUI's first frame.
    from console.bench.levels import LevelSpec

BUILTIN = ("random", "chat", "shared-prefix", "multi-turn")
KINDS: dict[str, type[LengthDistribution] | type[SharedPrefix] | type[MultiTurn]] = {
    "chat": LengthDistribution,
    "shared-prefix": SharedPrefix,
    "multi-turn": MultiTurn,
}
"""Built-in kinds that take parameters: `multi-turn:turns=8,conversations=16`."""
TUNABLE = ("prefix_len", "groups", "conversations", "turns", "system_len")
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
    kind, _, params = name.partition(":")
    if name == "random":
        return base
    if kind in KINDS:
        source = KINDS[kind](vocab_size=vocab, seed=seed)
        return replace(
            base, source=with_params(source, params, f"{label} {name}").validate(f"{label} {name}")
        )
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


def named_trace(name: str | None, label: str = "--workload") -> Trace | None:
    """The trace `name` resolves to, or None when it is a built-in kind or a dataset."""
    if name is None or name in BUILTIN:
        return None
    path = workload_files().get(name) or Path(name).expanduser()
    if not path.is_file() or not is_trace(path, label):
        return None
    return _load_cached(str(path.resolve()), path.stat().st_mtime_ns, label)


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, label: str) -> Trace:
    """A trace read once per file version (levels and the runner both ask for it)."""
    return load_trace(Path(path), label)


def replay_level(
    trace: Trace,
    *,
    speed: float,
    requests: int | None,
    duration_s: float | None,
    warmup: int,
    flush_cache: bool,
) -> LevelSpec:
    """The one level of a trace replay: open loop on the trace's clock sped up `speed` times,
    its rate the trace's mean arrival rate at that speed (what tables show as its load)."""
    from console.bench.levels import LevelSpec

    if speed <= 0:
        raise UsageError("--replay-speed must be positive")
    rate = round(trace.mean_rate * speed, 3) or None
    return LevelSpec(0, None, rate, requests, duration_s, warmup, flush_cache, replay=speed)


def cli_workload(workload: str | None, trace: Path | None) -> str | None:
    """`--workload NAME|FILE` or `--trace FILE` as one workload name; a `--trace` file must
    be a trace. UsageError of one line otherwise."""
    if trace is None:
        return workload
    if workload is not None:
        raise UsageError("give --workload or --trace, not both")
    if not is_trace(trace, "--trace"):
        raise UsageError(
            f'--trace {trace}: not a trace (its first row has no "timestamp"); '
            "a prompts file goes to --dataset or --workload"
        )
    load_trace(trace, "--trace")  # its errors name the flag it came from
    return str(trace)


Synthetic = LengthDistribution | SharedPrefix | MultiTurn


def parameters(source: Synthetic) -> list[str]:
    """The `key=value` parameters a built-in kind takes: its counts and length medians."""
    names = [f.name for f in fields(source)]
    medians = [f"{n}_median" for n in names if isinstance(getattr(source, n), LogNormal)]
    return [n for n in names if n in TUNABLE] + medians


def with_params(source: Synthetic, text: str, where: str) -> Synthetic:
    """`source` with `key=value,...` applied (whole numbers; a `_median` sets that length's
    median); UsageError naming the bad key otherwise."""
    if not text:
        return source
    known = parameters(source)
    changes: dict[str, Any] = {}  # field name -> new value, checked above
    seen: set[str] = set()
    for item in text.split(","):
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in known:
            raise UsageError(
                f"{where}: unknown parameter {key!r} ({source.name} takes {', '.join(known)})"
            )
        if key in seen:
            raise UsageError(f"{where}: {key} is given twice; give each parameter once")
        seen.add(key)
        try:
            number = int(value)
        except ValueError:
            raise UsageError(f"{where}: {key} must be a whole number, not {value!r}") from None
        if key.endswith("_median"):
            field_name = key.removesuffix("_median")
            length: LogNormal = getattr(source, field_name)
            # A median above the clamp would only make every draw the clamp.
            if not length.low <= number <= length.high:
                raise UsageError(
                    f"{where}: {key} must be from {length.low} to {length.high} "
                    f"(the {field_name} length's bounds), not {number}"
                )
            changes[field_name] = replace(length, median=number)
        else:
            low = 0 if key == "system_len" else 1
            if not low <= number <= MAX_TOKENS:
                raise UsageError(f"{where}: {key} must be from {low} to {MAX_TOKENS}, not {number}")
            changes[key] = number
    return replace(source, **changes)


def check_endpoint(endpoint: str, workload: Workload, label: str = "--endpoint") -> None:
    """Refuse token-id prompts on the chat endpoint. Its messages are text, so ids would go
    as their decimal digits: prompts several times longer than the workload says, and no
    block a trace or shared prefix means is sent as it is. UsageError of one line."""
    if endpoint != "chat" or (workload.source is None and workload.prompts_from_file):
        return
    what = "random token ids" if workload.source is None else f"{workload.source.name} (token ids)"
    raise UsageError(
        f"{label} chat sends text, and this workload is {what}: use {label} generate or"
        " completions (they take ids as they are), or give chat text prompts (a dataset file,"
        " or the chat-prompts workload)"
    )
