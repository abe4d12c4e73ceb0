"""Unknown profile, layout and variant names list the valid ones."""

from __future__ import annotations


def test_unknown_profile_lists_profiles(cli):
    result = cli("plan", "qwen3.6-72b", "--layout", "tp1", "--demo")
    assert result.code == 2
    assert "unknown profile 'qwen3.6-72b'" in result.err
    assert "valid: kimi-k2.6, qwen3.6-27b" in result.err


def test_unknown_layout_lists_layouts(cli):
    result = cli("plan", "qwen3.6-27b", "--layout", "tp2", "--demo")
    assert result.code == 2
    assert "unknown layout 'tp2'" in result.err
    assert "valid: dp2, dp2-gateway, tp1, tp4, tp8" in result.err


def test_unknown_variant_lists_variants(cli):
    result = cli("plan", "kimi-k2.6", "--variant", "medusa", "--demo")
    assert result.code == 2
    assert "unknown variant 'medusa'" in result.err
    assert (
        "valid: ddtree-b15, ddtree-b32, ddtree-b64, dflash, dflash-no-overlap, eagle3, off"
        in result.err
    )


def test_layout_needed_when_several(cli):
    result = cli("plan", "qwen3.6-27b", "--demo")
    assert result.code == 2
    assert "--layout (tp1, tp4, tp8, dp2, dp2-gateway)" in result.err


def test_show_unknown_profile(cli):
    result = cli("profiles", "show", "nope")
    assert result.code == 2
    assert "unknown profile 'nope'" in result.err
