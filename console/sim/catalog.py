"""Look up a model's performance data in `catalog.toml` by served name or path basename."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class SpecEntry:
    algorithm: str
    budget: int | None
    accept: float
    max_commit: int
    step_ms: float | None = None
    step_x: float | None = None


@dataclass(frozen=True)
class ModelEntry:
    key: str
    display: str
    architecture: str
    hf_architecture: str
    model_type: str
    size_gb: float
    layers: int
    hidden: int
    vocab: int
    context_len: int
    kv_bytes_per_token: int
    ref_tp: int
    ref_step_ms: float
    prefill_tok_s: float
    batch_alpha: float
    compute_fraction: float
    spec: tuple[SpecEntry, ...]
    generic: bool = False
    internode_step_ms: float = 0.0
    """What a decode step gains when TP spans nodes; 0: the generic estimate (perf.py)."""
    image_understanding: bool = False
    """A vision-language checkpoint: /model_info's has_image_understanding (unless
    --language-model-only), and SGLang's warmup sends an image."""


@cache
def _raw() -> dict[str, Any]:
    text = resources.files("console.sim").joinpath("catalog.toml").read_text()
    return tomllib.loads(text)


def _spec_entries(items: list[dict[str, Any]]) -> tuple[SpecEntry, ...]:
    return tuple(
        SpecEntry(
            algorithm=str(item["algorithm"]).upper(),
            budget=item.get("budget"),
            accept=float(item["accept"]),
            max_commit=int(item["max_commit"]),
            step_ms=item.get("step_ms"),
            step_x=item.get("step_x"),
        )
        for item in items
    )


def _entry(key: str, data: dict[str, Any], generic: bool = False) -> ModelEntry:
    return ModelEntry(
        key=key,
        display=str(data["display"]),
        architecture=str(data["architecture"]),
        hf_architecture=str(data["hf_architecture"]),
        model_type=str(data["model_type"]),
        size_gb=float(data["size_gb"]),
        layers=int(data["layers"]),
        hidden=int(data["hidden"]),
        vocab=int(data["vocab"]),
        context_len=int(data["context_len"]),
        kv_bytes_per_token=int(data["kv_bytes_per_token"]),
        ref_tp=int(data["ref_tp"]),
        ref_step_ms=float(data["ref_step_ms"]),
        prefill_tok_s=float(data["prefill_tok_s"]),
        batch_alpha=float(data["batch_alpha"]),
        compute_fraction=float(data["compute_fraction"]),
        spec=_spec_entries(list(data.get("spec", []))),
        generic=generic,
        internode_step_ms=float(data.get("internode_step_ms", 0.0)),
        image_understanding=bool(data.get("image_understanding", False)),
    )


def lookup(served_name: str | None, model_path: str) -> ModelEntry:
    """The catalog entry matching the served name or the model path's last component."""
    raw = _raw()
    candidates = {
        name.lower() for name in (served_name, model_path.rstrip("/").rsplit("/", 1)[-1]) if name
    }
    for key, data in raw.get("models", {}).items():
        if candidates & {str(m).lower() for m in data.get("match", [])}:
            return _entry(key, data)
    return _entry("generic", raw["generic"], generic=True)


def architecture_defaults(architecture: str) -> tuple[SpecEntry, ...]:
    section = _raw().get("architectures", {}).get(architecture, {})
    return _spec_entries(list(section.get("spec", [])))
