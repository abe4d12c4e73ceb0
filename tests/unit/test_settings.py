"""The console settings file: defaults, durations, and damage named by file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.errors import UsageError
from console.core.settings import DEFAULT_FOLD_STOPPED_AFTER_S, load_settings, parse_duration


def test_a_missing_file_gives_the_defaults(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "config.toml")
    assert settings.read_only is False
    assert settings.fold_stopped_after_s == DEFAULT_FOLD_STOPPED_AFTER_S
    assert settings.path is None


def test_settings_are_read(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[console]\nread_only = true\nfold_stopped_after = "15m"\n')
    settings = load_settings(path)
    assert settings.read_only is True
    assert settings.fold_stopped_after_s == 900.0
    assert settings.path == path


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("1.5m", 90.0), ("2h", 7200.0), ("1d", 86400.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("[console\n", "not valid TOML"),
        ("console = 3\n", "console: must be a table"),
        ("[console]\nread_onyl = true\n", "console.read_onyl: unknown setting"),
        ('[console]\nread_only = "yes"\n', "console.read_only: must be true or false"),
        ('[console]\nfold_stopped_after = "soon"\n', "console.fold_stopped_after"),
        ("[console]\nfold_stopped_after = -5\n", "between 0 and 365d"),
        ("[console]\nfold_stopped_after = nan\n", "between 0 and 365d"),
    ],
)
def test_damage_names_the_file_and_key(tmp_path: Path, body: str, named: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(body)
    with pytest.raises(UsageError) as caught:
        load_settings(path)
    assert str(path) in str(caught.value)
    assert named in str(caught.value)
