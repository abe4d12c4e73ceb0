"""A multi-node launch as SGLang 0.5.23 runs one: argument checks, each node's share of the
TP ranks, the rendezvous, and a non-head node's dummy health server.

Only node rank 0 runs the tokenizer and the HTTP API; a node of rank >= 1 starts its
schedulers, waits for them, serves `/ping`, `/health` and `/health_generate` (all 200) on its
own `--host/--port` from a background thread, and blocks until the schedulers exit; its
SIGTERM handler only logs, since rank 0's ShutdownReq stops every rank
(srt/entrypoints/engine.py:1234-1295, srt/utils/common.py:3624-3684).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from console.sim import crashes
from console.sim.proctree import Rank
from console.sim.rendezvous import DEFAULT_TIMEOUT_S, Gang, host_rendezvous, join_rendezvous

log = logging.getLogger("sglang.sim")

_INIT_FRAMES = [
    "Traceback (most recent call last):",
    *crashes._AT_INIT,
    f'  File "{crashes.SGLANG}/srt/distributed/parallel_state.py", line 2517, in '
    "init_distributed_environment",
    "    torch.distributed.init_process_group(",
]
_LOOP_FRAMES = [
    "Traceback (most recent call last):",
    *crashes._AT_LOOP,
    f'  File "{crashes.SGLANG}/srt/utils/common.py", line 2693, in broadcast_pyobj',
]


DIST_TIMEOUT_ENV = "DDCONSOLE_SIM_DIST_TIMEOUT"
"""The simulator's own shorter rendezvous timeout (real seconds), for tests and demos that
cannot wait torch's ten minutes; `--dist-timeout` still wins."""


def dist_timeout(flag: object, environ: Mapping[str, str]) -> float:
    """`--dist-timeout`, else $DDCONSOLE_SIM_DIST_TIMEOUT, else torch's default."""
    for value in (flag, environ.get(DIST_TIMEOUT_ENV)):
        try:
            seconds = float(value) if value not in (None, "") else 0.0  # type: ignore[arg-type]
        except (TypeError, ValueError):
            seconds = 0.0
        if seconds > 0:
            return seconds
    return float(DEFAULT_TIMEOUT_S)


def check_args(options: Any) -> list[str] | None:
    """ServerArgs' multi-node assertions, as the traceback that ends the leader
    (srt/arg_groups/validation_hook.py:179-181, 199-202); None when they hold."""
    nnodes = max(1, int(options.get("nnodes") or 1))
    tp = int(options.get("tp_size") or 1) * int(options.get("pp_size") or 1)
    message = None
    if tp % nnodes:
        message = "tp_size must be divisible by number of nodes"
    elif int(options.get("dp_size") or 1) > 1 and nnodes != 1:
        message = (
            "multi-node data-parallel replicas are not supported; use attention DP "
            "(--attn-dp-size) across nodes"
        )
    elif not 0 <= int(options.get("node_rank") or 0) < nnodes:
        message = f"node_rank {options.get('node_rank')} is out of range for nnodes {nnodes}"
    elif nnodes > 1 and not options.get("dist_init_addr"):
        message = "--dist-init-addr is required when nnodes > 1"
    if message is None:
        return None
    return [
        *crashes._LAUNCH,
        f'  File "{crashes.SGLANG}/srt/arg_groups/validation_hook.py", line 179, in '
        "check_server_args",
        f"AssertionError: {message}",
    ]


def node_ranks(ranks: Sequence[Rank], tp: int, first_tp_rank: int) -> list[Rank]:
    """This node's schedulers renumbered as ranks `first_tp_rank`.. of the whole TP group."""
    return [replace(r, tp_rank=r.tp_rank + first_tp_rank, tp_size=tp) for r in ranks]


async def rendezvous(
    host: str, port: int, node_rank: int, nnodes: int, timeout: float, world: int, per_node: int
) -> Gang:
    if node_rank == 0:
        return await host_rendezvous(host, port, nnodes, timeout, world=world, per_node=per_node)
    return await join_rendezvous(host, port, node_rank, nnodes, timeout)


def init_traceback(error: str) -> list[str]:
    """`Scheduler hit an exception:` for an error raised by init_process_group."""
    return [crashes.SCHEDULER_EXCEPTION, *_INIT_FRAMES[1:], error]


def peer_lost_error(rank: int, host: str, port: int) -> str:
    """The gloo error a scheduler's next broadcast raises once node `rank` is gone."""
    error = (
        "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:538] "
        f"Connection closed by peer [{host}]:{port}"
    )
    return "\n".join([*_LOOP_FRAMES[1:], error])


def health_app() -> Starlette:
    async def ok(request: Request) -> Response:
        return Response(status_code=200)

    return Starlette(
        routes=[
            Route(path, ok, methods=["GET"]) for path in ("/ping", "/health", "/health_generate")
        ]
    )


class _Quiet(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


async def serve_follower(host: str, port: int, node_rank: int, stopping: asyncio.Event) -> None:
    """A non-head node after its schedulers are up: the dummy health server, SIGTERM only
    logged, until the head's shutdown (or a failure) ends the node."""
    loop = asyncio.get_running_loop()

    def on_sigterm() -> None:
        log.warning(
            f"SIGTERM received on node_rank {node_rank}; waiting for the rank-0 ShutdownReq "
            "broadcast to stop the schedulers."
        )

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    config = uvicorn.Config(
        health_app(), host=host, port=port, log_config=None, log_level="warning", loop="none"
    )
    server = _Quiet(config)
    serving = asyncio.create_task(server.serve())
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    log.info(f"Dummy health check server started in background thread at {address}")
    await stopping.wait()
    server.should_exit = True
    with contextlib.suppress(Exception):
        await asyncio.wait_for(serving, timeout=3)
    log.info(f"Dummy health check server stopped at {address}")
