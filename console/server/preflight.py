"""Checks before a launch spends any load time: ports, GPUs, interpreter, model path."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from console.core.net import port_is_free
from console.core.units import format_bytes
from console.core.via_host import ddconsole_command
from console.hw.backend import GpuBackend, GpuDeviceError, GpuUnavailable
from console.hw.procs import cmdline, port_owner
from console.profiles.flagcheck import FlagCheckUnavailable, resolve_interpreter
from console.server.status import ServerStatus
from console.topology.placement import Plan


@dataclass
class PreflightResult:
    refusals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.refusals


def _looks_local(model_path: str) -> bool:
    return model_path.startswith(("/", "./", "../", "~"))


def preflight(
    plan: Plan,
    active: Iterable[ServerStatus],
    gpu_backend: GpuBackend,
    *,
    managed: Mapping[int, str],
    interpreter: str | None,
    check_port: bool = True,
) -> PreflightResult:
    """Everything that would make this launch fail, named, before it starts. `managed` maps
    every process of a managed server (its session, orphans included) to the server's id."""
    result = PreflightResult()
    active = list(active)
    active_ids = {status.id for status in active}
    for status in active:
        other = status.record.plan
        if other.port == plan.port:
            result.refusals.append(
                f"port {plan.port} is promised to managed server {status.id} ({status.state.value})"
            )
        shared = sorted(set(other.gpus) & set(plan.gpus))
        for gpu in shared:
            result.refusals.append(
                f"GPU {gpu} is held by managed server {status.id} ({status.state.value})"
            )
    if (
        check_port
        and not any(s.record.plan.port == plan.port for s in active)
        and not port_is_free(plan.port, plan.host)
    ):
        owner = port_owner(plan.port)
        who = f" by pid {owner[0]} ({owner[1][:80]})" if owner else ""
        result.refusals.append(f"port {plan.port} on {plan.host} is in use{who}")
    try:
        gpu_backend.open()
        for gpu in plan.gpus:
            try:
                processes = gpu_backend.compute_processes(gpu)
            except GpuDeviceError as exc:
                result.warnings.append(f"cannot list processes on GPU {gpu}: {exc.reason}")
                continue
            for proc in processes:
                holder = managed.get(proc.pid)
                if holder in active_ids:
                    continue  # refused above as held by that managed server
                memory = (
                    format_bytes(proc.used_memory_bytes)
                    if proc.used_memory_bytes
                    else "unknown memory"
                )
                command = cmdline(proc.pid)[:80] or "command unknown"
                if holder is not None:
                    # A scheduler outliving its leader holds the GPU memory
                    # (sglang 0.5.23 srt/managers/scheduler.py:6362).
                    result.refusals.append(
                        f"GPU {gpu} is held by pid {proc.pid} ({command}), {memory}, left "
                        f"running by managed server {holder}: `{ddconsole_command()} down "
                        f"{holder}` ends it"
                    )
                    continue
                result.refusals.append(
                    f"GPU {gpu} is in use by pid {proc.pid} ({command}), holding {memory}"
                )
    except GpuUnavailable as exc:
        result.warnings.append(f"cannot check GPU processes: {exc.reason}")
    if interpreter is not None:
        try:
            resolve_interpreter(interpreter)
        except FlagCheckUnavailable as exc:
            result.refusals.append(str(exc))
    model_path = _model_path(plan)
    if model_path and _looks_local(model_path):
        expanded = os.path.expanduser(model_path)
        if not os.path.exists(expanded):
            result.refusals.append(f"model path {model_path} does not exist")
    return result


def _model_path(plan: Plan) -> str | None:
    argv = list(plan.argv)
    if "--model-path" in argv:
        index = argv.index("--model-path")
        if index + 1 < len(argv):
            return argv[index + 1]
    return None
