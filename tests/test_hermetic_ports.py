"""The suite's port hygiene: launches in tests go to free ports, never a profile's fixed one.

A real SGLang host or a CI machine often holds SGLang's default port 30000 (sglang 0.5.23
srt/arg_groups/fields/serving.py:66), which the shipped qwen3.6-27b profile also listens on.
"""

from __future__ import annotations

import json
import tomllib

import pytest

from tests.conftest import (
    REPO,
    SGLANG_DEFAULT_PORT,
    CliResult,
    fixed_ports,
    shipped_profile_names,
    shipped_profile_on_port,
)

LAYOUT = {"qwen3.6-27b": "tp1", "kimi-k2.6": "tp8"}


def _plan(cli, name: str) -> dict:
    result: CliResult = cli("plan", name, "--layout", LAYOUT[name], "--demo", "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_fixed_ports_are_the_shipped_profiles_and_sglangs_default():
    shipped = {
        tomllib.loads(path.read_text())["server"]["port"]
        for path in (REPO / "profiles").glob("*.toml")
    }
    assert fixed_ports() == shipped | {SGLANG_DEFAULT_PORT}
    assert set(shipped_profile_names()) == set(LAYOUT)


def test_free_port_profiles_move_every_shipped_profile_off_its_port(
    cli, free_port_profiles: dict[str, int]
):
    assert set(free_port_profiles) == set(LAYOUT)
    assert len(set(free_port_profiles.values())) == len(free_port_profiles)
    listing = cli("profiles", "list")
    assert listing.out.count("user (overrides shipped)") == len(LAYOUT), listing.out
    for name, port in free_port_profiles.items():
        plan = _plan(cli, name)
        assert plan["port"] == port
        assert port not in fixed_ports()
        assert f"--port {port}" in plan["command_line"]
        assert not [w for w in plan["warnings"] if w["code"] == "port-busy"], plan["warnings"]


def test_a_shipped_profiles_own_port_is_held_while_the_suite_runs(cli, hold_fixed_ports):
    """The session holds the fixed ports, so a test that launches a shipped profile on its
    own port fails on every machine. A port that another process held when the session
    began (a real server, another xdist worker) is that process's to hold, and may be
    released before this test runs: only the ports this session holds are checked."""
    checked = 0
    for name in LAYOUT:
        plan = _plan(cli, name)
        assert plan["port"] in fixed_ports()
        if plan["port"] in hold_fixed_ports:
            assert any(w["code"] == "port-busy" for w in plan["warnings"]), plan["warnings"]
            checked += 1
    if not checked:
        pytest.skip("every shipped profile's port was held by another process at session start")


def test_shipped_profile_on_port_changes_only_the_port():
    for name in LAYOUT:
        original = (REPO / "profiles" / f"{name}.toml").read_text()
        moved = shipped_profile_on_port(name, 41234)
        assert tomllib.loads(moved)["server"]["port"] == 41234
        changed = [
            (a, b) for a, b in zip(original.splitlines(), moved.splitlines(), strict=True) if a != b
        ]
        assert len(changed) == 1, changed
