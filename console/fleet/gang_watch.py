"""The supervisor of a gang whose nodes run on several hosts: `python -m
console.fleet.gang_watch GANG_FILE`, detached on the console host by `up`.

It holds one link per host and follows each node with `ddconsole logs ID -f --json -n 0`
there (that verb checks its node's state every 0.25 s on its host and says `end` once the
node ended: far cheaper than a `ps` per host and second). When a node ends without a stop
request, it reads every host's `ps --json --all`, takes the node that ended first as the
cause and stops the others on their hosts with `down --gang-failure REASON`, the texts of
console.server.gang (`node 1 exited 137 (SIGKILL); the gang was stopped`). A `down` of the
gang on this host marks the file and ends this process; a lost link is retried with backoff
(the nodes keep running meanwhile, as every server on a host whose link is down does).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import signal
import sys
import time
from pathlib import Path
from typing import Any

from console.core.errors import ConsoleError
from console.fleet.gang_file import GangFile, GangNode, load, save
from console.fleet.gang_up import STOP_GRACE_S, TERMINAL, Links, gang_hosts
from console.fleet.link import LinkDown
from console.server.gang import failure_reason
from console.server.records import ExitInfo

BACKOFF_INITIAL_S = 1.0
BACKOFF_MAX_S = 30.0
DOWN_TIMEOUT_S = 120.0


def reason_for(node: GangNode, status: dict[str, Any]) -> str:
    """Why the gang is stopped when `node` ended first, in console.server.gang's words."""
    code = status.get("exit_code")
    if code is not None:
        info = ExitInfo(int(code), float(status.get("ended_wall") or time.time()))
        return failure_reason(node.rank, info)
    if status.get("state") == "stopped":
        who = "node 0 (the head)" if node.rank == 0 else f"node {node.rank}"
        return f"{who} was stopped ({status.get('reason') or 'on its host'}); the gang was stopped"
    return failure_reason(node.rank, None)


def ended_on_its_own(status: dict[str, Any] | None) -> bool:
    """A node that ended and was not stopped by its gang."""
    return (
        status is not None
        and status.get("state") in TERMINAL
        and status.get("failure_kind") != "gang"
    )


class Watch:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.gang: GangFile = load(path)
        self.links = Links(gang_hosts(self.gang.hosts, str(path)), self.gang.demo)
        self.ended: asyncio.Queue[GangNode] = asyncio.Queue()

    async def follow(self, node: GangNode) -> None:
        """Put `node` on the queue once its host says it ended."""
        link = self.links.links[node.host]
        args = self.links.args(["logs", node.id, "-f", "--json", "-n", "0"])
        backoff = BACKOFF_INITIAL_S
        while True:
            try:
                async with link.lines(args) as lines:
                    while True:
                        raw = await lines.readline()
                        if not raw:
                            break
                        backoff = BACKOFF_INITIAL_S
                        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
                        with contextlib.suppress(ValueError):
                            if "end" in json.loads(text):
                                await self.ended.put(node)
                                return
            except LinkDown:
                pass
            # The stream ended without `end` (a lost link, or no such node there): look.
            try:
                servers = await self.links.servers(node.host)
            except ConsoleError:
                servers = None
            if servers is not None and (
                node.id not in servers or servers[node.id].get("state") in TERMINAL
            ):
                await self.ended.put(node)
                return
            await asyncio.sleep(backoff)
            backoff = min(BACKOFF_MAX_S, backoff * 2)

    async def statuses(self) -> dict[str, dict[str, Any] | None]:
        """Every node's status from its host (None where the host did not answer)."""

        async def one(host: str) -> dict[str, dict[str, Any]] | None:
            try:
                return await self.links.servers(host)
            except ConsoleError:
                return None

        found = dict(
            zip(self.gang.hosts, await asyncio.gather(*map(one, self.gang.hosts)), strict=True)
        )
        out: dict[str, dict[str, Any] | None] = {}
        for node in self.gang.nodes:
            servers = found[node.host]
            out[node.id] = None if servers is None else servers.get(node.id)
        return out

    async def stop_gang(self) -> bool:
        """Once a node ended: stop the others with the reason; False when it was a stop
        asked for here (nothing to do) or no node ended on its own after all."""
        self.gang = load(self.path)
        if self.gang.stop_requested_wall is not None or self.gang.ended_wall is not None:
            return True
        statuses = await self.statuses()
        ended = [n for n in self.gang.nodes if ended_on_its_own(statuses[n.id])]
        if not ended:
            return False

        def when(node: GangNode) -> float:
            status = statuses[node.id] or {}
            value = status.get("ended_wall")
            return float(value) if value is not None else math.inf

        cause = min(ended, key=lambda n: (when(n), n.rank))
        reason = reason_for(cause, statuses[cause.id] or {})
        others = [n for n in self.gang.nodes if n is not cause]

        async def stop(node: GangNode) -> None:
            args = ["down", node.id, "--gang-failure", reason, "--grace", str(STOP_GRACE_S)]
            with contextlib.suppress(LinkDown):
                await self.links.run(node.host, args, DOWN_TIMEOUT_S)

        await asyncio.gather(*map(stop, others))
        self.gang = load(self.path)
        self.gang.ended_wall = time.time()
        self.gang.failure = reason
        save(self.path, self.gang)
        return True

    async def run(self) -> None:
        followers = [asyncio.create_task(self.follow(node)) for node in self.gang.nodes]
        try:
            while True:
                await self.ended.get()
                if await self.stop_gang():
                    return
        finally:
            for task in followers:
                task.cancel()
            await asyncio.gather(*followers, return_exceptions=True)
            await self.links.close()


async def _main(path: Path) -> None:
    watch = Watch(path)
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    # `down` of the gang on this host ends the supervisor with SIGTERM: close the links.
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await watch.run()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m console.fleet.gang_watch GANG_FILE", file=sys.stderr)
        return 2
    try:
        asyncio.run(_main(Path(argv[0])))
    except ConsoleError as exc:
        print(f"ddconsole gang supervisor: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
