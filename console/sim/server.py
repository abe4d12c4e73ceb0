"""`python -m console.sim`: start up like SGLang, then serve until stopped.

Startup: a load phase with SGLang's log milestones (connection refused meanwhile), the HTTP
port bound only after loading, a warmup request, then the ready line. SIGTERM before warmup
kills at once (SGLang installs its drain handler lazily); after it, the server drains running
requests and exits. Scheduler and detokenizer child processes die with the leader unless the
`orphans` fault is on.
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
from typing import Any

import uvicorn

from console.hw.simload import SIM_GPU_DIR_ENV, SimProcess
from console.sim import crashes
from console.sim.catalog import ModelEntry, lookup
from console.sim.clock import SimClock
from console.sim.engine import Engine
from console.sim.gpuload import GPU_MEMORY_BYTES, GpuLoadPublisher, visible_gpus
from console.sim.http import WARMUP_RID, build_app
from console.sim.options import MODELED, OptionsError, SimOptions, parse
from console.sim.perf import GPUS_PER_NUMA_NODE, decoding
from console.sim.proctree import ProcessTree, Rank, plan_ranks
from console.sim.state import SimState, Status
from console.sim.stats import SimStats

log = logging.getLogger("sglang.sim")
READY_LINE = "The server is fired up and ready to roll!"
SPEC_DEFAULT_MAX_RUNNING = 48

SIM_NUMA_NODES = 2
"""NUMA nodes of the simulated host (console/hw/simulated.py SimulatedHostSpec)."""


class _TagFilter(logging.Filter):
    def __init__(self, tp: int) -> None:
        super().__init__()
        self.tag = " TP0" if tp > 1 else ""

    def filter(self, record: logging.LogRecord) -> bool:
        record.tag = self.tag if getattr(record, "scheduler", False) else ""
        return True


def configure_logging(tp: int) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        logging.Formatter("[%(asctime)s%(tag)s] %(message)s", datefmt="%Y-%m-%d %H:%M:%S")
    )
    handler.addFilter(_TagFilter(tp))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


UVICORN_LOG_CONFIG: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "default": {
            "()": "uvicorn.logging.DefaultFormatter",
            "fmt": "%(levelprefix)s %(message)s",
            "use_colors": False,
        }
    },
    "handlers": {
        "default": {
            "formatter": "default",
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stdout",
        }
    },
    "loggers": {
        "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
        "uvicorn.error": {"level": "INFO"},
    },
}


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
        self.clock = SimClock(options.speed)
        model_path = str(options.get("model_path"))
        served = options.get("served_model_name")
        self.served_name = str(served) if served else model_path
        self.model: ModelEntry = lookup(self.served_name, model_path)
        self.gpus = visible_gpus(os.environ, self.tp * self.dp)
        folder = os.environ.get(SIM_GPU_DIR_ENV)
        self.publisher = GpuLoadPublisher(
            Path(folder) if folder else None,
            self.gpus,
            self.model,
            self.tp,
            self.served_name,
        )
        self.tree = ProcessTree(
            _ranks(options, self.tp, self.dp, self.gpus),
            dp=self.dp,
            orphans=options.fault("orphans") is not None,
        )
        self.state: SimState | None = None
        self.stopping = asyncio.Event()
        self.exit_code = 0

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
        shown = {
            k: options.server_args[k]
            for k in sorted(MODELED)
            if k in options.server_args and k not in ("api_key", "admin_api_key")
        }
        log.info("server_args=ServerArgs(%s)", ", ".join(f"{k}={v!r}" for k, v in shown.items()))
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

    def fail_at_load(self, kind: str) -> int:
        lines = crashes.LOAD_CRASHES.get(kind) or crashes.LOAD_CRASHES["oom"]
        for line in lines:
            log.error(line, extra={"scheduler": True})
        self.kill_children()
        self.publisher.withdraw()
        return 1

    async def load(self) -> int | None:
        """Run the load phases; a crash fault returns the exit code instead."""
        crash = self.options.fault("crash-at-load")
        crash_kind = crash.arg if crash else ""
        slow = 4.0 if self.options.fault("slow-start") else 1.0
        model = self.model
        sched = {"scheduler": True}
        if crash_kind == "import":
            return self.fail_at_load("import")
        log.info("Init parallel begin.", extra=sched)
        await self.clock.sleep((0.4 + 0.05 * self.tp) * slow)
        if crash_kind == "nccl":
            return self.fail_at_load("nccl")
        log.info("Init parallel ends. elapsed=%.2f s", (0.4 + 0.05 * self.tp) * slow, extra=sched)
        weights_per_gpu = model.size_gb * 1e9 / self.tp
        log.info(
            "Load weight begin. avail mem=%.2f GB", GPU_MEMORY_BYTES / 2**30 - 0.6, extra=sched
        )
        if crash_kind == "notfound":
            return self.fail_at_load("notfound")
        load_s = (1.5 + model.size_gb / (self.tp * 12.0)) * slow
        steps = 5
        for step in range(1, steps + 1):
            await self.clock.sleep(load_s / steps)
            self.publisher.set_memory(weights_per_gpu * step / steps)
            self.publisher.publish()
        log.info(
            "Load weight end. elapsed=%.2f s, type=%s, avail mem=%.2f GB, mem usage=%.2f GB.",
            load_s,
            model.hf_architecture,
            (GPU_MEMORY_BYTES - weights_per_gpu) / 2**30,
            weights_per_gpu / 2**30,
            extra=sched,
        )
        if crash_kind == "oom":
            await self.clock.sleep(0.3)
            return self.fail_at_load("oom")
        fraction = float(self.options.get("mem_fraction_static") or 0.85)
        pool = max(0.0, GPU_MEMORY_BYTES * fraction - weights_per_gpu)
        await self.clock.sleep(0.5 * slow)
        self.publisher.set_memory(weights_per_gpu + pool)
        self.publisher.publish()
        log.info(
            "Memory pool end. avail mem=%.2f GB",
            (GPU_MEMORY_BYTES - weights_per_gpu - pool) / 2**30,
            extra=sched,
        )
        capture_s = (1.2 + (0.8 if self.options.get("speculative_algorithm") else 0.0)) * slow
        log.info(
            "Capture decode CUDA graph begin. This can take up to several minutes. "
            "avail mem=%.2f GB",
            (GPU_MEMORY_BYTES - weights_per_gpu - pool) / 2**30,
            extra=sched,
        )
        await self.clock.sleep(capture_s)
        self.publisher.set_memory(weights_per_gpu + pool + 0.6e9)
        self.publisher.publish()
        log.info(
            "Capture decode CUDA graph end. elapsed=%.2f s, mem usage=0.60 GB. avail mem=%.2f GB.",
            capture_s,
            (GPU_MEMORY_BYTES - weights_per_gpu - pool - 0.6e9) / 2**30,
            extra=sched,
        )
        self.pool_bytes_total = pool * self.tp
        return None

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
            )
            for rank in range(self.dp)
        ]
        for engine in state.engines:
            stats.set_load(engine.rank, 0, 0, 0, max_total)
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
            print(
                f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
                f"({host!r}, {port}): {exc.strerror.lower() if exc.strerror else exc}",
                flush=True,
            )
            return None
        sock.set_inheritable(False)
        return sock

    async def warmup(self, state: SimState) -> None:
        """Like SGLang's warmup thread: one real streamed request to our own /generate."""
        if self.options.get("skip_server_warmup"):
            return
        host = str(self.options.get("host") or "127.0.0.1")
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        port = int(self.options.get("port") or 30000)
        body = json.dumps(
            {
                "input_ids": [0] * 8,
                "stream": True,
                "rid": WARMUP_RID,
                "sampling_params": {"max_new_tokens": 8, "ignore_eos": True},
            }
        ).encode()
        headers = {
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            "Host": f"{host}:{port}",
            "Connection": "close",
        }
        key = state.api_key
        if key:
            headers["Authorization"] = f"Bearer {key}"
        head = (
            "POST /generate HTTP/1.1\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            + "\r\n"
        )
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(head.encode() + body)
            await writer.drain()
            while await reader.read(65536):
                pass
        finally:
            writer.close()
        await self.clock.sleep(0.3)

    async def publish_loop(self, state: SimState) -> None:
        while True:
            await asyncio.sleep(1.0)
            busy = sum(e.busy_sim_s for e in state.engines) / max(1, len(state.engines))
            tokens = sum(e.tokens_in_steps for e in state.engines)
            self.publisher.tick(busy, tokens, self.options.speed)

    async def on_fault(self, kind: str) -> None:
        if kind == "crash-mid-stream":
            for line in crashes.MID_STREAM_CRASH:
                log.error(line, extra={"scheduler": True})
            sys.stdout.flush()
            self.kill_children()
            self.publisher.withdraw()
            os.kill(os.getpid(), signal.SIGKILL)

    def hang(self) -> None:
        """Stop answering but stay alive: block the event loop for good."""
        log.info("[sim] fault: hang (the server stops answering)")
        sys.stdout.flush()
        while True:
            time.sleep(3600)

    async def drain(self, state: SimState) -> None:
        """SIGTERM after warmup: refuse new work, wait for running requests, then exit."""
        if state.status is Status.DRAINING:
            return
        state.status = Status.DRAINING
        log.info("Received SIGTERM. Draining requests and shutting down...")
        while not state.idle:
            await self.clock.sleep(5.0) if self.options.speed else await asyncio.sleep(0.05)
        log.info("Gracefully exiting... remaining number of requests 0")
        self.stopping.set()

    async def run(self) -> int:
        self.log_arguments()
        self.spawn_children()
        try:
            failure = await self.load()
            if failure is not None:
                return failure
            state = self.build_state()
            self.state = state
            sock = self.bind()
            if sock is None:
                self.kill_children()
                return 1
            tasks = [asyncio.create_task(engine.run()) for engine in state.engines]
            tasks.append(asyncio.create_task(self.publish_loop(state)))
            app = build_app(state, self.on_fault)
            config = uvicorn.Config(
                app,
                log_config=UVICORN_LOG_CONFIG,
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=1,
                loop="none",
            )
            server = _QuietServer(config)
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started and not serving.done():
                await asyncio.sleep(0.01)
            loop = asyncio.get_running_loop()
            await self.warmup(state)
            loop.add_signal_handler(
                signal.SIGTERM, lambda: asyncio.ensure_future(self.drain(state))
            )
            loop.add_signal_handler(signal.SIGINT, self.stopping.set)
            # Startup objects never die: keep them out of every later collection.
            gc.freeze()
            state.status = Status.UP
            log.info(READY_LINE)
            sys.stdout.flush()
            hang = self.options.fault("hang")
            if hang:
                speed = self.options.speed or 1.0
                loop.call_later(hang.number(1.0) / speed, self.hang)
            reset = self.options.fault("metrics-reset")
            if reset:
                tasks.append(asyncio.create_task(self._reset_loop(state, reset.number(5.0))))
            await self.stopping.wait()
            server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(serving, timeout=3)
            for task in tasks:
                task.cancel()
            return self.exit_code
        finally:
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
        print("usage: sglang serve [-h] --model-path MODEL_PATH ...", file=sys.stderr)
        print(f"sglang serve: error: {exc}", file=sys.stderr)
        return 2
    crash = options.fault("crash-at-load")
    if crash and crash.arg == "badflag":
        for line in crashes.BAD_FLAG:
            print(line, file=sys.stderr)
        return 2
    configure_logging(int(options.get("tp_size") or 1))
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
