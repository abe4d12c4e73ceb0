"""The user's console settings: `$XDG_CONFIG_HOME/ddconsole/config.toml`.

    [console]
    read_only = false          # show everything, refuse every action (shared boxes)
    fold_stopped_after = "1h"  # stopped servers older than this are folded away

A missing file gives the defaults; a damaged one is a UsageError naming the file and key.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from console.core.errors import UsageError
from console.core.paths import config_dir

DEFAULT_FOLD_STOPPED_AFTER_S = 3600.0
MAX_SETTINGS_BYTES = 1 << 20
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|d)?\s*$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True, kw_only=True)
class Settings:
    read_only: bool = False
    fold_stopped_after_s: float = DEFAULT_FOLD_STOPPED_AFTER_S
    """Stopped servers that ended longer ago than this are hidden unless asked for."""
    path: Path | None = None
    """The file these came from (None: defaults, no file)."""


def settings_path() -> Path:
    return config_dir() / "config.toml"


def parse_duration(text: str) -> float:
    """`90`, `90s`, `15m`, `1h`, `2d` in seconds (ValueError otherwise)."""
    found = _DURATION.match(text)
    if found is None:
        raise ValueError(f"{text!r} is not a duration (write 90s, 15m, 1h or 2d)")
    return float(found[1]) * _UNIT_S[found[2] or "s"]


def load_settings(path: Path | None = None) -> Settings:
    path = settings_path() if path is None else path
    try:
        raw = path.read_bytes()[: MAX_SETTINGS_BYTES + 1]
    except FileNotFoundError:
        return Settings()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if len(raw) > MAX_SETTINGS_BYTES:
        raise UsageError(f"{path}: larger than {MAX_SETTINGS_BYTES} bytes; is it the right file?")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from exc
    section = data.get("console", {})
    if not isinstance(section, dict):
        raise UsageError(f"{path}: console: must be a table ([console])")
    unknown = sorted(set(section) - {"read_only", "fold_stopped_after"})
    if unknown:
        raise UsageError(
            f"{path}: console.{unknown[0]}: unknown setting",
            hint="known settings: read_only, fold_stopped_after",
        )
    read_only = section.get("read_only", False)
    if not isinstance(read_only, bool):
        raise UsageError(f"{path}: console.read_only: must be true or false")
    fold = section.get("fold_stopped_after", DEFAULT_FOLD_STOPPED_AFTER_S)
    if isinstance(fold, bool) or not isinstance(fold, int | float | str):
        raise UsageError(f'{path}: console.fold_stopped_after: must be a duration like "1h"')
    try:
        fold_s = parse_duration(fold) if isinstance(fold, str) else float(fold)
    except ValueError as exc:
        raise UsageError(f"{path}: console.fold_stopped_after: {exc}") from exc
    if not 0 <= fold_s <= 365 * 86400:
        raise UsageError(f"{path}: console.fold_stopped_after: must be between 0 and 365d")
    return Settings(read_only=read_only, fold_stopped_after_s=fold_s, path=path)
