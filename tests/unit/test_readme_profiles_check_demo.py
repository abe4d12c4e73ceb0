"""`profiles check --demo` checks every plan against the simulator's copy of SGLang 0.5.23's
parser (console/sim/argparser.py), as the README says, instead of failing every plan with
"no sglang installed"."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import REPO

MARK = '    "--trust-remote-code", "--mem-fraction-static", "0.85",\n'


def test_every_shipped_plan_passes_with_the_simulators_parser(cli):
    result = cli("profiles", "check", "--all", "--demo")
    assert result.code == 0, result.out + result.err
    assert "SGLang 0.5.23 as the simulator's copy of SGLang's parser" in result.out
    assert "no sglang installed" not in result.out
    assert result.out.rstrip().endswith("49 plans ok")
    # The DDTree note is said once, not per plan.
    assert result.out.count("the simulator stands in for the DDTree build") == 1


def test_bad_flags_fail_with_sglangs_own_messages(cli, user_profiles: Path):
    text = (REPO / "profiles" / "qwen3.6-27b.toml").read_text(encoding="utf-8")
    assert MARK in text
    # An unknown flag, an ambiguous prefix (sglang 0.5.23 srt/server_args.py:679-680 keeps
    # argparse's allow_abbrev) and a value of the wrong type.
    bad = MARK + '    "--enable-metricz", "--cuda-graph", "--max-running-requests", "many",\n'
    (user_profiles / "qwen3.6-27b.toml").write_text(text.replace(MARK, bad), encoding="utf-8")
    result = cli("profiles", "check", "qwen3.6-27b", "--demo", "--json")
    assert result.code == 1
    report = json.loads(result.out)
    first = report["plans"][0]
    assert not first["ok"]
    kinds = {(p["kind"], p["flag"]) for p in first["problems"]}
    assert ("unknown", "--enable-metricz") in kinds
    assert ("ambiguous", "--cuda-graph") in kinds
    assert ("invalid", "--max-running-requests") in kinds
    assert first["interpreter"] == "the simulator's copy of SGLang's parser"


def test_an_unknown_speculative_algorithm_is_named(cli):
    from console.sim.plancheck import check_one

    problems = check_one(["--model-path", "m", "--speculative-algorithm", "MEDUSA"])
    assert [(p.kind, p.flag) for p in problems] == [("invalid", "--speculative-algorithm")]
    assert check_one(["--model-path", "m", "--speculative-algorithm", "nextn"]) == []


def test_the_consoles_demo_preview_checks_flags_the_same_way(user_profiles: Path) -> None:
    """The launch preview's `flags` line in demo mode comes from the same parser (it said
    "the simulator accepts every SGLang flag", which the simulator does not)."""
    from console.cli.services import Services

    backend = Services.create(demo=True).live_backend(recordings=None)
    good = backend.flag_check(backend.plan("qwen3.6-27b", "tp1", "ddtree-b15"))
    assert good == "the simulator's copy of SGLang 0.5.23's parser takes every flag"
    text = (REPO / "profiles" / "qwen3.6-27b.toml").read_text(encoding="utf-8")
    bad = MARK + '    "--enable-metricz",\n'
    (user_profiles / "qwen3.6-27b.toml").write_text(text.replace(MARK, bad), encoding="utf-8")
    backend = Services.create(demo=True).live_backend(recordings=None)
    said = backend.flag_check(backend.plan("qwen3.6-27b", "tp1", "off"))
    assert said.startswith("--enable-metricz: ")
