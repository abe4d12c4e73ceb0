"""Bad profile files: exit status 2 and one message naming the file, key path and problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO

GOOD = (REPO / "profiles" / "qwen3.6-27b.toml").read_text()

# (case id, edit to the good Qwen profile, expected key path, words the reason must contain)
CASES = [
    (
        "unknown-key",
        lambda t: t.replace("[model]\n", '[model]\ncolour = "blue"\n'),
        "model.colour",
        ["unknown key 'colour'", "architecture"],
    ),
    (
        "wrong-type",
        lambda t: t.replace("tp = 4\n", 'tp = "four"\n'),
        "layouts.tp4.tp",
        ["expected an integer", "'four'"],
    ),
    (
        "tp-mismatch",
        lambda t: t.replace("tp = 4\n", "tp = 2\n"),
        "layouts.tp4",
        ["tp (2) x dp (1) = 2 GPUs", "gpus lists 4"],
    ),
    (
        "duplicate-gpu",
        lambda t: t.replace("gpus = [0, 1, 2, 3]", "gpus = [0, 1, 1, 3]"),
        "layouts.tp4",
        ["GPU 1 is listed twice"],
    ),
    (
        "port-out-of-range",
        lambda t: t.replace("port = 30000", "port = 70000"),
        "server.port",
        ["70000", "out of range"],
    ),
    (
        "missing-model-path",
        lambda t: t.replace('path = "Qwen/Qwen3.6-27B"\n', ""),
        "model.path",
        ["required key is missing"],
    ),
    (
        "unknown-algorithm",
        lambda t: t.replace('algorithm = "NEXTN"', 'algorithm = "MEDUSA"'),
        "variants.mtp.algorithm",
        ["unknown speculative algorithm 'MEDUSA'", "DDTREE"],
    ),
    (
        "toml-syntax",
        lambda t: t.replace("tp = 4\n", "tp = = 4\n"),
        "",
        ["TOML syntax error", "line"],
    ),
]


@pytest.mark.parametrize(("case", "edit", "key_path", "words"), CASES, ids=[c[0] for c in CASES])
def test_bad_profile_is_one_clear_message(cli, user_profiles: Path, case, edit, key_path, words):
    path = user_profiles / "qwen3.6-27b.toml"
    path.write_text(edit(GOOD))
    result = cli("plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "off", "--demo")
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    message = lines[0]
    assert "Traceback" not in result.err
    assert str(path) in message
    if key_path:
        assert f"{path}: {key_path}: " in message
    for word in words:
        assert word in message


def test_gpu_not_on_host(cli, user_profiles: Path):
    path = user_profiles / "qwen3.6-27b.toml"
    path.write_text(GOOD.replace("gpus = [0]", "gpus = [9]"))
    result = cli("plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "off", "--demo")
    assert result.code == 2
    message = result.err.strip()
    assert len(message.splitlines()) == 1
    assert f"{path}: layouts.tp1.gpus[0]: GPU 9 is not on this host" in message
    assert "0-7" in message


def test_broken_user_profile_does_not_hide_good_ones(cli, user_profiles: Path):
    (user_profiles / "mine.toml").write_text("[model\n")
    result = cli("profiles", "list")
    assert result.code == 0
    assert "qwen3.6-27b" in result.out
    assert "kimi-k2.6" in result.out
    mine = next(line for line in result.out.splitlines() if line.startswith("mine "))
    assert "BROKEN" in mine
    assert "TOML syntax error" in mine

    listed = cli("profiles", "list", "--json")
    import json

    entries = {e["name"]: e for e in json.loads(listed.out)}
    assert entries["mine"]["ok"] is False
    assert "TOML syntax error" in entries["mine"]["error"]["reason"]
    assert entries["qwen3.6-27b"]["ok"] is True


def test_user_profile_overrides_shipped(cli, user_profiles: Path):
    (user_profiles / "kimi-k2.6.toml").write_text(
        (REPO / "profiles" / "kimi-k2.6.toml").read_text().replace("port = 30010", "port = 31111")
    )
    result = cli("plan", "kimi-k2.6", "--demo", "--json")
    assert result.code == 0
    import json

    assert json.loads(result.out)["port"] == 31111
    listing = cli("profiles", "list")
    assert "user (overrides shipped)" in listing.out


def test_api_key_in_args_is_refused(cli, user_profiles: Path):
    path = user_profiles / "qwen3.6-27b.toml"
    path.write_text(
        GOOD.replace(
            'args = [\n    "--trust-remote-code"',
            'args = [\n    "--api-key", "sekret", "--trust-remote-code"',
        )
    )
    result = cli("profiles", "show", "qwen3.6-27b")
    assert result.code == 2
    assert "server.args" in result.err
    assert "api_key_env" in result.err
    assert "sekret" not in result.err
