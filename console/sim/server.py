"""`python -m console.sim`: start up like SGLang, then serve until stopped.

Startup as SGLang 0.5.23's: argument resolution in the leader, then the schedulers' load
phases, each rank's lines with its own prefix (console.sim.ranklog), CUDA graph capture
(console.sim.graphs), the HTTP port bound only after loading (connection refused meanwhile),
SGLang's warmup request, then the ready line. SIGTERM before warmup kills at once (SGLang
installs its drain handler lazily); after it, the server drains running requests and exits 0.
Failures end the way SGLang's do (console.sim.failures): -9 after a scheduler's, 1 after the
leader's, 2 for argparse, 3 for a port in use. Scheduler and detokenizer child processes die
with the leader unless the `orphans` fault is on.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import uvicorn

from console.hw.simload import SIM_GPU_DIR_ENV, SimProcess
from console.sim import crashes, graphs, nodes
from console.sim.argparser import build_parser
from console.sim.catalog import ModelEntry, lookup
from console.sim.clock import SimClock
from console.sim.dispatch import (
    Dispatcher,
    SlowStepTimer,
    load_method,
    slow_ranks,
    starved_ranks,
)
from console.sim.engine import Engine, SimRequest
from console.sim.failures import (
    die_by_kill_tree,
    die_by_sigquit,
    exit_with_traceback,
    launch_server_finally,
)
from console.sim.gpuload import GPU_MEMORY_BYTES, GpuLoadPublisher, visible_gpus
from console.sim.http import build_app
from console.sim.options import OptionsError, SimOptions, parse
from console.sim.perf import GPUS_PER_NUMA_NODE, decoding
from console.sim.proctree import ProcessTree, Rank, plan_ranks
from console.sim.ranklog import (
    AccessPathFilter,
    RankLog,
    Widths,
    configure_logging,
    rank_prefixes,
    stats_logging_prefixes,
)
from console.sim.rendezvous import Gang, RendezvousError, split_addr
from console.sim.state import SimState, Status
from console.sim.stats import SimStats

log = logging.getLogger("sglang.sim")
READY_LINE = "The server is fired up and ready to roll!"
SPEC_DEFAULT_MAX_RUNNING = 48
# A 1x1 PNG: SGLang's VLM warmup sends an image (sglang 0.5.23 srt/entrypoints/http_server.py
# :2289-2316, 2431-2440); the simulator does not look at it.
WARMUP_IMAGE = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
SIM_NUMA_NODES = 2
"""NUMA nodes of the simulated host (console/hw/simulated.py SimulatedHostSpec)."""
HOLD_POLL_S = 0.02
"""How often a `hold-capture` fault looks for its release file (real seconds)."""


def parallel_widths(options: SimOptions) -> Widths:
    """The widths besides TP and DP that show in scheduler prefixes and titles; PP also
    multiplies the schedulers (sglang 0.5.23 srt/entrypoints/engine.py:931-937)."""

    def width(name: str) -> int:
        return max(1, int(options.get(name) or 1))

    return Widths(
        pp=width("pp_size"),
        ep=width("ep_size"),
        attn_cp=width("attn_cp_size"),
        moe_dp=width("moe_dp_size"),
    )


def uvicorn_log_config(exclude_prefixes: list[str]) -> dict[str, Any]:
    """uvicorn's logging as SGLang sets it up: its default config with SGLang's formats, the
    access log on, minus the paths of `--uvicorn-access-log-exclude-prefixes` (sglang 0.5.23
    srt/utils/common.py:3452-3575); lines go to stdout, where the simulator logs."""
    stamp = "%Y-%m-%d %H:%M:%S"
    access: dict[str, Any] = {
        "formatter": "access",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stdout",
    }
    config: dict[str, Any] = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "default": {
                "()": "uvicorn.logging.DefaultFormatter",
                "fmt": "[%(asctime)s] %(levelprefix)s %(message)s",
                "datefmt": stamp,
                "use_colors": False,
            },
            "access": {
                "()": "uvicorn.logging.AccessFormatter",
                "fmt": '[%(asctime)s] %(levelprefix)s %(client_addr)s - "%(request_line)s" '
                "%(status_code)s",
                "datefmt": stamp,
                "use_colors": False,
            },
        },
        "handlers": {
            "default": {
                "formatter": "default",
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stdout",
            },
            "access": access,
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        },
    }
    if exclude_prefixes:
        config["filters"] = {
            "exclude": {"()": AccessPathFilter, "excluded_path_prefixes": exclude_prefixes}
        }
        access["filters"] = ["exclude"]
    return config


def _ranks(options: SimOptions, tp: int, dp: int, gpus: list[int]) -> list[Rank]:
    """The schedulers SGLang would start and the node each is bound to: `--numa-node`, else
    (SGLANG_AUTO_NUMA_BIND, default on: sglang 0.5.23 srt/environ.py:1722) its GPU's node.
    Bind v2 (numactl) and v1 (SGLANG_NUMA_BIND_V2=0, libnuma inside the scheduler) bind the
    same node (srt/utils/numa_utils.py:29, srt/managers/scheduler.py:6304-6307)."""
    nodes = options.get("numa_node")
    return plan_ranks(
        tp=tp,
        dp=dp,
        gpus=gpus,
        numa_node=[int(n) for n in nodes] if isinstance(nodes, list) else None,
        auto_bind=_env_flag("SGLANG_AUTO_NUMA_BIND"),
        gpus_per_node=GPUS_PER_NUMA_NODE,
        node_count=SIM_NUMA_NODES,
        misbind=options.fault("misbind") is not None,
        widths=parallel_widths(options),
    )


def _env_flag(name: str) -> bool:
    """An SGLang EnvBool that defaults to true: false for false/0/no/n, any case
    (sglang 0.5.23 srt/environ.py:143-150; SGLang rejects other words, here they read true)."""
    return os.environ.get(name, "1").lower() not in ("false", "0", "no", "n")


def _crosses_numa(options: SimOptions, gpus: list[int]) -> bool:
    nodes = options.get("numa_node")
    if isinstance(nodes, list) and nodes:
        return len(set(nodes)) > 1
    return len({gpu // GPUS_PER_NUMA_NODE for gpu in gpus}) > 1


class SimServer:
    def __init__(self, options: SimOptions) -> None:
        self.options = options
        self.tp = int(options.get("tp_size") or 1)
        self.dp = int(options.get("dp_size") or 1)
        self.widths = parallel_widths(options)
        self.clock = SimClock(options.speed)
        model_path = str(options.get("model_path"))
        served = options.get("served_model_name")
        self.served_name = str(served) if served else model_path
        self.model: ModelEntry = lookup(self.served_name, model_path)
        self.nnodes = max(1, int(options.get("nnodes") or 1))
        self.node_rank = int(options.get("node_rank") or 0)
        # Each node runs its share of the TP ranks (sglang 0.5.23
        # srt/entrypoints/engine.py:2045-2075, _calculate_rank_ranges).
        self.local_tp = max(1, self.tp // self.nnodes)
        self.gang: Gang | None = None
        self.watcher: asyncio.Task[None] | None = None
        self.gpus = visible_gpus(os.environ, self.local_tp * self.widths.pp * self.dp)
        folder = os.environ.get(SIM_GPU_DIR_ENV)
        self.publisher = GpuLoadPublisher(
            Path(folder) if folder else None,
            self.gpus,
            self.model,
            self.tp,
            self.served_name,
        )
        self.tree = ProcessTree(
            nodes.node_ranks(
                _ranks(options, self.local_tp, self.dp, self.gpus),
                self.tp,
                self.node_rank * self.local_tp,
            ),
            dp=self.dp,
            orphans=options.fault("orphans") is not None,
            detokenizer=self.node_rank == 0,
        )
        self.state: SimState | None = None
        self.stopping = asyncio.Event()
        self.exit_code = 0
        prefixes = rank_prefixes(self.tp, self.dp, self.widths)
        if self.nnodes > 1:
            # A node logs for its own TP ranks only (multi-node refuses DP, so TP is the
            # only dimension the nodes split).
            start = self.node_rank * self.local_tp
            prefixes = prefixes[start : start + self.local_tp] or prefixes
        self.ranks = RankLog(log, prefixes)
        self.serving = False
        """True once SGLang's serving-phase SIGQUIT handler would be installed: at the first
        generate request, the warmup's."""

    # -- process tree --------------------------------------------------------------------

    def spawn_children(self) -> None:
        """Start the schedulers (or the DP controller) and the detokenizer, and name them in
        the GPU publication: each GPU's scheduler holds it, as NVML shows on a real host."""
        self.tree.start()
        # With a NUMA node, the scheduler's CPUs are that node's; without, every CPU.
        processes = tuple(
            SimProcess(c.pid, c.title, c.rank.gpu, c.rank.numa_node)
            for c in self.tree.schedulers
            if c.rank is not None
        ) + tuple(SimProcess(c.pid, c.title) for c in self.tree.helpers)
        self.publisher.set_processes(processes)
        self.publisher.publish()

    def kill_children(self) -> None:
        self.tree.kill()

    # -- startup -------------------------------------------------------------------------

    def log_arguments(self) -> None:
        options = self.options
        # SGLang logs the resolved dict as an f-string, API keys and ssl_keyfile_password in
        # clear; only the three watermark fields become '<redacted>', None or not (sglang
        # 0.5.23 srt/entrypoints/engine.py:173-174, 1185; srt/server_args.py:316-333;
        # srt/sampling/watermarking/core.py:25-27, 81-91). The waiter masks the keys.
        resolved = dict(options.server_args)
        resolved["served_model_name"] = self.served_name
        for name in ("watermark_config", "watermark_key", "watermark_key_b"):
            resolved[name] = "<redacted>"
        log.info(f"server_args={resolved}")
        log.info(
            "[sim] SGLang simulator (speed x%g, seed %d%s); model %s matched catalog entry %r",
            options.speed,
            options.seed,
            ", faults " + ",".join(f.kind for f in options.faults) if options.faults else "",
            self.served_name,
            self.model.key,
        )
        if self.model.generic:
            log.info(
                "[sim] model %r is not in the catalog: using generic dense defaults",
                self.served_name,
            )
        if options.unmodeled:
            log.info("[sim] accepted but not modeled: %s", " ".join(options.unmodeled))
        if options.unknown:
            log.info("[sim] not SGLang 0.5.23 flags (accepted): %s", " ".join(options.unknown))

    def cleanup(self) -> None:
        self.kill_children()
        self.publisher.withdraw()

    async def resolve(self) -> int | None:
        """Argument resolution and the leader's checks, before any scheduler starts
        (sglang 0.5.23 launch_server.py:29, srt/entrypoints/engine.py:1153-1155): its warnings,
        then a config error or a leader-side load fault ends the launch with exit status 1."""
        options = self.options
        if int(options.get("pp_size") or 1) > 1:
            # sglang 0.5.23 srt/arg_groups/overrides.py:1623-1628
            log.warning("Pipeline parallelism is incompatible with overlap schedule.")
        for warning in graphs.prefill_conflicts(options):
            log.warning(warning)
        problem = nodes.check_args(options)
        if problem is not None:
            return exit_with_traceback(log, problem, cleanup=self.cleanup)
        algorithm = str(options.get("speculative_algorithm") or "").upper()
        if algorithm == "DFLASH" and not options.get("speculative_draft_model_path"):
            return exit_with_traceback(
                log, crashes.DFLASH_WITHOUT_DRAFT.lines, cleanup=self.cleanup
            )
        crash = options.fault("crash-at-load")
        entry = crashes.LOAD_CRASHES.get(crash.arg or "oom") if crash else None
        if entry is not None and not entry.in_scheduler:
            if crash is not None and crash.arg == "dp-port":
                return await self.wait_dp_ports(entry)
            return exit_with_traceback(log, self.crash_lines(entry), cleanup=self.cleanup)
        return None

    async def wait_dp_ports(self, entry: crashes.Crash) -> int:
        """The `crash-at-load:dp-port` fault: DP attention's scheduler input port stays taken.
        The leader's PortArgs.init_new waits SGLANG_WAIT_PORT_TIMEOUT seconds (default 30),
        warning at 15, 20, 25 s, logs `Port is already in use.` with the traceback, and the
        ValueError ends the launch: exit 1 (sglang 0.5.23 srt/entrypoints/engine.py:1184,
        srt/server_args.py:883-888, srt/utils/network.py:64-104)."""
        ports = crashes.dp_attention_ports(int(self.options.get("port") or 30000))
        port = ports["scheduler_input_port"]
        try:
            timeout = int(os.environ.get("SGLANG_WAIT_PORT_TIMEOUT", "30"))
        except ValueError:
            timeout = 30
        for second in range(timeout):
            if second > 10 and second % 5 == 0:
                log.warning(crashes.port_waiting_line(port))
            await self.clock.sleep(1.0)
        extra = {"port": str(port), "timeout": str(timeout)}
        error = crashes.fill(
            [crashes.DP_PORT_ERROR], model="", mem_fraction_static=0, endpoint="", extra=extra
        )
        # logger.exception: the message, then the traceback from init_new's frame down.
        # A free port below the ephemeral range in SGLang (srt/server_args.py:771-773).
        nccl_port = max(1024, port - 1000)
        log.error(
            "\n".join(
                [
                    crashes.port_in_use_line(ports, nccl_port),
                    "Traceback (most recent call last):",
                    *crashes.DP_PORT_FRAMES,
                    *error,
                ]
            )
        )
        return exit_with_traceback(log, self.crash_lines(entry, extra), cleanup=self.cleanup)

    def crash_lines(self, crash: crashes.Crash, extra: dict[str, str] | None = None) -> list[str]:
        return crashes.fill(
            crash.lines,
            model=str(self.options.get("model_path")),
            mem_fraction_static=float(self.options.get("mem_fraction_static") or 0.85),
            endpoint=crashes.hub_endpoint(os.environ),
            extra=extra,
        )

    def fail_in_scheduler(self, crash: crashes.Crash) -> NoReturn:
        """A scheduler raises: it logs the traceback and SIGQUITs the leader."""
        self.ranks.first(logging.ERROR, "\n".join(self.crash_lines(crash)))
        die_by_sigquit(log, serving=self.serving, cleanup=self.cleanup)

    def on_sigquit(self) -> None:
        die_by_sigquit(log, serving=self.serving, cleanup=self.cleanup)

    async def load(self) -> None:
        """The schedulers' load phases, each line logged by every rank with its prefix; a
        scheduler crash fault ends the process there, as SGLang does."""
        options = self.options
        crash = options.fault("crash-at-load")
        entry = crashes.LOAD_CRASHES.get(crash.arg or "oom") if crash else None
        fails = entry if entry is not None and entry.in_scheduler else None
        slow = 4.0 if options.fault("slow-start") else 1.0
        model = self.model
        each = self.ranks.each
        info = logging.INFO
        # sglang 0.5.23 srt/distributed/bootstrap.py:115, 190
        init_s = (0.4 + 0.05 * self.tp) * slow
        each(info, "Init parallel begin.")
        await self.clock.sleep(init_s)
        if self.nnodes > 1:
            await self.rendezvous()
        if fails and fails.stage == "init":
            self.fail_in_scheduler(fails)
        each(info, f"Init parallel ends. elapsed={init_s:.2f} s")
        # sglang 0.5.23 srt/model_executor/model_runner.py:1272-1274, 1373-1380
        weights_per_gpu = model.size_gb * 1e9 / self.tp
        each(info, f"Load weight begin. avail mem={GPU_MEMORY_BYTES / 2**30 - 0.6:.2f} GB")
        if fails and fails.stage == "weights":
            self.fail_in_scheduler(fails)
        load_s = (1.5 + model.size_gb / (self.tp * 12.0)) * slow
        steps = 5
        for step in range(1, steps + 1):
            await self.clock.sleep(load_s / steps)
            self.publisher.set_memory(weights_per_gpu * step / steps)
            self.publisher.publish()
        each(
            info,
            f"Load weight end. elapsed={load_s:.2f} s, type={model.hf_architecture}, "
            f"avail mem={(GPU_MEMORY_BYTES - weights_per_gpu) / 2**30:.2f} GB, "
            f"mem usage={weights_per_gpu / 2**30:.2f} GB.",
        )
        if fails:
            await self.clock.sleep(0.3)
            self.fail_in_scheduler(fails)
        fraction = float(options.get("mem_fraction_static") or 0.85)
        pool = max(0.0, GPU_MEMORY_BYTES * fraction - weights_per_gpu)
        await self.clock.sleep(0.5 * slow)
        used = weights_per_gpu + pool
        self.publisher.set_memory(used)
        self.publisher.publish()
        # sglang 0.5.23 srt/mem_cache/kv_cache_configurator.py:499-502
        each(info, f"Memory pool end. avail mem={(GPU_MEMORY_BYTES - used) / 2**30:.2f} GB")
        if graphs.prefill_disabled(options):
            each(info, graphs.PREFILL_DISABLED)
        for capture in graphs.plan_captures(
            options,
            max_running=int(options.get("max_running_requests") or 0)
            or (SPEC_DEFAULT_MAX_RUNNING if options.get("speculative_algorithm") else 256),
            draft_tokens=int(
                options.get("speculative_num_draft_tokens")
                or int(options.get("speculative_num_steps") or 3) + 1
            ),
            slow=slow,
        ):
            line = self.ranks.first if capture.rank0_only else each
            avail = (GPU_MEMORY_BYTES - used) / 2**30
            line(info, capture.begin.format(avail=avail))
            if capture.name in ("target decode", "target verify"):
                await self.hold_capture()
            await self.clock.sleep(capture.seconds)
            used += capture.mem_gb * 2**30
            self.publisher.set_memory(used)
            self.publisher.publish()
            line(
                info,
                capture.end.format(
                    elapsed=capture.seconds,
                    usage=capture.mem_gb,
                    after=(GPU_MEMORY_BYTES - used) / 2**30,
                ),
            )
        self.pool_bytes_total = pool * self.tp

    async def rendezvous(self) -> None:
        """Join the other nodes at --dist-init-addr (torch.distributed's store); a failure
        is the schedulers' exception, as SGLang's init_process_group raises it."""
        options = self.options
        try:
            host, port = split_addr(str(options.get("dist_init_addr") or ""))
        except RendezvousError as exc:
            self.fail_with(str(exc))
        timeout = nodes.dist_timeout(options.get("dist_timeout"), os.environ)
        if self.node_rank > 0 and options.fault("no-join") is not None:
            # The `no-join` fault: a node that never reaches the head (a wrong address, a
            # firewall); it waits in init as a real one would, until killed.
            await asyncio.Event().wait()
        try:
            self.gang = await nodes.rendezvous(
                host, port, self.node_rank, self.nnodes, timeout, self.tp, self.local_tp
            )
        except RendezvousError as exc:
            self.fail_with(str(exc))
        self.watcher = asyncio.create_task(self.gang.watch(self.on_peer_lost))

    def fail_with(self, error: str) -> NoReturn:
        """A scheduler raises `error` in Init parallel: its traceback, then SIGQUIT."""
        self.ranks.first(logging.ERROR, "\n".join(nodes.init_traceback(error)))
        die_by_sigquit(log, serving=self.serving, cleanup=self.cleanup)

    def on_peer_lost(self, rank: int, clean: bool) -> None:
        """A peer's connection ended: after the head's SHUTDOWN this node's schedulers stop
        and it exits 0; otherwise the next gloo collective fails on every scheduler."""
        if self.stopping.is_set() and self.node_rank == 0:
            return  # the head's own shutdown closed the connection
        if clean:
            log.info(crashes.kill_process_tree_line(os.getpid(), False))
            self.stopping.set()
            return
        host, port = split_addr(str(self.options.get("dist_init_addr")))
        self.fail_with(nodes.peer_lost_error(rank, host, port))

    async def hold_capture(self) -> None:
        """The `hold-capture:PATH` fault: the target's decode (or verify) graph capture lasts
        until the file PATH exists, so a test sees the capture phase for as long as it needs."""
        hold = self.options.fault("hold-capture")
        if hold is None or not hold.arg:
            return
        release = Path(hold.arg)
        while not release.exists():
            await asyncio.sleep(HOLD_POLL_S)

    def build_state(self) -> SimState:
        options = self.options
        decode = decoding(
            self.model,
            tp=self.tp,
            crosses_numa=_crosses_numa(options, self.gpus),
            algorithm=options.get("speculative_algorithm"),
            num_draft_tokens=options.get("speculative_num_draft_tokens"),
            num_steps=options.get("speculative_num_steps"),
            ddtree_budget=options.get("speculative_ddtree_budget"),
            nnodes=self.nnodes,
        )
        max_total = max(4096, int(self.pool_bytes_total / self.model.kv_bytes_per_token))
        given = options.get("max_running_requests")
        if given:
            max_running = int(given)
        elif decode.speculative:
            max_running = SPEC_DEFAULT_MAX_RUNNING
        else:
            max_running = min(2048, max(64, max_total // 4096))
        stats = SimStats(
            self.served_name,
            self.dp,
            decode.speculative,
            decode.num_draft_tokens,
            int(options.get("decode_log_interval") or 40),
            ttft_buckets=options.get("bucket_time_to_first_token"),
            itl_buckets=options.get("bucket_inter_token_latency"),
            e2e_buckets=options.get("bucket_e2e_request_latency"),
        )
        resolved = dict(options.server_args)
        resolved.update(
            {
                "served_model_name": self.served_name,
                "max_running_requests": max_running,
                "context_length": self.model.context_len,
                "api_key": "***" if options.get("api_key") else None,
                "admin_api_key": "***" if options.get("admin_api_key") else None,
            }
        )
        if decode.speculative:
            resolved["speculative_num_draft_tokens"] = decode.num_draft_tokens
        state = SimState(
            options=options,
            model=self.model,
            decode=decode,
            clock=self.clock,
            stats=stats,
            engines=[],
            served_name=self.served_name,
            tp=self.tp,
            dp=self.dp,
            max_running=max_running,
            max_total_tokens=max_total,
            resolved_args=resolved,
        )
        state.rng.seed(options.seed)
        batch_prefixes = stats_logging_prefixes(self.tp, self.dp, self.widths)
        state.engines = [
            Engine(
                rank=rank,
                model=self.model,
                tp=self.tp,
                decode=decode,
                clock=self.clock,
                stats=stats,
                seed=options.seed,
                max_running=max_running,
                max_total_tokens=max_total,
                log_prefixes=batch_prefixes[rank],
                prefix_cache=not options.get("disable_radix_cache"),
                prefill_graph_tokens=graphs.prefill_graph_tokens(options),
            )
            for rank in range(self.dp)
        ]
        for engine in state.engines:
            stats.set_load(engine.rank, 0, 0, 0, max_total)
        state.dispatcher = Dispatcher(load_method(options), starved_ranks(options))
        for rank, factor in slow_ranks(options).items():
            state.engines[rank].timer = SlowStepTimer(self.clock, factor)
        return state

    # -- serving -------------------------------------------------------------------------

    def bind(self) -> socket.socket | None:
        host = str(self.options.get("host") or "127.0.0.1")
        port = int(self.options.get("port") or 30000)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # proto=IPPROTO_TCP so asyncio sets TCP_NODELAY on accepted connections (it checks
        # the proto); without it, Nagle plus delayed ACKs hold streamed chunks for ~40 ms.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            # uvicorn 0.54 Server.startup: the lifespan starts, the bind fails, the lifespan
            # shuts down, sys.exit(STARTUP_FAILURE).
            error = (
                f"[Errno {exc.errno}] error while attempting to bind on address "
                f"({host!r}, {port}): {exc.strerror.lower() if exc.strerror else exc}"
            )
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            for line in (
                f"INFO:     Started server process [{os.getpid()}]",
                "INFO:     Waiting for application startup.",
                "INFO:     Application startup complete.",
                f"ERROR:    {error}",
                "INFO:     Waiting for application shutdown.",
                "INFO:     Application shutdown complete.",
            ):
                print(f"[{stamp}] {line}", flush=True)
            return None
        sock.set_inheritable(False)
        return sock

    def log_uvicorn_started(self) -> None:
        """The lines uvicorn logs at startup with SGLang's lifespan app and its own bind
        (uvicorn 0.54 lifespan/on.py, server.py `_log_started_message`); the simulator hands
        uvicorn a bound socket and no lifespan, so it writes them itself."""
        uvicorn_log = logging.getLogger("uvicorn.error")
        uvicorn_log.info("Waiting for application startup.")
        uvicorn_log.info("Application startup complete.")
        host = str(self.options.get("host") or "127.0.0.1")
        address = f"[{host}]" if ":" in host else host
        port = int(self.options.get("port") or 30000)
        uvicorn_log.info(f"Uvicorn running on http://{address}:{port} (Press CTRL+C to quit)")

    async def warmup(self, state: SimState) -> None:
        """SGLang's warmup (sglang 0.5.23 srt/entrypoints/http_server.py:2360-2445): GET
        /model_info, then one non-streaming request of 8 tokens at temperature 0: /generate
        with a text prompt, or /v1/chat/completions with an image for a model that reports
        image understanding. A failed warmup kills the server (:2531-2535)."""
        if self.options.get("skip_server_warmup"):
            return
        key = state.api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        status, reply = await self._request("GET", "/model_info", None, headers)
        info = json.loads(reply) if status == 200 else {}
        path = "/generate"
        # SGLang sends one prompt per DP rank in one batched request; the simulator's /generate
        # takes one prompt, so it sends as many requests at once (the same requests counted).
        copies = max(1, self.dp)
        body: dict[str, Any] = {
            "sampling_params": {"temperature": 0, "max_new_tokens": 8},
            "text": "The capital city of France is",
        }
        # A language-only (encoder-disaggregated) worker warms up on text (:2389-2397).
        vlm = isinstance(info, dict) and bool(info.get("has_image_understanding"))
        if vlm and not self.options.get("language_only"):
            path = "/v1/chat/completions"
            copies = 1
            body = {
                "model": self.served_name,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": WARMUP_IMAGE}},
                            {"type": "text", "text": "Describe the image."},
                        ],
                    }
                ],
                "max_tokens": 8,
                "stream": False,
                "temperature": 0.0,
            }
        # The first generate request installs the serving-phase signal handlers
        # (sglang 0.5.23 srt/managers/tokenizer_manager.py:900, 2440-2462).
        self.serving = True
        replies = await asyncio.gather(
            *(self._request("POST", path, body, headers) for _ in range(copies))
        )
        status, reply = next((r for r in replies if r[0] != 200), replies[0])
        if status != 200 and not self.options.fault("http-500"):
            log.error(
                "Initialization failed. warmup error: Traceback (most recent call last):\n"
                f'  File "{crashes.SGLANG}/srt/entrypoints/http_server.py", line 2501, in '
                "_execute_server_warmup\n"
                '    assert res.status_code == 200, f"{res.text}"\n'
                f"AssertionError: {reply.decode(errors='replace')}\n"
            )
            die_by_kill_tree(log, cleanup=self.cleanup)
        await self.clock.sleep(0.3)

    async def _request(
        self, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        """One HTTP/1.1 request to this server: (status, body)."""
        host = str(self.options.get("host") or "127.0.0.1")
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        port = int(self.options.get("port") or 30000)
        data = json.dumps(body).encode() if body is not None else b""
        head = {
            "Host": f"{host}:{port}",
            "Connection": "close",
            "Content-Length": str(len(data)),
            **({"Content-Type": "application/json"} if body is not None else {}),
            **headers,
        }
        request = f"{method} {path} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in head.items()
        )
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(request.encode() + b"\r\n" + data)
            await writer.drain()
            raw = await reader.read()
        finally:
            writer.close()
        header, _, content = raw.partition(b"\r\n\r\n")
        try:
            status = int(header.split(b" ", 2)[1])
        except (IndexError, ValueError):
            status = 0
        return status, content

    async def publish_loop(self, state: SimState) -> None:
        while True:
            await asyncio.sleep(1.0)
            busy = sum(e.busy_sim_s for e in state.engines) / max(1, len(state.engines))
            tokens = sum(e.tokens_in_steps for e in state.engines)
            self.publisher.tick(busy, tokens, self.options.speed)

    async def on_fault(self, kind: str) -> None:
        if kind == "crash-mid-stream":
            self.serving = True  # a request came in: the serving-phase handler is installed
            self.fail_in_scheduler(crashes.Crash(tuple(crashes.MID_STREAM_CRASH), True, "serve"))

    async def runtime_oom(self, state: SimState, after_tokens: float) -> None:
        """The runtime-oom fault: once `after_tokens` tokens were decoded after warmup, a decode
        allocation fails in the scheduler (crashes.runtime_oom) and the serving-phase SIGQUIT
        path ends the server."""
        start = sum(e.tokens_in_steps for e in state.engines)
        while sum(e.tokens_in_steps for e in state.engines) - start < after_tokens:
            await asyncio.sleep(0.02)
        running = sum(len(e.running) for e in state.engines)
        logged, exception = crashes.runtime_oom(max(1, running), 0)
        self.ranks.first(logging.ERROR, logged)
        self.ranks.first(logging.ERROR, exception)
        die_by_sigquit(log, serving=True, cleanup=self.cleanup)

    def prefill_oom(self, batch: list[SimRequest]) -> None:
        """The prefill-oom fault: the first prefill batch after warmup finds no KV slots
        (sglang 0.5.23 srt/mem_cache/allocation.py:237-246); the scheduler logs and raises,
        and the serving-phase SIGQUIT path ends the server."""
        tokens = sum(r.input_len for r in batch)
        logged, exception = crashes.runtime_oom(max(1, tokens), 0, prefill=True)
        prefixes = stats_logging_prefixes(self.tp, self.dp, self.widths)
        prefix = prefixes[min(batch[0].dp_rank, len(prefixes) - 1)][0] if batch else ""
        for message in (logged, exception):
            log.error(message, extra={"prefix": prefix})
        die_by_sigquit(log, serving=True, cleanup=self.cleanup)

    def hang(self) -> None:
        """Stop answering but stay alive: block the event loop for good."""
        log.info("[sim] fault: hang (the server stops answering)")
        sys.stdout.flush()
        while True:
            time.sleep(3600)

    async def drain(self, state: SimState) -> None:
        """SIGTERM after warmup (sglang 0.5.23 srt/managers/tokenizer_manager.py:4066-4070, a
        loop signal handler called without arguments): refuse new work, report what remains
        every 5 s until nothing does (:3508-3534), kill the children (:3554), exit 0."""
        if state.status is Status.DRAINING:
            return
        state.status = Status.DRAINING
        log.warning(
            "SIGTERM received. signum=None frame=None. Draining requests and shutting down..."
        )
        while True:
            remaining_rids = [r.rid for e in state.engines for r in (*e.running, *e.waiting)]
            log.info(
                f"Gracefully exiting... Remaining number of requests {len(remaining_rids)}. "
                f"Remaining requests {remaining_rids=}."
            )
            if state.idle:
                break
            await self.clock.sleep(5.0) if self.options.speed else await asyncio.sleep(0.05)
        log.info(crashes.kill_process_tree_line(os.getpid(), False))
        self.stopping.set()

    async def run(self) -> int:
        failure = await self.resolve()
        if failure is not None:
            return failure
        self.log_arguments()
        self.spawn_children()
        # SIGQUIT from a failing child (sglang 0.5.23 srt/entrypoints/engine.py:1968-1981).
        asyncio.get_running_loop().add_signal_handler(signal.SIGQUIT, self.on_sigquit)
        try:
            await self.load()
            if self.node_rank > 0:
                await nodes.serve_follower(
                    str(self.options.get("host") or "127.0.0.1"),
                    int(self.options.get("port") or 30000),
                    self.node_rank,
                    self.stopping,
                )
                return self.exit_code
            state = self.build_state()
            self.state = state
            sock = self.bind()
            if sock is None:
                # uvicorn's STARTUP_FAILURE exit (uvicorn config.py:81), then launch_server's
                # `finally` (sglang 0.5.23 launch_server.py:83-86).
                launch_server_finally(log, cleanup=self.cleanup)
                return 3
            tasks = [asyncio.create_task(engine.run()) for engine in state.engines]
            tasks.append(asyncio.create_task(self.publish_loop(state)))
            app = build_app(state, self.on_fault)
            config = uvicorn.Config(
                app,
                log_config=uvicorn_log_config(
                    list(self.options.get("uvicorn_access_log_exclude_prefixes") or [])
                ),
                access_log=True,
                lifespan="off",
                timeout_graceful_shutdown=1,
                loop="none",
            )
            server = _QuietServer(config)
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started and not serving.done():
                await asyncio.sleep(0.01)
            self.log_uvicorn_started()
            loop = asyncio.get_running_loop()
            # Ctrl-C is the server's graceful stop from the moment it serves: SGLang warms up
            # on a thread beside the serving uvicorn (sglang 0.5.23
            # srt/entrypoints/http_server.py:450-454), whose handlers are already in place.
            loop.add_signal_handler(signal.SIGINT, self.stopping.set)
            await self.warmup(state)
            loop.add_signal_handler(
                signal.SIGTERM, lambda: asyncio.ensure_future(self.drain(state))
            )
            # Startup objects never die: keep them out of every later collection.
            gc.freeze()
            state.status = Status.UP
            log.info(READY_LINE)
            sys.stdout.flush()
            hang = self.options.fault("hang")
            if hang:
                speed = self.options.speed or 1.0
                loop.call_later(hang.number(1.0) / speed, self.hang)
            oom = self.options.fault("runtime-oom")
            if oom:
                tasks.append(asyncio.create_task(self.runtime_oom(state, oom.number(32.0))))
            if self.options.fault("prefill-oom"):
                for engine in state.engines:
                    engine.before_prefill = self.prefill_oom
            reset = self.options.fault("metrics-reset")
            if reset:
                tasks.append(asyncio.create_task(self._reset_loop(state, reset.number(5.0))))
            await self.stopping.wait()
            if self.gang is not None:
                self.gang.shutdown()
            server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(serving, timeout=3)
            for task in tasks:
                task.cancel()
            return self.exit_code
        finally:
            if self.watcher is not None:
                self.watcher.cancel()
            if self.gang is not None:
                self.gang.close()
            self.kill_children()
            self.publisher.withdraw()

    async def _reset_loop(self, state: SimState, every_s: float) -> None:
        while True:
            await self.clock.sleep(every_s)
            state.stats.reset_counters()
            log.info("[sim] fault: counters reset")


class _QuietServer(uvicorn.Server):
    """uvicorn without its own SIGINT/SIGTERM capture: the simulator handles signals itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        options = parse(args)
    except OptionsError as exc:
        # argparse's error(): usage, then the message, exit 2.
        sys.stderr.write(exc.usage)
        print(f"sglang serve: error: {exc}", file=sys.stderr)
        return 2
    crash = options.fault("crash-at-load")
    if crash and crash.arg == "badflag":
        sys.stderr.write(build_parser(with_ddtree=False).format_usage())
        print(f"sglang serve: error: {crashes.BAD_FLAG}", file=sys.stderr)
        return 2
    configure_logging(
        int(options.get("tp_size") or 1), int(options.get("dp_size") or 1), parallel_widths(options)
    )
    try:
        return _run(SimServer(options).run())
    except KeyboardInterrupt:
        return 130


def _run(coroutine: Any) -> int:
    """Serve on uvloop when installed (as SGLang does), else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        return int(asyncio.run(coroutine))
    return int(uvloop.run(coroutine))
