"""Check launch arguments with the profile's own SGLang parser, in a subprocess.

Importing SGLang pulls torch (seconds), so the console never does it: it runs
`sglang_probe.py` with the profile's interpreter. Results are cached per (interpreter,
SGLang version, argv), since the parser only changes when SGLang does.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.core.errors import ConsoleError
from console.core.jsonio import atomic_write_json
from console.core.paths import cache_dir

PROBE_PATH = Path(__file__).with_name("sglang_probe.py")
CACHE_LIMIT = 512
SGLANG_CLI_TABLE = Path(__file__).parent.parent / "sim" / "data" / "sglang_cli_0.5.23.json"
"""sglang 0.5.23's `sglang serve` parser dumped action by action (scripts/dump_sglang_cli.py;
the simulator rebuilds its parser from it): read here as data, for its option strings."""


@functools.cache
def sglang_long_options() -> frozenset[str]:
    """Every `--option` string of SGLang 0.5.23's server parser (empty if the table is gone)."""
    try:
        data = json.loads(SGLANG_CLI_TABLE.read_text(encoding="utf-8"))
        return frozenset(
            str(option)
            for action in data["actions"]
            for option in action["option_strings"]
            if str(option).startswith("--")
        )
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()


def resolve_long_option(token: str, wanted: Iterable[str]) -> str | None:
    """Which of the `wanted` long options SGLang's parser would take `token` (`--flag`,
    `--flag=value`) as: an exact match, or a prefix of that option and of no other
    (argparse's allow_abbrev, on by default: sglang 0.5.23 srt/server_args.py:679-680). An
    ambiguous prefix is no option at all: SGLang refuses it by itself."""
    flag = token.split("=", 1)[0]
    if not flag.startswith("--") or len(flag) < 3:
        return None
    wanted = tuple(wanted)
    if flag in wanted:
        return flag
    options = sglang_long_options() or frozenset(wanted)
    if flag in options:
        return None  # an option of its own: an exact match wins over prefixes
    matches = [option for option in options if option.startswith(flag)]
    return matches[0] if len(matches) == 1 and matches[0] in wanted else None


class FlagCheckUnavailable(ConsoleError):
    """The interpreter is missing, has no SGLang, or did not answer in time."""


@dataclass(frozen=True)
class FlagProblem:
    kind: str
    """`unknown`, `ambiguous`, `invalid` or `unchecked`."""
    flag: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "flag": self.flag, "message": self.message}


@dataclass(frozen=True)
class FlagCheckResult:
    ok: bool
    problems: tuple[FlagProblem, ...]
    sglang_version: str
    interpreter: str
    cached: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problems": [p.to_json() for p in self.problems],
            "sglang_version": self.sglang_version,
            "interpreter": self.interpreter,
            "cached": self.cached,
        }


def resolve_interpreter(python: str) -> str:
    """Absolute path of the interpreter, or FlagCheckUnavailable naming it."""
    expanded = os.path.expanduser(python)
    found = expanded if os.sep in expanded else shutil.which(expanded)
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise FlagCheckUnavailable(
            f"SGLang interpreter {python!r} not found",
            hint="set [sglang].python in the profile to the python of the venv SGLang is in",
        )
    return os.path.abspath(found)


def sglang_version(python: str, timeout: float = 30.0) -> str:
    interpreter = resolve_interpreter(python)
    answer = _run_probe(interpreter, ["--version-only"], None, timeout)
    return str(answer["version"])


def _run_probe(
    interpreter: str, extra_args: list[str], stdin: str | None, timeout: float
) -> dict[str, Any]:
    try:
        completed = subprocess.run(
            [interpreter, str(PROBE_PATH), *extra_args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise FlagCheckUnavailable(
            f"SGLang's parser in {interpreter} did not answer within {timeout:.0f} s"
        ) from None
    except OSError as exc:
        raise FlagCheckUnavailable(f"cannot run {interpreter}: {exc.strerror or exc}") from None
    if completed.returncode != 0:
        last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        if "PackageNotFoundError" in completed.stderr or "No module named 'sglang" in last:
            raise FlagCheckUnavailable(
                f"no sglang installed in {interpreter}",
                hint="point [sglang].python at the interpreter of your SGLang venv",
            )
        raise FlagCheckUnavailable(f"SGLang's parser in {interpreter} failed: {last}")
    try:
        answer = json.loads(completed.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise FlagCheckUnavailable(
            f"SGLang's parser in {interpreter} gave no readable answer"
        ) from None
    if not isinstance(answer, dict):
        raise FlagCheckUnavailable(f"SGLang's parser in {interpreter} gave no readable answer")
    return answer


def _cache_key(interpreter: str, version: str, args: list[str]) -> str:
    digest = hashlib.sha256(json.dumps(_stable(args)).encode()).hexdigest()[:24]
    return f"{interpreter}|{version}|{digest}"


def _stable(args: list[str]) -> list[str]:
    """The arguments with a multi-node plan's rendezvous address (a port picked free at each
    plan) replaced by a placeholder: the same flags check the same whatever the port."""
    out: list[str] = []
    for index, arg in enumerate(args):
        if index and args[index - 1] == "--dist-init-addr":
            out.append("HOST:PORT")
        elif arg.startswith("--dist-init-addr="):
            out.append("--dist-init-addr=HOST:PORT")
        else:
            out.append(arg)
    return out


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _result(entry: dict[str, Any], version: str, interpreter: str, cached: bool) -> FlagCheckResult:
    problems = tuple(
        FlagProblem(str(p.get("kind", "")), str(p.get("flag", "")), str(p.get("message", "")))
        for p in entry.get("problems", [])
    )
    return FlagCheckResult(not problems, problems, version, interpreter, cached)


def check_args(
    python: str,
    args_by_key: dict[str, list[str]],
    *,
    timeout: float = 180.0,
    cache_file: Path | None = None,
) -> dict[str, FlagCheckResult]:
    """Check each argv (arguments after the entry point) with SGLang's parser."""
    interpreter = resolve_interpreter(python)
    version = sglang_version(interpreter, timeout=min(timeout, 30.0))
    path = cache_file or cache_dir() / "flagcheck.json"
    cache = _load_cache(path)
    results: dict[str, FlagCheckResult] = {}
    missing: dict[str, list[str]] = {}
    for key, args in args_by_key.items():
        entry = cache.get(_cache_key(interpreter, version, args))
        if isinstance(entry, dict):
            results[key] = _result(entry, version, interpreter, cached=True)
        else:
            missing[key] = args
    if missing:
        answer = _run_probe(interpreter, [], json.dumps({"argvs": missing}), timeout)
        fresh = answer.get("results", {})
        for key, args in missing.items():
            entry = fresh.get(key)
            if not isinstance(entry, dict):
                raise FlagCheckUnavailable(f"SGLang's parser gave no answer for {key}")
            results[key] = _result(entry, version, interpreter, cached=False)
            cache[_cache_key(interpreter, version, args)] = {"problems": entry.get("problems", [])}
        while len(cache) > CACHE_LIMIT:
            cache.pop(next(iter(cache)))
        try:
            atomic_write_json(path, cache)
        except OSError:
            pass
    return results
