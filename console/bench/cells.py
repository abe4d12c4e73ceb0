"""What a cell is, derived from its plan or its server: algorithm, budget, architecture."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from console.bench.results import CellMeta, JsonObject
from console.topology.placement import Plan


@dataclass(frozen=True, slots=True, kw_only=True)
class CellTraits:
    """What a cell's server is, as the run's `run.json` cell entry records it; None where
    it is not known."""

    algorithm: str | None = None
    """SGLang's speculative algorithm (`off` when none)."""
    architecture: str | None = None
    ddtree_budget: int | None = None
    tree_budget: int | None = None
    """Another tree-drafting algorithm's budget, passed with `tree_flag`."""
    tree_flag: str | None = None
    num_draft_tokens: int | None = None
    tp: int | None = None
    gpus: tuple[int, ...] | None = None

    def apply(self, cell: CellMeta) -> CellMeta:
        """`cell` with the known traits set (an unknown one leaves what run.json says)."""
        known = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(cell, **{name: value for name, value in known.items() if value is not None})


def _flag(argv: list[str], flag: str) -> str | None:
    for index, token in enumerate(argv):
        if token == flag and index + 1 < len(argv):
            return argv[index + 1]
        if token.startswith(flag + "="):
            return token.split("=", 1)[1]
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def meta_from_plan(plan: Plan, tree_flag: str | None = None) -> CellTraits:
    """From the plan the cell's server was launched from; `tree_flag`, a tree budget flag
    other than DDTREE's that its variant names, is read from the argv too."""
    argv = list(plan.argv)
    budget = _flag(argv, "--speculative-ddtree-budget")
    drafts = _flag(argv, "--speculative-num-draft-tokens")
    tree = _flag(argv, tree_flag) if tree_flag else None
    tree_budget = int(tree) if tree and tree.isdigit() else None
    return CellTraits(
        algorithm=plan.algorithm or "off",
        architecture=plan.architecture,
        ddtree_budget=int(budget) if budget and budget.isdigit() else None,
        tree_budget=tree_budget,
        tree_flag=tree_flag if tree_budget is not None else None,
        num_draft_tokens=int(drafts) if drafts and drafts.isdigit() else None,
        tp=plan.tp,
        gpus=plan.gpus,
    )


def meta_from_server_info(info: JsonObject | None) -> CellTraits:  # /server_info, verbatim
    """A `--url` cell from /server_info. Real SGLang always has `speculative_algorithm`
    (null when off); a server whose info lacks the key is not known to be autoregressive,
    so the algorithm stays unknown (None) rather than "off"."""
    if not info:
        return CellTraits()
    if "speculative_algorithm" in info:
        algorithm = _str(info.get("speculative_algorithm")) or "off"
    else:
        algorithm = None
    return CellTraits(
        algorithm=algorithm,
        ddtree_budget=_int(info.get("speculative_ddtree_budget")),
        num_draft_tokens=_int(info.get("speculative_num_draft_tokens")),
        tp=_int(info.get("tp_size")),
    )
