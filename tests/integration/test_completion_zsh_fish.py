"""`ddconsole completion zsh|fish` in the real shells (skipped where they are not installed):
fish's own `complete -C` answers for a command line; zsh's completion builtins are stood in
for by functions that print what they were given, around the script's own function."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DDCONSOLE = Path(sys.executable).with_name("ddconsole")


def script(shell: str, folder: Path) -> Path:
    text = subprocess.run(
        [str(DDCONSOLE), "completion", shell], capture_output=True, text=True, check=True
    ).stdout
    path = folder / f"ddconsole.{shell}"
    path.write_text(text)
    return path


@pytest.mark.skipif(shutil.which("fish") is None, reason="no fish here")
def test_fish_completes_verbs_values_and_flag_equals_value(tmp_path: Path):
    path = script("fish", tmp_path)
    (tmp_path / "night.toml").write_text("")

    def complete(line: str) -> list[str]:
        done = subprocess.run(
            ["fish", "--no-config", "-c", f"source {path}; complete -C '{line}'"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        )
        assert "Traceback" not in done.stderr
        return [row.split("\t")[0] for row in done.stdout.splitlines()]

    assert complete("ddconsole pr") == ["profiles", "prune"]
    assert complete("ddconsole up qwen3.6-27b --layout ") == [
        "dp2",
        "dp2-gateway",
        "tp1",
        "tp4",
        "tp8",
    ]  # fish sorts
    assert complete("ddconsole up qwen3.6-27b --layout=t") == [
        "--layout=tp1",
        "--layout=tp4",
        "--layout=tp8",
    ]
    assert complete("ddconsole campaign nig") == ["night.toml"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="no zsh here")
def test_zsh_function_offers_the_helpers_answers(tmp_path: Path):
    path = script("zsh", tmp_path)

    def complete(*words: str) -> list[str]:
        quoted = " ".join(f"'{w}'" for w in ("ddconsole", *words))
        program = f"""
            compdef() {{ print -r -- "compdef $*" }}
            compadd() {{ shift 2; print -l -- "$@" }}
            _files() {{ print -r -- FILES }}
            source {path}
            words=({quoted}); CURRENT={len(words) + 1}
            _ddconsole
        """
        done = subprocess.run(
            ["zsh", "-f", "-c", program],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        )
        lines = done.stdout.splitlines()
        assert lines[0] == "compdef _ddconsole ddconsole"  # eval'd: it registers itself
        return lines[1:]

    assert complete("pr") == ["profiles", "prune"]
    assert complete("up", "kimi-k2.6", "--variant", "") == [
        "off",
        "eagle3",
        "dflash",
        "dflash-no-overlap",
        "ddtree-b15",
        "ddtree-b32",
        "ddtree-b64",
    ]
    assert complete("campaign", "") == ["FILES"]
