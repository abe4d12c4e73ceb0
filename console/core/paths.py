"""Where ddconsole keeps state, user configuration and caches (XDG base directories)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from console.core.errors import StateError


def _xdg(var: str, default: str) -> Path:
    value = os.environ.get(var, "").strip()
    return Path(value) if value and os.path.isabs(value) else Path.home() / default


def config_dir() -> Path:
    """`$XDG_CONFIG_HOME/ddconsole`: user profiles live in its `profiles/` folder."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "ddconsole"


def user_profiles_dir() -> Path:
    return config_dir() / "profiles"


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/ddconsole`: results that can be recomputed (flag checks, venvs)."""
    return _xdg("XDG_CACHE_HOME", ".cache") / "ddconsole"


def state_root(demo: bool) -> Path:
    """`$XDG_STATE_HOME/ddconsole`, or `ddconsole-demo` for demo mode (kept apart)."""
    name = "ddconsole-demo" if demo else "ddconsole"
    return _xdg("XDG_STATE_HOME", ".local/state") / name


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) with mode 0700, or fail with a clear message."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.stat().st_mode & 0o077:
            path.chmod(0o700)
    except OSError as exc:
        raise StateError(
            f"cannot use state directory {path}: {exc.strerror or exc}",
            hint="set XDG_STATE_HOME to a writable directory",
        ) from exc
    return path


@dataclass(frozen=True)
class StatePaths:
    """The layout of one state directory (real or demo)."""

    root: Path

    @property
    def servers(self) -> Path:
        return self.root / "servers"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def recordings(self) -> Path:
        return self.root / "recordings"

    @property
    def locks(self) -> Path:
        return self.root / "locks"

    @property
    def sim_gpu(self) -> Path:
        """Where demo-mode simulator processes publish their simulated GPU load."""
        return self.root / "sim-gpu"

    def ensure(self) -> StatePaths:
        for path in (self.root, self.servers, self.logs, self.runs, self.recordings, self.locks):
            ensure_private_dir(path)
        return self

    @classmethod
    def for_mode(cls, demo: bool) -> StatePaths:
        return cls(state_root(demo))
