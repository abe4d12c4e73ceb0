"""`ddconsole completion bash` driven in a real bash: source the script, set COMP_WORDS and
COMP_CWORD, call the function, read COMPREPLY. Dynamic values come from disk: profiles
(shipped and the user's), their layouts and variants, server ids and run ids."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.cli.cmd_plan import make_plan
from console.cli.services import Services
from console.core.net import free_port
from console.core.paths import StatePaths
from console.server.records import Records, ServerRecord
from tests.conftest import REPO, shipped_profile_on_port

DDCONSOLE = Path(sys.executable).with_name("ddconsole")
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    result = subprocess.run(
        [str(DDCONSOLE), "completion", "bash"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "complete -F _ddconsole_complete ddconsole" in result.stdout
    path = tmp_path / "ddconsole.bash"
    path.write_text(result.stdout)
    return path


def complete(script: Path, *words: str, cwd: Path | None = None) -> list[str]:
    """COMPREPLY for the command line `ddconsole WORDS...` with the cursor on the last word."""
    line = " ".join(f"'{w}'" for w in ("ddconsole", *words))
    program = f"""
        source '{script}'
        COMP_WORDS=({line})
        COMP_CWORD={len(words)}
        _ddconsole_complete
        printf '%s\\n' "${{COMPREPLY[@]}}"
    """
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    env["PATH"] = "/usr/bin:/bin"  # ddconsole not on PATH: the script's own path is used
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or REPO,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return [line for line in result.stdout.splitlines() if line]


def test_verbs_subverbs_and_flags(script: Path):
    assert complete(script, "pr") == ["profiles", "prune"]
    assert {"list", "show", "compare", "import", "stop"} <= set(complete(script, "runs", ""))
    assert complete(script, "up", "qwen3.6-27b", "--lay") == ["--layout"]
    assert "--older-than" in complete(script, "prune", "--")
    assert complete(script, "completion", "") == ["bash", "zsh", "fish"]
    assert complete(script, "bench", "--endpoint", "c") == ["chat", "completions"]
    assert "run-request" not in complete(script, "")


def test_profiles_layouts_and_variants(script: Path, user_profiles: Path):
    (user_profiles / "qwen-mybox.toml").write_text(shipped_profile_on_port("qwen3.6-27b"))
    assert complete(script, "up", "qw") == ["qwen-mybox", "qwen3.6-27b"]
    assert complete(script, "profiles", "show", "k") == ["kimi-k2.6"]
    assert complete(script, "plan", "qwen3.6-27b", "--layout", "") == [
        "tp1",
        "tp4",
        "tp8",
        "dp2",
        "dp2-gateway",
    ]
    # bash splits `--layout=tp` at `=`
    assert complete(script, "up", "qwen3.6-27b", "--layout", "=", "tp") == ["tp1", "tp4", "tp8"]
    assert complete(script, "up", "kimi-k2.6", "-v", "") == [
        "off",
        "eagle3",
        "dflash",
        "dflash-no-overlap",
        "ddtree-b15",
        "ddtree-b32",
        "ddtree-b64",
    ]
    assert complete(script, "switch", "qwen3.6-27b", "--variant", "ddtree") == [
        "ddtree-b15",
        "ddtree-b32",
        "ddtree-b64",
    ]
    # A profile that does not parse offers nothing, and never a traceback.
    (user_profiles / "broken.toml").write_text("[layouts\n")
    assert complete(script, "up", "broken", "--layout", "") == []


def test_server_ids_and_run_ids(script: Path):
    services = Services.create(demo=True)
    plan = make_plan(services, "qwen3.6-27b", "tp1", "off", free_port())
    paths = services.state.ensure()
    Records(paths).save(
        ServerRecord(
            id="qwen3.6-27b-tp1-7",
            plan=plan,
            log_path=str(paths.logs / "qwen3.6-27b-tp1-7.log"),
            launched_wall=time.time(),
            launched_by_pid=os.getpid(),
        )
    )
    run = paths.runs / "20261201-101500-bench-qwen3.6-27b-tp1-off"
    run.mkdir(parents=True)
    (run / "run.json").write_text("{}")

    assert complete(script, "--demo", "down", "q") == ["qwen3.6-27b-tp1-7"]
    assert complete(script, "logs", "--demo", "") == ["qwen3.6-27b-tp1-7"]
    assert complete(script, "bench", "--demo", "--server", "") == ["qwen3.6-27b-tp1-7"]
    assert complete(script, "--demo", "runs", "show", "2026") == [run.name]
    # The real state dir has neither.
    assert StatePaths.for_mode(False).root != paths.root
    assert complete(script, "down", "q") == []
    assert complete(script, "runs", "show", "") == []


def test_file_arguments_use_the_shells_own_completion(script: Path, tmp_path: Path):
    (tmp_path / "campaigns").mkdir()
    (tmp_path / "campaigns" / "night.toml").write_text("")
    assert complete(script, "campaign", "camp", cwd=tmp_path) == ["campaigns"]
    assert complete(script, "campaign", "campaigns/n", cwd=tmp_path) == ["campaigns/night.toml"]


def test_sim_completes_sglangs_own_flags(script: Path):
    assert complete(script, "sim", "--served-model") == ["--served-model-name"]
    assert complete(script, "sim", "--sim-f") == ["--sim-fault"]


def test_zsh_and_fish_scripts_call_the_same_helper():
    for shell, marker in (
        ("zsh", "compdef _ddconsole ddconsole"),
        ("fish", "complete -c ddconsole"),
    ):
        text = subprocess.run(
            [str(DDCONSOLE), "completion", shell], capture_output=True, text=True, check=True
        ).stdout
        assert marker in text
        assert f"__complete {shell} --" in text
        assert str(DDCONSOLE) in text


def test_a_flag_and_its_value_in_one_word(isolated_dirs: Path):
    """zsh and fish hand `--layout=tp` over as one word: the value is completed, the flag
    kept."""
    result = subprocess.run(
        [str(DDCONSOLE), "__complete", "zsh", "--", "up", "qwen3.6-27b", "--layout=tp"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.split() == ["--layout=tp1", "--layout=tp4", "--layout=tp8"]


def test_the_helper_never_prints_a_traceback(isolated_dirs: Path):
    state = isolated_dirs / "xdg_state_home" / "ddconsole-demo"
    state.mkdir(parents=True)
    (state / "servers").write_text("not a folder")
    result = subprocess.run(
        [str(DDCONSOLE), "__complete", "bash", "--", "--demo", "down", ""],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    assert result.stderr == ""
    assert result.stdout == ""


def test_host_names_from_the_hosts_file(script: Path, user_profiles: Path):
    (user_profiles.parent / "hosts.toml").write_text(
        '[[host]]\nname = "alpha"\ntarget = "ops@gpu2.lan:22"\n\n'
        '[[host]]\nname = "beta"\ntarget = "gpu3"\n'
    )
    assert complete(script, "--host", "") == ["local", "alpha", "beta"]
    assert complete(script, "--host", "al") == ["alpha"]
    assert {"plan", "profiles", "ps"} <= set(complete(script, "--host", "alpha", "p"))
    # A damaged hosts file completes nothing, and no traceback reaches the shell.
    (user_profiles.parent / "hosts.toml").write_text("[[host]\n")
    assert complete(script, "--host", "") == []
