"""Multi-node rendezvous: the simulator's stand-in for torch.distributed's TCPStore.

SGLang starts one model over N nodes with `--nnodes N --node-rank i --dist-init-addr
HOST:PORT` on each (sglang 0.5.23 srt/arg_groups/fields/parallel.py:32-44); every scheduler
joins the process group at `tcp://HOST:PORT`, where rank 0's store listens
(srt/distributed/bootstrap.py:322-331, parallel_state.py:2517-2524). Here the head's leader
listens on that port and each other node's leader connects once, a line protocol of its own:

    node -> head   `JOIN <node_rank>\\n`
    head -> node   `GO\\n` once every node has joined
    head -> node   `SHUTDOWN\\n` when the head stops cleanly (SGLang's ShutdownReq broadcast)

The connection stays open afterwards; its loss stands in for gloo's "Connection closed by
peer" on the next collective, which SGLang's schedulers run every loop iteration.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_TIMEOUT_S = 600
"""torch.distributed's default process-group timeout for NCCL (10 min), used when
`--dist-timeout` is unset (srt/distributed/parallel_state.py:2493-2496 passes None on)."""
CONNECT_RETRY_S = 0.1


class RendezvousError(Exception):
    """The rendezvous failed: the text is the exception torch would raise."""


def split_addr(addr: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets) as SGLang's NetworkAddress.parse reads it."""
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise RendezvousError(f"invalid --dist-init-addr {addr!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def store_timeout_text(seconds: int, joined: int, world: int) -> str:
    """The TCPStore server's error when clients are missing at the timeout (torch
    distributed/rendezvous.py `_create_c10d_store`, c10d TCPStore.cpp `waitForWorkers`)."""
    return (
        f"torch.distributed.DistStoreError: Timed out after {seconds + 1} seconds waiting for "
        f"clients. {joined}/{world} clients joined."
    )


def client_timeout_text(host: str, port: int, seconds: int) -> str:
    """A client that never reached the store (c10d socket.cpp connect loop)."""
    return (
        "torch.distributed.DistNetworkError: The client socket has timed out after "
        f"{seconds}s while trying to connect to ({host}, {port})."
    )


def peer_closed_text(host: str, port: int) -> str:
    """A collective over the gloo CPU group after a peer died (gloo transport/tcp/pair.cc)."""
    return (
        "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:538] "
        f"Connection closed by peer [{host}]:{port}"
    )


@dataclass
class Gang:
    """One node's view of the joined gang: the connections that watch its peers."""

    node_rank: int
    nnodes: int
    peers: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = field(
        default_factory=dict
    )
    server: asyncio.base_events.Server | None = None

    async def watch(self, on_lost: Callable[[int, bool], None]) -> None:
        """Wait until a peer's connection ends; `on_lost(rank, clean)` says which and whether
        the head sent SHUTDOWN first."""
        waits = {
            asyncio.create_task(_until_closed(reader)): rank
            for rank, (reader, _) in self.peers.items()
        }
        if not waits:
            return
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        task = next(iter(done))
        on_lost(waits[task], bool(task.result()))

    def shutdown(self) -> None:
        """The head's clean stop: tell every node, as ShutdownReq does."""
        for _, writer in self.peers.values():
            with contextlib.suppress(Exception):
                writer.write(b"SHUTDOWN\n")

    def close(self) -> None:
        for _, writer in self.peers.values():
            with contextlib.suppress(Exception):
                writer.close()
        if self.server is not None:
            self.server.close()


async def _until_closed(reader: asyncio.StreamReader) -> bool:
    """Read until EOF; True when SHUTDOWN came first."""
    clean = False
    while True:
        try:
            line = await reader.readline()
        except (ConnectionError, OSError):
            return clean
        if not line:
            return clean
        if line.strip() == b"SHUTDOWN":
            clean = True


async def host_rendezvous(
    host: str, port: int, nnodes: int, timeout_s: float, *, world: int, per_node: int
) -> Gang:
    """Rank 0: listen on the dist-init port until every other node has joined."""
    gang = Gang(0, nnodes)
    joined = asyncio.Event()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=5)
            word, _, rank_text = line.decode("ascii", "replace").strip().partition(" ")
            rank = int(rank_text)
        except (TimeoutError, ValueError, ConnectionError, OSError):
            writer.close()
            return
        if word != "JOIN" or not 0 < rank < nnodes or rank in gang.peers:
            writer.close()
            return
        gang.peers[rank] = (reader, writer)
        if len(gang.peers) == nnodes - 1:
            joined.set()

    try:
        gang.server = await asyncio.start_server(accept, host, port, reuse_address=True)
    except OSError as exc:
        raise RendezvousError(
            "torch.distributed.DistNetworkError: The server socket has failed to listen on "
            f"any local network address. port: {port}, useIpv6: False, code: -98, name: "
            f"EADDRINUSE, message: address already in use ({exc.strerror})"
        ) from None
    try:
        await asyncio.wait_for(joined.wait(), timeout=timeout_s)
    except TimeoutError:
        seconds = int(timeout_s)
        gang.close()
        raise RendezvousError(
            store_timeout_text(seconds, per_node * (1 + len(gang.peers)), world)
        ) from None
    for _, writer in gang.peers.values():
        writer.write(b"GO\n")
        await writer.drain()
    # No new joiners once the gang is whole.
    gang.server.close()
    gang.server = None
    return gang


async def join_rendezvous(
    host: str, port: int, node_rank: int, nnodes: int, timeout_s: float
) -> Gang:
    """Rank >= 1: connect to the head (retrying while it is not listening yet), then wait
    for GO."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            break
        except OSError:
            if loop.time() > deadline:
                raise RendezvousError(client_timeout_text(host, port, int(timeout_s))) from None
            await asyncio.sleep(CONNECT_RETRY_S)
    writer.write(f"JOIN {node_rank}\n".encode())
    await writer.drain()
    try:
        line = await asyncio.wait_for(reader.readline(), timeout=max(0.1, deadline - loop.time()))
    except TimeoutError:
        writer.close()
        raise RendezvousError(client_timeout_text(host, port, int(timeout_s))) from None
    if line.strip() != b"GO":
        writer.close()
        raise RendezvousError(peer_closed_text(host, port))
    gang = Gang(node_rank, nnodes)
    gang.peers[0] = (reader, writer)
    return gang
