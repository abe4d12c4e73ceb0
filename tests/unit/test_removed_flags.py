"""Which extra SGLang flags a plan warns about: removed in 0.5.23 (the parser rejects them) or
only deprecated (sglang 0.5.23 srt/server_args.py:410-423, srt/arg_groups/fields/serving.py:80
still accept them). tests/integration/test_sglang_parser.py checks the removed ones against the
real parser."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from console.profiles.command import DEPRECATED_FLAGS, REMOVED_FLAGS
from tests.conftest import REPO, CliResult


def _plan_with_args(cli, user_profiles: Path, args: list[str]) -> dict[str, object]:
    text = re.sub(
        r"^args = \[.*?\]$",
        f"args = {json.dumps(args)}",
        (REPO / "profiles" / "kimi-k2.6.toml").read_text(),
        count=1,
        flags=re.M | re.S,
    )
    (user_profiles / "kimi-k2.6.toml").write_text(text)
    result: CliResult = cli("plan", "kimi-k2.6", "--demo", "--json")
    assert result.code == 0, result.err
    plan: dict[str, object] = json.loads(result.out)
    return plan


def test_the_removed_list_holds_only_flags_0_5_23_rejects() -> None:
    assert set(REMOVED_FLAGS) == {"--cuda-graph-max-bs", "--mamba-scheduler-strategy"}
    assert set(DEPRECATED_FLAGS) == {"--disable-cuda-graph", "--enable-dp-attention", "--grpc-mode"}


@pytest.mark.parametrize("flag", sorted(DEPRECATED_FLAGS))
def test_deprecated_flags_warn_without_saying_they_are_gone(cli, user_profiles, flag: str) -> None:
    plan = _plan_with_args(cli, user_profiles, ["--trust-remote-code", flag])
    warnings = plan["warnings"]
    assert isinstance(warnings, list)
    (warning,) = [w for w in warnings if flag in w["message"]]
    assert warning["code"] == "deprecated-flag"
    assert "no longer exists" not in warning["message"]
    assert DEPRECATED_FLAGS[flag] in warning["message"]


def test_removed_flags_still_warn(cli, user_profiles) -> None:
    args = ["--trust-remote-code", "--cuda-graph-max-bs", "8", "--mamba-scheduler-strategy=x"]
    plan = _plan_with_args(cli, user_profiles, args)
    warnings = plan["warnings"]
    assert isinstance(warnings, list)
    removed = sorted(w["message"].split()[0] for w in warnings if w["code"] == "removed-flag")
    assert removed == ["--cuda-graph-max-bs", "--mamba-scheduler-strategy"]
