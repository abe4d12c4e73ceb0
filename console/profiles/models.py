"""Pydantic models of a profile file (frozen, unknown keys rejected)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from console.profiles.flagcheck import resolve_long_option
from console.profiles.slo import checked_slo_text

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class Architecture(StrEnum):
    """What the model computes per layer; decides how speculative trees behave."""

    HYBRID_GDN = "hybrid-gdn"
    ATTENTION_MLA_MOE = "attention-mla-moe"
    ATTENTION = "attention"


class Algorithm(StrEnum):
    """`--speculative-algorithm` values (SGLang 0.5.23 plus DDTREE from its open pull request)."""

    OFF = "off"
    EAGLE = "EAGLE"
    EAGLE3 = "EAGLE3"
    NEXTN = "NEXTN"
    STANDALONE = "STANDALONE"
    NGRAM = "NGRAM"
    DFLASH = "DFLASH"
    DSPARK = "DSPARK"
    UNO = "UNO"
    DDTREE = "DDTREE"

    @property
    def is_speculative(self) -> bool:
        return self is not Algorithm.OFF

    @property
    def is_tree_capable(self) -> bool:
        return self in (Algorithm.DDTREE, Algorithm.EAGLE, Algorithm.EAGLE3, Algorithm.NEXTN)

    @property
    def needs_unreleased_build(self) -> bool:
        """DDTREE exists only in an open SGLang pull request, not in a release."""
        return self is Algorithm.DDTREE


class Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)


class ModelSpec(Strict):
    name: str = Field(min_length=1, description="Human name, e.g. Qwen3.6-27B")
    path: str = Field(min_length=1, description="Local directory or Hugging Face repo id")
    served_name: str | None = None
    architecture: Architecture
    size_gb: float | None = Field(default=None, gt=0, description="Weights on disk, GB")

    @field_validator("served_name")
    @classmethod
    def _served_name_plain(cls, value: str | None) -> str | None:
        if value is not None and (":" in value or not value or any(c.isspace() for c in value)):
            raise ValueError(
                f"{value!r} must be non-empty without spaces or ':' (SGLang reserves "
                "'model:adapter' for LoRA)"
            )
        return value

    @property
    def effective_served_name(self) -> str:
        return self.served_name or self.path


class SglangInstall(Strict):
    """Which SGLang runs the server: an interpreter and an entry point."""

    python: str = Field(default="python3", min_length=1)
    entry: Literal["sglang.launch_server", "sglang serve"] = "sglang.launch_server"


class ServerSpec(Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=30000, ge=1, le=65535)
    api_key_env: Annotated[str, Field(pattern=ENV_NAME_PATTERN)] | None = None
    admin_api_key_env: Annotated[str, Field(pattern=ENV_NAME_PATTERN)] | None = None
    """Holds `--admin-api-key`; with it set SGLang's /flush_cache takes only that key."""
    args: tuple[str, ...] = ()
    env: dict[Annotated[str, Field(pattern=ENV_NAME_PATTERN)], str] = Field(default_factory=dict)

    @field_validator("args")
    @classmethod
    def _no_api_key_in_args(cls, args: tuple[str, ...]) -> tuple[str, ...]:
        return _reject_secret_args(args)

    @field_validator("env")
    @classmethod
    def _no_owned_env(cls, env: dict[str, str]) -> dict[str, str]:
        return _reject_owned_env(env)

    @field_validator("host")
    @classmethod
    def _host_is_an_address(cls, host: str) -> str:
        return _check_host(host)


class NumaPolicy(StrEnum):
    """How schedulers are bound to NUMA nodes.

    `pin` passes `--numa-node` per visible GPU from the host topology; `auto` leaves SGLang's
    own detection on; `off` disables binding (`SGLANG_AUTO_NUMA_BIND=0`).
    """

    PIN = "pin"
    AUTO = "auto"
    OFF = "off"


NODE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
"""A node of a multi-node layout: `local` or a host's name (the hosts file names them)."""
LOCAL_NODE = "local"


class GatewaySpec(Strict):
    """SGLang's model gateway (`smg launch`) in front of a layout's replicas."""

    smg: str = Field(default="smg", min_length=1)
    """The `smg` executable: a path, or a name found next to the console's interpreter or
    on PATH."""
    policy: Literal[
        "random",
        "round_robin",
        "cache_aware",
        "power_of_two",
        "least_load",
        "consistent_hashing",
        "prefix_hash",
    ] = "cache_aware"
    """How the gateway picks a replica per request: smg 1.13.0's `--policy` choices for a
    regular gateway (`smg launch --help`), its own default cache_aware; `manual` and
    `passthrough` need routing headers clients do not send."""
    args: tuple[str, ...] = ()
    """Further `smg launch` flags; the plan sets --host, --port, --policy and the metrics
    listener itself."""

    @field_validator("args")
    @classmethod
    def _no_owned_gateway_flags(cls, args: tuple[str, ...]) -> tuple[str, ...]:
        for arg in args:
            flag = arg.split("=", 1)[0]
            if flag in _GATEWAY_OWNED_FLAGS:
                raise ValueError(
                    f"{flag} is set by the plan ({_GATEWAY_OWNED_FLAGS[flag]}); leave it out of "
                    "gateway.args"
                )
        return args


_GATEWAY_OWNED_FLAGS = {
    "--host": "the profile's server.host",
    "--port": "the profile's server.port, or --port",
    "--policy": "gateway.policy",
    "--worker-urls": "the replicas, registered once ready",
    "--prometheus-port": "a free port chosen at launch",
    "--prometheus-host": "the profile's server.host",
}


class Layout(Strict):
    tp: int = Field(ge=1, le=64)
    dp: int = Field(default=1, ge=1, le=64)
    gpus: tuple[Annotated[int, Field(ge=0)], ...] = Field(min_length=1)
    """The GPUs on each node; with replicas, every replica's GPUs in turn."""
    replicas: int = Field(default=1, ge=1, le=64)
    """Independent servers of tp x dp GPUs each, behind `gateway`."""
    gateway: GatewaySpec | None = None
    """SGLang's model gateway in front of the replicas: clients use its port."""
    nodes: tuple[Annotated[str, Field(pattern=NODE_PATTERN)], ...] = ()
    """Several nodes: one SGLang process per node, node rank = position, the first the head
    (`--nnodes`, `--node-rank`, `--dist-init-addr`). Empty: one node, this host."""
    numa: NumaPolicy = NumaPolicy.PIN
    description: str = ""

    @property
    def nnodes(self) -> int:
        return max(1, len(self.nodes))

    @model_validator(mode="after")
    def _consistent(self) -> Layout:
        seen: set[int] = set()
        for gpu in self.gpus:
            if gpu in seen:
                raise ValueError(f"GPU {gpu} is listed twice in gpus")
            seen.add(gpu)
        if len(self.nodes) == 1:
            raise ValueError("nodes lists one node: leave it out, or list every node")
        if self.nodes:
            # sglang 0.5.23 srt/arg_groups/validation_hook.py:179-181, 199-202
            if self.dp > 1:
                raise ValueError(
                    "dp > 1 across nodes: SGLang 0.5.23 does not support multi-node "
                    "data-parallel replicas"
                )
            if self.tp % len(self.nodes):
                raise ValueError(
                    f"tp ({self.tp}) must be divisible by the number of nodes ({len(self.nodes)})"
                )
        if self.replicas > 1 and self.gateway is None:
            raise ValueError(
                f"replicas = {self.replicas} needs a gateway in front of them: add a "
                "[layouts.NAME.gateway] table (SGLang's model gateway, smg)"
            )
        if self.gateway is not None and self.nodes:
            raise ValueError("a gateway layout runs its replicas on this host: leave out nodes")
        if self.replicas > 1:
            per_replica = self.tp * self.dp
            if per_replica * self.replicas != len(self.gpus):
                raise ValueError(
                    f"{self.replicas} replicas x tp ({self.tp}) x dp ({self.dp}) = "
                    f"{per_replica * self.replicas} GPUs, but gpus lists {len(self.gpus)}"
                )
            return self
        if self.tp * self.dp != len(self.gpus) * self.nnodes:
            per_node = " on each node" if self.nodes else ""
            raise ValueError(
                f"tp ({self.tp}) x dp ({self.dp}) = {self.tp * self.dp} GPUs, "
                f"but gpus lists {len(self.gpus)}{per_node}"
                + (f" x {self.nnodes} nodes" if self.nodes else "")
            )
        return self

    def replica_gpus(self, gpus: tuple[int, ...] | None = None) -> list[tuple[int, ...]]:
        """Each replica's GPUs, in order, from `gpus` (the layout's own by default)."""
        chosen = self.gpus if gpus is None else gpus
        size = len(chosen) // self.replicas
        return [chosen[i * size : (i + 1) * size] for i in range(self.replicas)]


@dataclass(frozen=True)
class TreeBudget:
    """A tree-drafting variant's budget and the flag that passes it."""

    budget: int
    flag: str


TREE_FLAG_PATTERN = r"^--speculative-[a-z0-9]+(-[a-z0-9]+)*$"
"""A tree budget flag: one of SGLang's `--speculative-...` flags."""
DDTREE_BUDGET_FLAG = "--speculative-ddtree-budget"
FIELD_FLAGS = {
    "--speculative-algorithm": "algorithm",
    "--speculative-draft-model-path": "draft_model_path",
    "--speculative-num-steps": "num_steps",
    "--speculative-eagle-topk": "eagle_topk",
    "--speculative-num-draft-tokens": "num_draft_tokens",
    DDTREE_BUDGET_FLAG: "ddtree_budget",
}
"""The speculative flags a variant's own fields set."""


class Variant(Strict):
    """A speculative-decoding choice; `off` is plain autoregressive decoding."""

    algorithm: Algorithm = Algorithm.OFF
    description: str = ""
    draft_model_path: str | None = None
    num_steps: int | None = Field(default=None, ge=1)
    eagle_topk: int | None = Field(default=None, ge=1)
    num_draft_tokens: int | None = Field(default=None, ge=1)
    ddtree_budget: int | None = Field(default=None, ge=1)
    tree_budget: int | None = Field(default=None, ge=1)
    """A tree-drafting budget for an algorithm other than DDTREE, passed with
    `tree_budget_flag` (a flag from an SGLang build named in `requires`)."""
    tree_budget_flag: str | None = Field(default=None, pattern=TREE_FLAG_PATTERN)
    max_running_requests: int | None = Field(default=None, ge=1)
    requires: str = Field(default="", description="What SGLang build this variant needs")
    sglang: SglangInstall | None = None
    args: tuple[str, ...] = ()
    env: dict[Annotated[str, Field(pattern=ENV_NAME_PATTERN)], str] = Field(default_factory=dict)

    @field_validator("algorithm", mode="before")
    @classmethod
    def _algorithm_case(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            if text.lower() in ("off", "none", ""):
                return Algorithm.OFF
            upper = text.upper()
            if upper in Algorithm.__members__.values():
                return upper
            valid = ", ".join(a.value for a in Algorithm)
            raise ValueError(f"unknown speculative algorithm {text!r} (valid: {valid})")
        return value

    @field_validator("args")
    @classmethod
    def _no_api_key_in_args(cls, args: tuple[str, ...]) -> tuple[str, ...]:
        return _reject_secret_args(args)

    @field_validator("env")
    @classmethod
    def _no_owned_env(cls, env: dict[str, str]) -> dict[str, str]:
        return _reject_owned_env(env)

    @property
    def tree(self) -> TreeBudget | None:
        """The tree-drafting budget and its flag: DDTREE's own, or any other algorithm's
        from `tree_budget` and `tree_budget_flag` (a new tree algorithm is a profile edit)."""
        if self.ddtree_budget is not None:
            return TreeBudget(self.ddtree_budget, DDTREE_BUDGET_FLAG)
        if self.tree_budget is not None and self.tree_budget_flag is not None:
            return TreeBudget(self.tree_budget, self.tree_budget_flag)
        return None

    @model_validator(mode="after")
    def _consistent(self) -> Variant:
        if self.algorithm is Algorithm.OFF:
            spec_fields = [
                name
                for name in (
                    "draft_model_path",
                    "num_steps",
                    "eagle_topk",
                    "num_draft_tokens",
                    "ddtree_budget",
                    "tree_budget",
                    "tree_budget_flag",
                )
                if getattr(self, name) is not None
            ]
            if spec_fields:
                raise ValueError(
                    f"{', '.join(spec_fields)} set but algorithm is off; set an algorithm"
                )
        if self.ddtree_budget is not None and self.algorithm is not Algorithm.DDTREE:
            raise ValueError("ddtree_budget is only meaningful with algorithm DDTREE")
        if self.algorithm is Algorithm.DDTREE and self.ddtree_budget is None:
            raise ValueError("algorithm DDTREE needs ddtree_budget")
        if (self.tree_budget is None) != (self.tree_budget_flag is None):
            raise ValueError("tree_budget and tree_budget_flag go together: set both")
        if self.tree_budget_flag is not None:
            if self.algorithm is Algorithm.DDTREE:
                raise ValueError("for DDTREE set ddtree_budget, not tree_budget")
            if self.tree_budget_flag in FIELD_FLAGS:
                raise ValueError(
                    f"tree_budget_flag {self.tree_budget_flag} is set by its own field "
                    f"({FIELD_FLAGS[self.tree_budget_flag]}); name the tree's own budget flag"
                )
        needs_draft = (
            Algorithm.DFLASH,
            Algorithm.DDTREE,
            Algorithm.EAGLE,
            Algorithm.EAGLE3,
            Algorithm.STANDALONE,
            Algorithm.DSPARK,
        )
        if self.algorithm in needs_draft and not self.draft_model_path:
            raise ValueError(f"algorithm {self.algorithm.value} needs draft_model_path")
        return self


class BenchDefaults(Strict):
    """What benchmarks of this profile's servers use unless told otherwise."""

    slo: str | None = Field(
        default=None,
        description="Latency targets a level is judged on, e.g. ttft=2s,itl=60ms",
    )

    @field_validator("slo")
    @classmethod
    def _slo_parses(cls, value: str | None) -> str | None:
        return checked_slo_text(value)


class Profile(Strict):
    """One profile file: a model, the SGLang that serves it, layouts and variants."""

    description: str = ""
    model: ModelSpec
    sglang: SglangInstall = Field(default_factory=SglangInstall)
    server: ServerSpec = Field(default_factory=ServerSpec)
    layouts: dict[Annotated[str, Field(pattern=NAME_PATTERN)], Layout] = Field(min_length=1)
    variants: dict[Annotated[str, Field(pattern=NAME_PATTERN)], Variant] = Field(min_length=1)
    bench: BenchDefaults = Field(default_factory=BenchDefaults)


# What the plan sets from the profile's own fields, with the field to set instead; SGLang
# takes the last of two equal flags, so a copy in `args` would silently win over the plan's
# (sglang 0.5.23 option strings: srt/arg_groups/fields/serving.py:66 port, host;
# parallel.py:49,77 --tp-size/--tensor-parallel-size, --dp-size/--data-parallel-size).
_OWNED_FLAGS = {
    "--api-key": "server.api_key_env",
    "--admin-api-key": "server.admin_api_key_env",
    "--port": "server.port (or --port on the command line)",
    "--host": "server.host",
    "--tp-size": "tp in the layout (layouts.NAME.tp)",
    "--tensor-parallel-size": "tp in the layout (layouts.NAME.tp)",
    "--dp-size": "dp in the layout (layouts.NAME.dp)",
    "--data-parallel-size": "dp in the layout (layouts.NAME.dp)",
    "--base-gpu-id": "gpus in the layout (layouts.NAME.gpus)",
    "--model-path": "model.path",
    "--model": "model.path",
    "--served-model-name": "model.served_name",
}
_SECRET_FLAGS = ("--api-key", "--admin-api-key")
# The plan sets the GPU list as CUDA_VISIBLE_DEVICES from the layout (profiles/command.py).
_OWNED_ENV = {"CUDA_VISIBLE_DEVICES": "gpus in the layout (layouts.NAME.gpus, or --gpus)"}


def _reject_secret_args(args: tuple[str, ...]) -> tuple[str, ...]:
    """No API key written in a profile, and nothing the plan owns overridden, under any
    spelling SGLang's parser accepts (`--flag=value`, an unambiguous prefix)."""
    for arg in args:
        flag = resolve_long_option(arg, _OWNED_FLAGS)
        written = arg.split("=", 1)[0]
        if flag in _SECRET_FLAGS:
            raise ValueError(
                f"{written} must not be written in a profile; name the environment variable "
                f"that holds it with {_OWNED_FLAGS[flag]}"
            )
        if flag is not None:
            spelled = "" if written == flag else f" (taken by SGLang as {flag})"
            raise ValueError(
                f"{written}{spelled} is set by the plan; set {_OWNED_FLAGS[flag]} instead of "
                "passing it in args"
            )
        if re.fullmatch(r"\s*", arg):
            raise ValueError("empty argument")
    return args


def _reject_owned_env(env: dict[str, str]) -> dict[str, str]:
    for name, field in _OWNED_ENV.items():
        if name in env:
            raise ValueError(f"{name} is set by the plan; set {field} instead")
    return env


_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def _check_host(host: str) -> str:
    """An IP address or a host name (RFC 1123 labels); anything else is refused, since it
    reaches SGLang's --host and the port check as it is."""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    labels = host.removesuffix(".").split(".")
    if 0 < len(host) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels):
        return host
    raise ValueError(
        f"{host!r} is not an IP address or host name (e.g. 127.0.0.1, 0.0.0.0, ::, my-host.example)"
    )
