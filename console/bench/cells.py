"""What a cell is, derived from its plan or its server: algorithm, budget, architecture."""

from __future__ import annotations

from typing import Any


def _flag(argv: list[str], flag: str) -> str | None:
    for index, token in enumerate(argv):
        if token == flag and index + 1 < len(argv):
            return argv[index + 1]
        if token.startswith(flag + "="):
            return token.split("=", 1)[1]
    return None


def meta_from_plan(plan: dict[str, Any]) -> dict[str, Any]:
    argv = [str(a) for a in plan.get("argv", [])]
    budget = _flag(argv, "--speculative-ddtree-budget")
    drafts = _flag(argv, "--speculative-num-draft-tokens")
    return {
        "algorithm": plan.get("algorithm") or "off",
        "architecture": plan.get("architecture"),
        "ddtree_budget": int(budget) if budget and budget.isdigit() else None,
        "num_draft_tokens": int(drafts) if drafts and drafts.isdigit() else None,
        "tp": plan.get("tp"),
        "gpus": plan.get("gpus"),
    }


def meta_from_server_info(info: dict[str, Any] | None) -> dict[str, Any]:
    """A `--url` cell from /server_info. Real SGLang always has `speculative_algorithm`
    (null when off); a server whose info lacks the key is not known to be autoregressive,
    so the algorithm stays unknown (None) rather than "off"."""
    if not info:
        return {}
    if "speculative_algorithm" in info:
        algorithm = info.get("speculative_algorithm") or "off"
    else:
        algorithm = None
    budget = info.get("speculative_ddtree_budget")
    return {
        "algorithm": algorithm,
        "ddtree_budget": int(budget) if isinstance(budget, int) else None,
        "num_draft_tokens": info.get("speculative_num_draft_tokens"),
        "tp": info.get("tp_size"),
    }
