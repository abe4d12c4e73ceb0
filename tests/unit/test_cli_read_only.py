"""Read-only on the command line (issue 18): `--read-only` and `read_only = true` refuse every
verb that starts, stops or changes servers and runs, with one line naming why and how to act;
the verbs that only look keep working. A trial ran `ddconsole --read-only down X` and it
stopped the server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from console.cli.parser import build_parser
from console.cli.read_only import CHANGING_VERBS
from tests.conftest import CliResult

CHANGING = [
    ("up", "qwen3.6-27b", "--layout", "tp1"),
    ("down", "--all"),
    ("restart", "some-server"),
    ("switch", "qwen3.6-27b", "--layout", "tp1"),
    ("bench", "--server", "some-server"),
    ("campaign", "campaigns/qwen-ddtree-budgets.toml"),
    ("runs", "stop", "some-run", "--yes"),
    ("prune", "--yes"),
]


def test_every_changing_verb_is_listed() -> None:
    """The table names real handlers (a renamed handler would silently escape it)."""
    parser = build_parser()
    handlers = set()
    for argv in CHANGING:
        handler = parser.parse_args([*argv, "--demo"]).handler
        handlers.add((handler.__module__, handler.__name__))
    assert handlers == set(CHANGING_VERBS)


@pytest.mark.parametrize("argv", CHANGING, ids=[" ".join(a[:2]) for a in CHANGING])
def test_the_flag_refuses_a_changing_verb(
    argv: tuple[str, ...], cli: Callable[..., CliResult]
) -> None:
    result = cli("--read-only", *argv, "--demo")
    assert result.code == 2, result.err
    assert "read-only (--read-only)" in result.err
    assert "is refused" in result.err
    assert "run it without --read-only" in result.err


def test_the_setting_refuses_and_names_its_file(
    cli: Callable[..., CliResult], isolated_dirs: Path
) -> None:
    config = isolated_dirs / "xdg_config_home" / "ddconsole" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[console]\nread_only = true\n")
    refused = cli("up", "qwen3.6-27b", "--layout", "tp1", "--demo")
    assert refused.code == 2
    assert f"read_only = true in {config}" in refused.err
    # Nothing was started, and the verbs that only look still work.
    listed = cli("ps", "--json", "--demo")
    assert listed.code == 0, listed.err
    assert listed.out.strip() == "[]"
    assert cli("profiles", "list", "--demo").code == 0
