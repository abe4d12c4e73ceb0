"""The simulator's argument handling and performance model (no processes)."""

from __future__ import annotations

import json
import random

import pytest

from console.sim.argparser import cli_data
from console.sim.catalog import lookup
from console.sim.options import OptionsError, parse
from console.sim.perf import decoding, draw_commit, scale_to_tp, step_time
from tests.conftest import REPO
from tests.sglang_fork import SglangForkServer

BASE = ["--model-path", "Qwen/Qwen3.6-27B", "--served-model-name", "qwen3.6-27b"]


def test_sglang_flags_modeled_unmodeled_and_unknown():
    options = parse(
        [
            *BASE,
            "--tp",
            "4",
            "--trust-remote-code",
            "--mem-fraction-static",
            "0.85",
            "--speculative-ddtree-budget",
            "15",
            "--numa-node",
            "0",
            "0",
            "1",
            "1",
        ],
        environ={},
    )
    assert options.get("tp_size") == 4  # argparse's allow_abbrev: `--tp` is only `--tp-size`
    assert options.get("numa_node") == [0, 0, 1, 1]
    assert options.get("speculative_ddtree_budget") == 15
    assert options.unmodeled == ("--trust-remote-code",)
    assert options.unknown == ("--speculative-ddtree-budget",)


def test_sim_flags_from_env_and_argv():
    env = {
        "DDCONSOLE_SIM_SPEED": "7",
        "DDCONSOLE_SIM_SEED": "3",
        "DDCONSOLE_SIM_FAULT": "hang:2,http-500:0.25",
    }
    options = parse(BASE, environ=env)
    assert options.speed == 7.0
    assert options.seed == 3
    hang = options.fault("hang")
    assert hang is not None
    assert hang.number(1.0) == 2.0
    assert options.fault("http-500").number(0) == 0.25  # type: ignore[union-attr]
    overridden = parse([*BASE, "--sim-speed", "0", "--sim-fault", "bad-metrics"], environ=env)
    assert overridden.speed == 0
    assert [f.kind for f in overridden.faults] == ["bad-metrics"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--served-model-name", "x"], "--model-path"),
        ([*BASE, "--tp-size", "two"], "invalid int value: 'two'"),
        ([*BASE, "--sim-speed", "-1"], "must be >= 0"),
        ([*BASE, "--sim-fault", "meteor"], "unknown fault 'meteor'"),
        # SGLang 0.5.23's parser (srt/server_args.py:679, allow_abbrev): the exact messages.
        ([*BASE, "--made-up-flag", "x"], "^unrecognized arguments: --made-up-flag x$"),
        (
            [*BASE, "--cuda-graph-max-bs", "8"],
            "^ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
            "--cuda-graph-max-bs-prefill$",
        ),
        ([*BASE, "--tensor-parallel", "2", "--dp", "2", "--tp", "x"], "invalid int value: 'x'"),
        (
            [*BASE, "--mamba-radix-cache-strategy", "foo"],
            r"argument --mamba-radix-cache-strategy: invalid choice: 'foo' \(choose from",
        ),
        # The sim's own flags are exact names: a prefix is an unknown SGLang flag.
        ([*BASE, "--sim-sp", "2"], "^unrecognized arguments: --sim-sp 2$"),
    ],
)
def test_bad_arguments(argv: list[str], message: str):
    with pytest.raises(OptionsError, match=message):
        parse(argv, environ={})


def test_real_aliases_and_prefixes_only():
    options = parse(
        ["--model", "m", "--tensor-parallel-size", "2", "--data-parallel-size", "2"], environ={}
    )
    assert (options.get("model_path"), options.get("tp_size"), options.get("dp_size")) == (
        "m",
        2,
        2,
    )
    assert parse(["m", "--enable-metrics"], environ={}).get("model_path") == "m"  # sglang serve M
    assert parse([*BASE, "--disable-cuda-graph", "--grpc-mode"], environ={}).unmodeled == (
        "--disable-cuda-graph",
        "--grpc-mode",
    )
    with pytest.raises(OptionsError, match="unrecognized arguments: --model-name"):
        parse([*BASE, "--model-name", "x"], environ={})  # no alias the real parser lacks


def test_catalog_lookup_by_served_name_or_path():
    assert lookup("qwen3.6-27b", "/models/whatever").key == "qwen3-6-27b"
    assert lookup(None, "moonshotai/Kimi-K2.6").key == "kimi-k2-6"
    unknown = lookup(None, "org/some-model")
    assert unknown.generic


def test_tp_scaling_and_numa_crossing():
    qwen = lookup("qwen3.6-27b", "")
    tp1 = scale_to_tp(qwen, 0.03745, 1, False)
    tp4 = scale_to_tp(qwen, 0.03745, 4, False)
    tp8_cross = scale_to_tp(qwen, 0.03745, 8, True)
    assert tp1 == pytest.approx(0.03745)
    assert tp4 < tp1
    assert tp8_cross > scale_to_tp(qwen, 0.03745, 8, False)


def test_draws_average_to_the_calibrated_acceptance():
    qwen = lookup("qwen3.6-27b", "")
    decode = decoding(
        qwen,
        tp=1,
        crosses_numa=False,
        algorithm="DDTREE",
        num_draft_tokens=None,
        num_steps=None,
        ddtree_budget=32,
    )
    rng = random.Random(1)
    draws = [draw_commit(rng, decode)[0] for _ in range(20000)]
    assert sum(draws) / len(draws) == pytest.approx(5.0, rel=0.02)
    assert max(draws) <= decode.max_commit
    assert step_time(decode, 1) == pytest.approx(0.0543)  # 5 accepted / 92 tok/s
    assert step_time(decode, 8) > step_time(decode, 1)


PARITY_CASES = [
    [*BASE, "--made-up-flag", "x"],
    [*BASE, "--cuda-graph-max-bs", "8"],
    [*BASE, "--tp", "two"],
    [*BASE, "--mamba-radix-cache-strategy", "foo"],
    [*BASE, "--speculative-ddtree-budget", "15"],
    [*BASE, "--monokernel-backend", "nvidia"],
    ["--served-model-name", "x"],
    [*BASE, "--tp", "2", "--disable-cuda-graph", "--numa-node", "0", "1"],
]

PARITY_SCRIPT = """
import contextlib, io, json, sys
from sglang.srt.server_args import prepare_server_args
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            prepare_server_args(argv)
        out.append(None)
    except SystemExit:
        out.append(err.getvalue().strip().splitlines()[-1])
print(json.dumps(out))
"""


@pytest.mark.sglang
def test_cli_data_is_the_installed_sglang_parser(sglang_fork: SglangForkServer):
    """The shipped dump is what scripts/dump_sglang_cli.py reads from the real parser."""
    result = sglang_fork.run([str(REPO / "scripts" / "dump_sglang_cli.py")], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout) == cli_data()


@pytest.mark.sglang
def test_argument_errors_match_the_real_parser(sglang_fork: SglangForkServer):
    """The same argv fails with the same message, or passes, in SGLang 0.5.23 and here
    (DDTree's flag is the one the simulator adds on purpose)."""
    result = sglang_fork.run(["-c", PARITY_SCRIPT, json.dumps(PARITY_CASES)], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    real = json.loads(result.stdout.strip().splitlines()[-1])
    for argv, expected in zip(PARITY_CASES, real, strict=True):
        try:
            parse(argv, environ={})
            ours = None
        except OptionsError as exc:
            ours = f"sglang serve: error: {exc}"
        if "--speculative-ddtree-budget" in argv:
            assert expected == (
                "sglang serve: error: unrecognized arguments: --speculative-ddtree-budget 15"
            )
            assert ours is None
        else:
            assert ours == expected, argv
