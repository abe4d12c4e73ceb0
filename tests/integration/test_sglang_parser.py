"""Every shipped plan against the real SGLang 0.5.23 parser (venv built by scripts/sglang-venv)."""

from __future__ import annotations

import json

import pytest

from console.profiles.loader import ProfileCatalog
from console.profiles.models import Algorithm

pytestmark = pytest.mark.sglang

DDTREE_FLAGS = {"--speculative-ddtree-budget", "--speculative-algorithm"}


def test_shipped_plans_parse_with_sglang_0_5_23(cli, sglang_python: str):
    result = cli(
        "profiles",
        "check",
        "--all",
        "--python",
        sglang_python,
        "--demo",
        "--json",
        "--timeout",
        "600",
    )
    report = json.loads(result.out)
    catalog = ProfileCatalog()
    plans = report["plans"]
    expected = sum(
        len(e.loaded.profile.layouts) * len(e.loaded.profile.variants)
        for e in catalog.entries()
        if e.loaded
    )
    assert len(plans) == expected
    assert report["broken_profiles"] == []
    for plan in plans:
        assert plan["sglang_version"] == "0.5.23"
        assert plan["error"] is None
        variant = catalog.get(plan["profile"]).profile.variants[plan["variant"]]
        label = f"{plan['profile']} {plan['layout']} {plan['variant']}"
        if variant.algorithm is Algorithm.DDTREE:
            assert plan["ok"] is False, label
            assert {p["flag"] for p in plan["problems"]} == DDTREE_FLAGS, label
            assert any("DDTree pull request" in note for note in plan["notes"]), label
        else:
            assert plan["ok"] is True, (label, plan["problems"])
    assert result.code == 1  # the DDTree plans cannot pass on a stock release


def test_removed_flags_are_named_by_sglang(cli, sglang_python: str, user_profiles):
    from tests.conftest import REPO

    text = (
        (REPO / "profiles" / "kimi-k2.6.toml")
        .read_text()
        .replace(
            'args = [\n    "--trust-remote-code", "--mem-fraction-static", "0.90",',
            'args = ["--cuda-graph-max-bs", "8", "--mamba-scheduler-strategy", "no_buffer", '
            '"--mem-fraction-static", "lots",',
        )
    )
    (user_profiles / "kimi-k2.6.toml").write_text(text)
    result = cli(
        "profiles",
        "check",
        "kimi-k2.6",
        "--python",
        sglang_python,
        "--demo",
        "--json",
        "--timeout",
        "600",
    )
    off = next(p for p in json.loads(result.out)["plans"] if p["variant"] == "off")
    kinds = {(p["kind"], p["flag"]) for p in off["problems"]}
    assert ("ambiguous", "--cuda-graph-max-bs") in kinds
    assert ("unknown", "--mamba-scheduler-strategy") in kinds
    assert ("invalid", "--mem-fraction-static") in kinds
    plan = cli("plan", "kimi-k2.6", "--demo", "--json")
    codes = [w["code"] for w in json.loads(plan.out)["warnings"]]
    assert codes.count("removed-flag") == 2
