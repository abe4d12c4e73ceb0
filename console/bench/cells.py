"""What a cell is, derived from its plan or its server: algorithm, budget, architecture."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from console.bench.results import JsonDict


@dataclass(frozen=True, slots=True, kw_only=True)
class CellTraits:
    """What a cell's server is, as the run's `run.json` cell entry records it; None where
    it is not known."""

    algorithm: str | None = None
    """SGLang's speculative algorithm (`off` when none)."""
    architecture: str | None = None
    ddtree_budget: int | None = None
    num_draft_tokens: int | None = None
    tp: int | None = None
    gpus: tuple[int, ...] | None = None

    def to_json(self) -> JsonDict:
        """The known traits only (an unknown one leaves what run.json already says)."""
        out: JsonDict = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if value is not None:
                out[item.name] = list(value) if isinstance(value, tuple) else value
        return out


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


def meta_from_plan(plan: JsonDict) -> CellTraits:
    """From a server's plan (`Plan.to_json()`, as the campaign keeps it in run.json)."""
    argv = [str(a) for a in plan.get("argv", [])]
    budget = _flag(argv, "--speculative-ddtree-budget")
    drafts = _flag(argv, "--speculative-num-draft-tokens")
    gpus = plan.get("gpus")
    return CellTraits(
        algorithm=_str(plan.get("algorithm")) or "off",
        architecture=_str(plan.get("architecture")),
        ddtree_budget=int(budget) if budget and budget.isdigit() else None,
        num_draft_tokens=int(drafts) if drafts and drafts.isdigit() else None,
        tp=_int(plan.get("tp")),
        gpus=tuple(g for g in gpus if isinstance(g, int)) if isinstance(gpus, list) else None,
    )


def meta_from_server_info(info: JsonDict | None) -> CellTraits:
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
