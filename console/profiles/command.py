"""Profile x layout x variant -> the SGLang command line and environment (pure).

The same argv serves real and demo mode: demo swaps only the interpreter and entry module
for the simulator's (`python -m console.sim`).
"""

from __future__ import annotations

import ipaddress
import sys
from dataclasses import dataclass
from pathlib import Path

from console.core.errors import UsageError
from console.profiles.flagcheck import resolve_long_option
from console.profiles.loader import LoadedProfile, unknown_name_message
from console.profiles.models import Algorithm, Architecture, Layout, SglangInstall, Variant

SIM_ENTRY_MODULE = "console.sim"
DDTREE_PULL_REQUEST = "sgl-project/sglang#29907"
SPEC_DEFAULT_MAX_RUNNING = 48

# Flags that 0.5.23's parser rejects, with what to use instead: `--cuda-graph-max-bs` is now an
# ambiguous prefix of --cuda-graph-max-bs-{decode,prefill}, `--mamba-scheduler-strategy` is
# unrecognized (both checked with sglang 0.5.23's own parser, srt/server_args.py:679).
REMOVED_FLAGS = {
    "--cuda-graph-max-bs": "--cuda-graph-max-bs-decode (and --cuda-graph-max-bs-prefill)",
    "--mamba-scheduler-strategy": "--mamba-radix-cache-strategy",
}
# Flags that 0.5.23 still accepts but marks deprecated, with the replacement SGLang names:
# sglang 0.5.23 srt/server_args.py:410-423 (DeprecatedStoreTrueAction) and
# srt/arg_groups/fields/serving.py:77-80 (`grpc_mode`, folded into smg_grpc_mode).
DEPRECATED_FLAGS = {
    "--disable-cuda-graph": "--cuda-graph-backend-{decode,prefill}=disabled",
    "--enable-dp-attention": "--attn-dp-size <dp-size>",
    "--grpc-mode": "--smg-grpc-mode",
}
REMOVED_ENV = {
    "SGLANG_ENABLE_SPEC_V2": "nothing: spec v2 is the only path in 0.5.23",
    "SGLANG_ENABLE_DFLASH_SPEC_V2": "nothing: spec v2 is the only path in 0.5.23",
}


@dataclass(frozen=True)
class CommandWarning:
    code: str
    message: str


@dataclass(frozen=True)
class CommandSpec:
    """A launch command before placement on a host's topology."""

    profile: LoadedProfile
    layout_name: str
    variant_name: str
    layout: Layout
    variant: Variant
    gpus_key: str
    """Where the GPU list came from, for messages (`layouts.NAME.gpus` or `--gpus`)."""
    install: SglangInstall
    argv: tuple[str, ...]
    env: dict[str, str]
    host: str
    port: int
    demo: bool
    warnings: tuple[CommandWarning, ...]


def is_loopback(host: str) -> bool:
    """Whether a bind address keeps the server to this machine (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in ("localhost", "localhost.") or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_warnings(host: str, port: int, api_key_env: str | None) -> list[CommandWarning]:
    """A server reachable from other machines without a key. (The key itself reaches SGLang
    through a pipe, not the command line: console/server/keypipe.py.)"""
    warnings: list[CommandWarning] = []
    if not is_loopback(host) and not api_key_env:
        warnings.append(
            CommandWarning(
                "exposed-without-key",
                f"the server listens on {host}:{port}, beyond this machine, without an API key: "
                "anyone who reaches that port can send requests and flush its cache; set "
                'server.api_key_env, or host = "127.0.0.1"',
            )
        )
    return warnings


def select(loaded: LoadedProfile, layout_name: str, variant_name: str) -> tuple[Layout, Variant]:
    """The named layout and variant, or a UsageError listing the valid names."""
    layouts = loaded.profile.layouts
    variants = loaded.profile.variants
    if layout_name not in layouts:
        raise UsageError(
            f"profile {loaded.name!r}: " + unknown_name_message("layout", layout_name, layouts)
        )
    if variant_name not in variants:
        raise UsageError(
            f"profile {loaded.name!r}: " + unknown_name_message("variant", variant_name, variants)
        )
    return layouts[layout_name], variants[variant_name]


def entry_argv(install: SglangInstall, demo: bool) -> list[str]:
    """The interpreter and entry point; demo mode runs the simulator in their place."""
    if demo:
        return [sys.executable, "-m", SIM_ENTRY_MODULE]
    if install.entry == "sglang serve":
        folder = Path(install.python).parent
        script = str(folder / "sglang") if str(folder) not in ("", ".") else "sglang"
        return [script, "serve"]
    return [install.python, "-m", "sglang.launch_server"]


def speculative_args(variant: Variant, model_path: str) -> list[str]:
    if not variant.algorithm.is_speculative:
        return []
    args = ["--speculative-algorithm", variant.algorithm.value]
    draft = variant.draft_model_path
    if variant.algorithm is Algorithm.NEXTN and draft is None:
        # Qwen3.5/3.6 MTP needs the draft path set to the model itself (0.5.23 fills it in
        # only for DeepSeek-family architectures).
        draft = model_path
    if draft:
        args += ["--speculative-draft-model-path", draft]
    if variant.num_steps is not None:
        args += ["--speculative-num-steps", str(variant.num_steps)]
    if variant.eagle_topk is not None:
        args += ["--speculative-eagle-topk", str(variant.eagle_topk)]
    if variant.num_draft_tokens is not None:
        args += ["--speculative-num-draft-tokens", str(variant.num_draft_tokens)]
    tree = variant.tree
    if tree is not None:
        args += [tree.flag, str(tree.budget)]
    return args


def build_command(
    loaded: LoadedProfile,
    layout_name: str,
    variant_name: str,
    *,
    port: int | None = None,
    demo: bool = False,
    gpus: tuple[int, ...] | None = None,
) -> CommandSpec:
    """The command for one plan; `gpus` places the layout on other GPUs (same count)."""
    layout, variant = select(loaded, layout_name, variant_name)
    gpus_key = f"layouts.{layout_name}.gpus"
    if gpus is not None:
        if len(gpus) != len(layout.gpus):
            raise UsageError(
                f"--gpus lists {len(gpus)} GPUs but layout {layout_name!r} needs "
                f"{len(layout.gpus)} (tp {layout.tp} x dp {layout.dp})"
            )
        if len(set(gpus)) != len(gpus) or any(g < 0 for g in gpus):
            raise UsageError(f"--gpus {','.join(map(str, gpus))}: each GPU id once, none negative")
        layout = layout.model_copy(update={"gpus": tuple(gpus)})
        gpus_key = "--gpus"
    profile = loaded.profile
    install = variant.sglang or profile.sglang
    chosen_port = profile.server.port if port is None else port
    if not 1 <= chosen_port <= 65535:
        raise UsageError(f"--port {chosen_port} is out of range (1-65535)")
    warnings: list[CommandWarning] = []
    args: list[str] = [
        "--model-path",
        profile.model.path,
        "--served-model-name",
        profile.model.effective_served_name,
        "--host",
        profile.server.host,
        "--port",
        str(chosen_port),
        "--tp-size",
        str(layout.tp),
    ]
    if layout.dp > 1:
        args += ["--dp-size", str(layout.dp)]
    args.append("--enable-metrics")
    args += speculative_args(variant, profile.model.path)
    if variant.max_running_requests is not None:
        args += ["--max-running-requests", str(variant.max_running_requests)]
    elif variant.algorithm.is_speculative:
        warnings.append(
            CommandWarning(
                "spec-max-running",
                f"variant {variant_name!r} does not set max_running_requests: SGLang silently caps "
                f"it at {SPEC_DEFAULT_MAX_RUNNING} for speculative decoding",
            )
        )
    extra = [*profile.server.args, *variant.args]
    if (
        profile.model.architecture is Architecture.HYBRID_GDN
        and variant.algorithm.is_speculative
        and not any(a.split("=", 1)[0] == "--mamba-radix-cache-strategy" for a in extra)
    ):
        # The only mamba radix strategy that supports speculative decoding and overlap.
        args += ["--mamba-radix-cache-strategy", "extra_buffer"]
    args += extra
    keyed = profile.server.api_key_env or profile.server.admin_api_key_env
    if keyed and any(resolve_long_option(arg, ["--config"]) for arg in extra):
        raise UsageError(
            f"{loaded.path}: args: --config cannot be combined with server.api_key_env: "
            "ddconsole hands SGLang the key in a --config file and SGLang reads only one; "
            "move that file's options into args"
        )
    for arg in extra:
        flag = arg.split("=", 1)[0]
        if flag in REMOVED_FLAGS:
            warnings.append(
                CommandWarning(
                    "removed-flag",
                    f"{flag} no longer exists in SGLang 0.5.23; use {REMOVED_FLAGS[flag]}",
                )
            )
        elif flag in DEPRECATED_FLAGS:
            warnings.append(
                CommandWarning(
                    "deprecated-flag",
                    f"{flag} is deprecated in SGLang 0.5.23 (still accepted); "
                    f"use {DEPRECATED_FLAGS[flag]}",
                )
            )
    env = {"CUDA_VISIBLE_DEVICES": ",".join(str(gpu) for gpu in layout.gpus)}
    env.update(profile.server.env)
    env.update(variant.env)
    for name in env:
        if name in REMOVED_ENV:
            warnings.append(
                CommandWarning(
                    "removed-env", f"{name} no longer exists in SGLang 0.5.23 ({REMOVED_ENV[name]})"
                )
            )
    warnings += exposure_warnings(profile.server.host, chosen_port, profile.server.api_key_env)
    if variant.algorithm.needs_unreleased_build:
        warnings.append(
            CommandWarning(
                "needs-ddtree-build",
                f"variant {variant_name!r} needs an SGLang built with the DDTree pull request "
                f"({DDTREE_PULL_REQUEST}); a stock 0.5.23 rejects --speculative-ddtree-budget",
            )
        )
    elif variant.tree_budget_flag is not None:
        needs = variant.requires or "an SGLang build that has it"
        warnings.append(
            CommandWarning(
                "needs-tree-build",
                f"variant {variant_name!r} passes the tree-drafting flag "
                f"{variant.tree_budget_flag}: it needs {needs} (`profiles check` asks the "
                "installed SGLang's parser)",
            )
        )
    return CommandSpec(
        profile=loaded,
        layout_name=layout_name,
        variant_name=variant_name,
        layout=layout,
        variant=variant,
        gpus_key=gpus_key,
        install=install,
        argv=(*entry_argv(install, demo), *args),
        env=env,
        host=profile.server.host,
        port=chosen_port,
        demo=demo,
        warnings=tuple(warnings),
    )
