"""F6: the API key reaches SGLang through a `--config` named pipe, never a command line."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from console.core.redact import MASK
from console.server.keypipe import KeyPipeError, hand_over
from console.sim.options import OptionsError, merge_config, parse
from tests.sglang_fork import SglangForkServer

PLAN = {"api_key_env": "MY_KEY", "admin_api_key_env": "MY_ADMIN"}
ENV = {"MY_KEY": 'sk-"quoted"\\key-0123456789', "MY_ADMIN": "adm-9876543210"}


def test_placeholders_become_one_config_pipe_read_as_often_as_asked() -> None:
    command = ["python", "-m", "console.sim", "--api-key", MASK, "--admin-api-key", MASK, "--x"]
    argv, pipe = hand_over(command, PLAN, ENV)
    assert pipe is not None
    try:
        assert argv == ["python", "-m", "console.sim", "--x", "--config", str(pipe.path)]
        assert not any(value in " ".join(argv) for value in ENV.values())
        assert stat.S_ISFIFO(pipe.path.stat().st_mode)
        assert stat.S_IMODE(pipe.path.parent.stat().st_mode) == 0o700
        for _ in range(2):  # `sglang serve` may read it to pick a backend, then to parse it
            assert merge_config(["--config", str(pipe.path), "--port", "1"]) == [
                *("--api-key", ENV["MY_KEY"], "--admin-api-key", ENV["MY_ADMIN"]),
                *("--port", "1"),
            ]
        options = parse(["--model-path", "m", "--config", str(pipe.path)], environ={})
        assert options.server_args["api_key"] == ENV["MY_KEY"]
        assert pipe.secrets == set(ENV.values())
    finally:
        pipe.close()
    assert not pipe.path.parent.exists()


def test_nothing_to_hand_over_and_refusals() -> None:
    plain = ["sglang", "--port", "1", "--api-key", "real"]  # no placeholder: left as it is
    assert hand_over(plain, PLAN, ENV) == (plain, None)
    with pytest.raises(KeyPipeError, match="MY_KEY"):
        hand_over(["x", "--api-key", MASK], PLAN, {})
    with pytest.raises(KeyPipeError, match="--config"):
        hand_over(["x", "--config", "a.yaml", "--api-key", MASK], PLAN, ENV)


def test_the_simulator_refuses_config_files_as_sglang_does(tmp_path: Path) -> None:
    text = tmp_path / "c.txt"
    text.write_text("port: 5\n")
    with pytest.raises(OptionsError, match="must be YAML format"):
        merge_config(["--config", str(text)])
    with pytest.raises(OptionsError, match="not found"):
        merge_config(["--config", str(tmp_path / "none.yaml")])
    with pytest.raises(OptionsError, match="Only one allowed"):
        merge_config(["--config", "a.yaml", "--config", "b.yaml"])
    good = tmp_path / "c.yaml"
    good.write_text(f"# c\nport: 5\nenable-metrics: true\nhost: {json.dumps('::1')}\n")
    assert merge_config(["--config", str(good), "--port", "6"]) == [
        *("--port", "5", "--enable-metrics", "--host", "::1", "--port", "6")
    ]


def test_a_profile_config_file_cannot_meet_a_key(cli, user_profiles: Path) -> None:
    from tests.conftest import REPO

    text = (REPO / "profiles" / "qwen3.6-27b.toml").read_text()
    text = text.replace("[server]\n", '[server]\napi_key_env = "MY_KEY"\n', 1)
    text = text.replace(
        'args = [\n    "--trust-remote-code"',
        'args = ["--config", "x.yaml", "--trust-remote-code"',
        1,
    )
    (user_profiles / "qwen3.6-27b.toml").write_text(text)
    result = cli("plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "off", "--demo")
    assert result.code == 2
    assert "--config cannot be combined with server.api_key_env" in result.err


_REAL_READ = """
import argparse, sys
from sglang.cli.utils import get_pipeline_class_name
from sglang.srt.server_args import ServerArgs
from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger
argv = ["--model-path", "m", "--port", "1234", "--config", sys.argv[1]]
get_pipeline_class_name(argv)  # `sglang serve` reads the file once to pick a backend
parser = argparse.ArgumentParser(prog="sglang serve")
ServerArgs.add_cli_args(parser)
ns = parser.parse_args(ConfigArgumentMerger(parser).merge_config_with_args(argv))
print(ns.api_key, ns.admin_api_key, ns.port)
"""


@pytest.mark.sglang
def test_real_sglang_reads_the_key_from_the_pipe(sglang_fork: SglangForkServer) -> None:
    """sglang 0.5.23's own reading of `--config` (srt/server_args.py:682-689 merges it the
    same way), after cli/utils.py:171-212 read it once already."""
    _, pipe = hand_over(["x", "--api-key", MASK, "--admin-api-key", MASK], PLAN, ENV)
    assert pipe is not None
    try:
        done = sglang_fork.run(["-c", _REAL_READ, str(pipe.path)], timeout=300)
    finally:
        pipe.close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [ENV["MY_KEY"], ENV["MY_ADMIN"], "1234"]
