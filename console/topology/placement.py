"""Resolve a command on a host: the plan's NUMA binding, GPU checks and warnings (pure).

A plan is what `ddconsole plan` prints and what launching runs.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from console.core.errors import ConsoleError, PlacementError
from console.core.net import free_port, port_is_free
from console.core.redact import MASK, redact_argv, redact_env
from console.core.units import format_index_set
from console.profiles.command import CommandSpec, build_command
from console.profiles.loader import load_profile_file
from console.profiles.models import NumaPolicy
from console.topology.model import Topology
from console.topology.nodes import head_address, node_flags

REDACTED = MASK
"""Where a key would be in a plan's argv: the one redaction mark (core.redact) everywhere."""


_KEY_FLAGS = ("--api-key", "--admin-api-key")


def _profile_values(plan: Plan) -> tuple[dict[str, str], list[str]]:
    """The env and argv the plan's profile file gives its layout and variant now; empty when
    the file is gone or no longer has them."""
    try:
        loaded = load_profile_file(Path(plan.profile_path), plan.profile)
        command = build_command(
            loaded, plan.layout, plan.variant, port=plan.port, demo=plan.demo, gpus=plan.gpus
        )
    except (ConsoleError, OSError, ValueError):
        return {}, []
    return dict(command.env), list(command.argv)


@dataclass(frozen=True)
class PlanWarning:
    code: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class Plan:
    """A launchable command: argv (secrets redacted), env additions, GPUs, NUMA, port."""

    profile: str
    profile_path: str
    layout: str
    variant: str
    model: str
    served_name: str
    architecture: str
    algorithm: str
    argv: tuple[str, ...]
    env: dict[str, str]
    gpus: tuple[int, ...]
    numa_nodes: tuple[int, ...]
    numa_policy: str
    numa_binding: dict[int, int | None]
    host: str
    port: int
    tp: int
    dp: int
    api_key_env: str | None
    demo: bool
    requires: str = ""
    warnings: tuple[PlanWarning, ...] = field(default_factory=tuple)
    admin_api_key_env: str | None = None
    """The variable holding `--admin-api-key` (SGLang then takes only it on /flush_cache)."""
    nodes: tuple[str, ...] = ()
    """A multi-node layout's nodes (`local` or host names), head first; empty for one node."""
    node_rank: int = 0
    dist_init_addr: str = ""
    """`HOST:PORT` of the head's rendezvous (`--dist-init-addr`); empty for one node."""

    @property
    def shown_env(self) -> dict[str, str]:
        """`env` as it may be shown or written: secret-named values and URL passwords `***`
        (core.redact's one policy). `env` itself keeps the real values for the launch."""
        return redact_env(self.env)

    @property
    def shown_argv(self) -> list[str]:
        """`argv` as it may be shown or written (the API key is `***` in `argv` already)."""
        return redact_argv(self.argv)

    @property
    def command_line(self) -> str:
        """The launch command as shown and logged, secrets masked."""
        env_part = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.shown_env.items()))
        return f"{env_part} {shlex.join(self.shown_argv)}".strip()

    def with_secrets(self) -> Plan:
        """This plan with the values its JSON masked (a secret-named variable, a URL password)
        read back from its profile file, for relaunching a plan rebuilt from a server record.
        A masked variable the profile no longer has is left out rather than passed as `***`;
        a masked argument it no longer has stays as it is."""
        masked_env = [k for k, v in self.env.items() if MASK in v]
        masked_argv = [
            i
            for i, a in enumerate(self.argv)
            if MASK in a and not (a == REDACTED and i and self.argv[i - 1] in _KEY_FLAGS)
        ]
        if not masked_env and not masked_argv:
            return self
        env, argv = _profile_values(self)
        real_env = dict(self.env)
        for name in masked_env:
            value = env.get(name)
            if value is not None and redact_env({name: value})[name] == self.env[name]:
                real_env[name] = value
            else:
                del real_env[name]
        # By position: a flag's value (`--ssl-keyfile-password PW`) is masked only beside its
        # flag, so it maps back only where the profile's command (the plan's argv begins with
        # it; placement adds the rest) still lines up with this one once masked.
        fresh = list(argv)
        aligned = list(redact_argv(fresh)) == list(self.argv[: len(fresh)])
        real_argv = list(self.argv)
        for i in masked_argv:
            if aligned and i < len(fresh):
                real_argv[i] = fresh[i]
        return replace(self, env=real_env, argv=tuple(real_argv))

    def launch_argv(self, environ: Mapping[str, str]) -> list[str]:
        """The argv to execute: a key flag whose variable is unset is left out (the server
        runs without that key, as `plan` warned); one that is set keeps its `***`
        placeholder, which the waiter swaps for a `--config` pipe serving the key
        (console/server/keypipe.py), so the key is in no command line."""
        names = {"--api-key": self.api_key_env, "--admin-api-key": self.admin_api_key_env}
        argv: list[str] = []
        tokens = list(self.argv)
        index = 0
        while index < len(tokens):
            name = names.get(tokens[index])
            if name and tokens[index + 1 : index + 2] == [REDACTED]:
                argv += [tokens[index], REDACTED] if environ.get(name) else []
                index += 2
                continue
            argv.append(tokens[index])
            index += 1
        return argv

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "profile_path": self.profile_path,
            "layout": self.layout,
            "variant": self.variant,
            "model": self.model,
            "served_name": self.served_name,
            "architecture": self.architecture,
            "algorithm": self.algorithm,
            "argv": self.shown_argv,
            "env": self.shown_env,
            "gpus": list(self.gpus),
            "numa_nodes": list(self.numa_nodes),
            "numa_policy": self.numa_policy,
            "numa_binding": {str(gpu): node for gpu, node in self.numa_binding.items()},
            "host": self.host,
            "port": self.port,
            "tp": self.tp,
            "dp": self.dp,
            "api_key_env": self.api_key_env,
            "admin_api_key_env": self.admin_api_key_env,
            "demo": self.demo,
            "requires": self.requires,
            "command_line": self.command_line,
            "warnings": [w.to_json() for w in self.warnings],
            "nodes": list(self.nodes),
            "node_rank": self.node_rank,
            "dist_init_addr": self.dist_init_addr,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        """Rebuild a plan saved by `to_json` (state files); raises KeyError/TypeError/ValueError."""
        return cls(
            profile=str(data["profile"]),
            profile_path=str(data.get("profile_path", "")),
            layout=str(data["layout"]),
            variant=str(data["variant"]),
            model=str(data.get("model", "")),
            served_name=str(data.get("served_name", "")),
            architecture=str(data.get("architecture", "")),
            algorithm=str(data.get("algorithm", "off")),
            argv=tuple(str(a) for a in data["argv"]),
            env={str(k): str(v) for k, v in dict(data.get("env", {})).items()},
            gpus=tuple(int(g) for g in data["gpus"]),
            numa_nodes=tuple(int(n) for n in data.get("numa_nodes", [])),
            numa_policy=str(data.get("numa_policy", "auto")),
            numa_binding={
                int(k): (None if v is None else int(v))
                for k, v in dict(data.get("numa_binding", {})).items()
            },
            host=str(data.get("host", "127.0.0.1")),
            port=int(data["port"]),
            tp=int(data.get("tp", 1)),
            dp=int(data.get("dp", 1)),
            api_key_env=data.get("api_key_env"),
            admin_api_key_env=data.get("admin_api_key_env"),
            demo=bool(data.get("demo", False)),
            requires=str(data.get("requires", "")),
            warnings=tuple(
                PlanWarning(str(w["code"]), str(w["message"])) for w in data.get("warnings", [])
            ),
            nodes=tuple(str(n) for n in data.get("nodes", [])),
            node_rank=int(data.get("node_rank", 0)),
            dist_init_addr=str(data.get("dist_init_addr", "")),
        )


PORT_TRIES = 100
"""How many ports after a held one `next_free_port` tries."""


def next_free_port(
    start: int,
    host: str,
    *,
    taken: Collection[int] = (),
    port_checker: Callable[[int, str], bool] = port_is_free,
    tries: int = PORT_TRIES,
) -> int | None:
    """The first port from `start` on that is not in `taken` (promised to a server that may
    not have bound it yet) and that `port_checker` finds free; None after `tries` ports or at
    65535."""
    for port in range(start, min(start + tries, 65536)):
        if port not in taken and port_checker(port, host):
            return port
    return None


def resolve(
    command: CommandSpec,
    topology: Topology,
    *,
    port_checker: Callable[[int, str], bool] | None = port_is_free,
    numactl_present: bool | None = None,
) -> Plan:
    """Place `command` on `topology`; a GPU the host lacks is a PlacementError naming the key."""
    layout = command.layout
    for position, gpu in enumerate(layout.gpus):
        if topology.gpu(gpu) is None:
            present = format_index_set(list(topology.gpu_indices))
            why = topology.gpu_status or f"GPUs on this host: {present}"
            where = (
                f"{command.profile.path}: {command.gpus_key}[{position}]"
                if command.gpus_key != "--gpus"
                else "--gpus"
            )
            raise PlacementError(f"{where}: GPU {gpu} is not on this host ({why})")
    warnings = [PlanWarning(w.code, w.message) for w in command.warnings]
    binding: dict[int, int | None] = {}
    for gpu in layout.gpus:
        info = topology.gpu(gpu)
        binding[gpu] = None if info is None else info.numa_node
        if info is not None and info.error:
            warnings.append(PlanWarning("gpu-unreadable", f"GPU {gpu}: {info.error}"))
        if info is not None and info.link_downtrained:
            warnings.append(
                PlanWarning(
                    "pcie-downtrained",
                    f"GPU {gpu} PCIe link runs at x{info.pcie_width_current} of "
                    f"x{info.pcie_width_max}: check the slot or riser",
                )
            )
    nodes = tuple(sorted({node for node in binding.values() if node is not None}))
    for group_index in range(layout.dp):
        group = layout.gpus[group_index * layout.tp : (group_index + 1) * layout.tp]
        group_nodes = sorted({node for g in group if (node := binding[g]) is not None})
        if len(group_nodes) > 1:
            label = "TP group" if layout.dp == 1 else f"TP group {group_index} (DP replica)"
            warnings.append(
                PlanWarning(
                    "numa-crossing",
                    f"{label} on GPUs {format_index_set(list(group))} spans NUMA nodes "
                    f"{', '.join(str(n) for n in group_nodes)}: all-reduce crosses the socket "
                    "interconnect over PCIe",
                )
            )
    argv = list(command.argv)
    env = dict(command.env)
    policy = layout.numa
    if policy is NumaPolicy.PIN:
        if any(node is None for node in binding.values()):
            warnings.append(
                PlanWarning(
                    "numa-unknown", "NUMA node unknown for some GPUs; leaving binding to SGLang"
                )
            )
        elif len(topology.numa_nodes) > 1:
            # --numa-node is indexed by the GPU id SGLang sees, i.e. after CUDA_VISIBLE_DEVICES.
            argv += ["--numa-node", *(str(binding[gpu]) for gpu in layout.gpus)]
    elif policy is NumaPolicy.OFF:
        env["SGLANG_AUTO_NUMA_BIND"] = "0"
    if (
        not command.demo
        and policy is not NumaPolicy.OFF
        and len(topology.numa_nodes) > 1
        and not (numactl_present if numactl_present is not None else shutil.which("numactl"))
    ):
        warnings.append(
            PlanWarning(
                "numactl-missing",
                "numactl is not installed: SGLang cannot bind schedulers to NUMA nodes",
            )
        )
    if port_checker is not None and not port_checker(command.port, command.host):
        warnings.append(
            PlanWarning("port-busy", f"port {command.port} on {command.host} is in use now")
        )
    api_key_env = command.profile.profile.server.api_key_env
    if api_key_env:
        argv += ["--api-key", REDACTED]
        if not command.demo and not os.environ.get(api_key_env):
            warnings.append(
                PlanWarning(
                    "api-key-unset", f"{api_key_env} is not set: the server would run without a key"
                )
            )
    admin_api_key_env = command.profile.profile.server.admin_api_key_env
    if admin_api_key_env:
        argv += ["--admin-api-key", REDACTED]
    dist_init_addr = ""
    if layout.nodes:
        dist_init_addr = f"{head_address(layout.nodes[0], command.host)}:{free_port()}"
        argv += node_flags(len(layout.nodes), 0, dist_init_addr)
    profile = command.profile.profile
    return Plan(
        profile=command.profile.name,
        profile_path=str(command.profile.path),
        layout=command.layout_name,
        variant=command.variant_name,
        model=profile.model.name,
        served_name=profile.model.effective_served_name,
        architecture=profile.model.architecture.value,
        algorithm=command.variant.algorithm.value,
        argv=tuple(argv),
        env=env,
        gpus=layout.gpus,
        numa_nodes=nodes,
        numa_policy=policy.value,
        numa_binding=binding,
        host=command.host,
        port=command.port,
        tp=layout.tp,
        dp=layout.dp,
        api_key_env=api_key_env,
        admin_api_key_env=admin_api_key_env,
        demo=command.demo,
        requires=command.variant.requires,
        warnings=tuple(warnings),
        nodes=layout.nodes,
        dist_init_addr=dist_init_addr,
    )
