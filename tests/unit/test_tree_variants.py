"""A tree-drafting variant of any algorithm is a profile edit: `tree_budget` with the flag
that passes it (DFLASH tree verify and tree width are open SGLang pull requests today), beside
DDTREE's own `ddtree_budget`. The plan passes the flag, warns that it needs the build named in
`requires`, and bad combinations are one clear message naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from console.profiles.command import speculative_args
from console.profiles.models import DDTREE_BUDGET_FLAG, TreeBudget, Variant
from tests.conftest import REPO

TREE_WIDTH = """
[variants.dflash-tree-w4]
algorithm = "DFLASH"
description = "DFlash with tree verify, width 4"
draft_model_path = "z-lab/Qwen3.6-27B-DFlash"
tree_budget = 4
tree_budget_flag = "--speculative-dflash-tree-width"
requires = "an SGLang built with the DFlash tree-verify pull request"
"""


def test_any_algorithm_passes_its_tree_budget_with_its_own_flag() -> None:
    variant = Variant(
        algorithm="DFLASH",
        draft_model_path="d",
        tree_budget=4,
        tree_budget_flag="--speculative-dflash-tree-width",
    )
    assert variant.tree == TreeBudget(4, "--speculative-dflash-tree-width")
    args = speculative_args(variant, "m")
    assert args[-2:] == ["--speculative-dflash-tree-width", "4"]
    assert "--speculative-ddtree-budget" not in args
    ddtree = Variant(algorithm="DDTREE", draft_model_path="d", ddtree_budget=32)
    assert ddtree.tree == TreeBudget(32, DDTREE_BUDGET_FLAG)
    assert speculative_args(ddtree, "m")[-2:] == [DDTREE_BUDGET_FLAG, "32"]
    assert Variant(algorithm="DFLASH", draft_model_path="d").tree is None


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"tree_budget": 4}, "tree_budget and tree_budget_flag go together"),
        ({"tree_budget_flag": "--speculative-x-width"}, "go together"),
        ({"tree_budget": 4, "tree_budget_flag": "--tree-width"}, "should match pattern"),
        (
            {"tree_budget": 4, "tree_budget_flag": "--speculative-num-draft-tokens"},
            "is set by its own field (num_draft_tokens)",
        ),
        ({"tree_budget": 0, "tree_budget_flag": "--speculative-x-width"}, "greater than"),
    ],
)
def test_bad_tree_fields_are_refused_naming_what_to_set(fields: dict, words: str) -> None:
    with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        Variant(algorithm="DFLASH", draft_model_path="d", **fields)


def test_ddtree_keeps_its_own_field_and_off_takes_none() -> None:
    with pytest.raises(ValidationError, match="for DDTREE set ddtree_budget"):
        Variant(
            algorithm="DDTREE",
            draft_model_path="d",
            ddtree_budget=15,
            tree_budget=4,
            tree_budget_flag="--speculative-x-width",
        )
    with pytest.raises(ValidationError, match="tree_budget, tree_budget_flag set but algorithm"):
        Variant(tree_budget=4, tree_budget_flag="--speculative-x-width")


def test_a_tree_variant_in_a_profile_file_plans_with_its_flag_and_warning(
    cli, user_profiles: Path
) -> None:
    text = (REPO / "profiles" / "qwen3.6-27b.toml").read_text() + TREE_WIDTH
    (user_profiles / "qwen3.6-27b.toml").write_text(text)
    result = cli(
        "plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "dflash-tree-w4", "--json", "--demo"
    )
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    argv = plan["argv"]
    at = argv.index("--speculative-dflash-tree-width")
    assert argv[at + 1] == "4"
    warnings = {w["code"]: w["message"] for w in plan["warnings"]}
    assert "needs-tree-build" in warnings
    assert "DFlash tree-verify pull request" in warnings["needs-tree-build"]
