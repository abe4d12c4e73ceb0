"""Topology: GPUs x NUMA nodes x PCIe links, and each server's intended vs actual binding.

With a fleet, the host it shows is picked with `H` (console.tui.host_choice): a remote
host's GPUs, NUMA nodes, servers and bindings are those of its latest reading, and what a
reading does not carry is named rather than guessed.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll

from console.core.units import format_bytes, format_duration, format_index_set, format_rate_bytes
from console.fleet.host_store import NOT_IN_A_READING
from console.telemetry.store import TimeSeriesStore
from console.topology.model import Topology
from console.tui.host_choice import RemoteHost, host_choice_of, show_host_title
from console.tui.screens.base import ConsoleScreen
from console.tui.views import ServerView
from console.tui.widgets.columns import Column, header_row, layout, render_row
from console.tui.widgets.pane import Pane


def _table(columns: list[Column], rows: list[list[Text | str]], width: int) -> list[Text]:
    widths = layout(columns, width)
    return [header_row(columns, widths)] + [render_row(r, columns, widths) for r in rows]


class TopologyScreen(ConsoleScreen):
    TITLE = "Topology"
    DEFAULT_CSS = """
    TopologyScreen #topology { margin: 0 1; }
    """

    def compose_body(self) -> ComposeResult:
        with VerticalScroll():
            yield Pane(id="topology")

    def on_resize(self) -> None:
        self.refresh_data()

    def refresh_data(self) -> None:
        if not self.is_mounted:
            return
        backend = self.backend
        width = max(40, self.size.width - 2)
        choice = host_choice_of(self.app)
        show_host_title(self, self.TITLE, choice.label() if choice is not None else None)
        remote = choice.remote() if choice is not None else None
        if remote is not None:
            lines = self._remote_lines(remote, width)
        else:
            store, servers = backend.store, backend.servers()
            lines = self._node_lines(backend.topology, width)
            lines += [Text(""), *self._gpu_lines(backend.topology, store, servers, width)]
            lines += [Text(""), *self._binding_lines(store, servers, width)]
        self.query_one("#topology", Pane).put(Text("\n").join(lines))

    def _remote_lines(self, remote: RemoteHost, width: int) -> list[Text]:
        """A remote host as its latest reading gives it: NUMA nodes (CPU count and load),
        GPUs by node with their links and servers, the bindings measured there."""
        topo, store, servers = remote.topology, remote.store, remote.servers()
        age = remote.age_s(self.backend.now())
        head = Text.assemble(
            (f"host {remote.name} ", "bold"),
            f"({remote.summary.target}): {len(topo.gpus)} GPUs, {len(topo.numa_nodes)} NUMA "
            "nodes, from its latest reading",
            "" if age is None else f" ({format_duration(age)} ago)",
        )
        lines = [head]
        if remote.summary.state != "up":
            why = f": {remote.summary.reason}" if remote.summary.reason else ""
            lines.append(Text(f"{remote.summary.state}{why}; last figures shown", style="yellow"))
        if topo.gpu_status:
            lines.append(Text(topo.gpu_status, style="yellow"))
        host = store.host()
        loads = {n.node: n for n in host.numa} if host is not None else {}
        columns = [Column("NODE", 4), Column("CPUS", 6, "right"), Column("CPU", 5, "right")]
        columns.append(Column("GPUS", None))
        rows: list[list[Text | str]] = []
        for node in topo.numa_nodes:
            load = loads.get(node.id)
            cpu = load.cpu_pct if load is not None else None
            rows.append(
                [
                    str(node.id),
                    str(load.cpus) if load is not None else "?",
                    "-" if cpu is None else f"{cpu:.0f}%",
                    format_index_set(list(node.gpus)),
                ]
            )
        lines += _table(columns, rows, width)
        lines += [Text(""), *self._gpu_lines(topo, store, servers, width, local=False)]
        lines += [Text(""), *self._binding_lines(store, servers, width)]
        unknown = ", ".join(NOT_IN_A_READING)
        lines += [
            Text(""),
            Text(
                f"not known from a reading: {unknown} (a console run on {remote.name} shows them)",
                style="dim",
            ),
        ]
        return lines

    def _node_lines(self, topo: Topology, width: int) -> list[Text]:
        head = Text.assemble(
            ("host ", "bold"),
            f"{len(topo.gpus)} GPUs, {len(topo.numa_nodes)} NUMA nodes, source {topo.source}",
            f", driver {topo.driver_version}" if topo.driver_version else "",
        )
        lines = [head]
        if topo.gpu_status:
            lines.append(Text(topo.gpu_status, style="yellow"))
        columns = [
            Column("NODE", 4),
            Column("CPUS", 14),
            Column("MEMORY", 10),
            Column("GPUS", None),
        ]
        rows: list[list[Text | str]] = [
            [
                str(n.id),
                format_index_set(list(n.cpus)),
                format_bytes(n.memory_total_bytes, 0),
                format_index_set(list(n.gpus)),
            ]
            for n in topo.numa_nodes
        ]
        return lines + _table(columns, rows, width)

    def _gpu_lines(
        self,
        topo: Topology,
        store: TimeSeriesStore,
        servers: list[ServerView],
        width: int,
        *,
        local: bool = True,
    ) -> list[Text]:
        """GPUs by NUMA node; a remote host's (`local` False) without the bus id and CPU
        affinity, which its readings do not carry."""
        owners = {g: s.id for s in servers if s.live for g in s.gpus}
        columns = [Column("GPU", 3, "right")]
        columns += [Column(f"N{n.id}", 3, "right") for n in topo.numa_nodes]
        columns += [
            Column("LINK now/max", 13),
            Column("RX", 10, "right"),
            Column("TX", 10, "right"),
        ]
        wide = local and width >= 110
        if wide:
            columns += [Column("BUS", 16), Column("CPU AFFINITY", 12)]
        columns.append(Column("SERVER", None))
        rows: list[list[Text | str]] = []
        for gpu in topo.gpus:
            live = store.gpu(gpu.index)
            gen = live.pcie_gen_current if live else gpu.pcie_gen_current
            lanes = live.pcie_width_current if live else gpu.pcie_width_current
            peak = f"G{gpu.pcie_gen_max or '?'}x{gpu.pcie_width_max or '?'}"
            link = Text(
                f"G{gen or '?'}x{lanes or '?'}/{peak}",
                # The live reading when there is one: a link can retrain after discovery.
                style="yellow" if (live.link_narrowed if live else gpu.link_downtrained) else "",
            )
            row: list[Text | str] = [str(gpu.index)]
            row += [
                Text("●", style="bold cyan") if gpu.numa_node == n.id else Text("·", style="dim")
                for n in topo.numa_nodes
            ]
            row += [
                link,
                format_rate_bytes(live.pcie_rx_bytes_s if live else None),
                format_rate_bytes(live.pcie_tx_bytes_s if live else None),
            ]
            if wide:
                row += [gpu.bus_id or "-", format_index_set(list(gpu.cpu_affinity))]
            row.append(owners.get(gpu.index, "-"))
            rows.append(row)
        title = Text(
            "GPUs by NUMA node (● the GPU's node; link yellow = fewer lanes than max)", style="bold"
        )
        return [title, *_table(columns, rows, width)]

    def _binding_lines(
        self, store: TimeSeriesStore, servers: list[ServerView], width: int
    ) -> list[Text]:
        title = Text(
            "servers: intended binding (plan) vs actual (where their processes may run)",
            style="bold",
        )
        live = [s for s in servers if s.live]
        if not live:
            return [title, Text("no live servers", style="dim")]
        host = store.host()
        actual = {b.server_id: b for b in host.bindings} if host is not None else {}
        rows: list[list[Text | str]] = []
        for server in live:
            if server.external:
                # No plan to compare with: where its schedulers may run, as found.
                rows.append(
                    [
                        server.id,
                        format_index_set(list(server.gpus)),
                        "none (external)",
                        f"node {format_index_set(list(server.numa_nodes))}"
                        if server.numa_nodes
                        else "-",
                        "-",
                        str(len(server.scheduler_pids)),
                        "",
                    ]
                )
                continue
            binding = actual.get(server.id)
            policy = str(server.plan.get("numa_policy") or "")
            intended = f"node {format_index_set(list(server.numa_nodes))}" + (
                f" ({policy})" if policy else ""
            )
            if binding is None:
                rows.append(
                    [
                        server.id,
                        format_index_set(list(server.gpus)),
                        intended,
                        Text("not measured yet", style="dim"),
                        "-",
                        "-",
                        "",
                    ]
                )
                continue
            rows.append(
                [
                    server.id,
                    format_index_set(list(server.gpus)),
                    intended,
                    f"node {format_index_set(list(binding.actual_nodes))}",
                    str(binding.actual_cpus),
                    str(binding.processes),
                    Text("ok", style="green")
                    if binding.matches
                    else Text("MISMATCH", style="bold red"),
                ]
            )
        # Each column as wide as what it holds, so the verdict at the end keeps its room.
        fitted = ("SERVER", "GPUS", "INTENDED", "ACTUAL")
        columns = [
            Column(header, max([len(header), *(len(str(row[index])) for row in rows)]))
            for index, header in enumerate(fitted)
        ]
        columns += [Column("CPUS", 5, "right"), Column("PROCS", 5, "right"), Column("", None)]
        return [title, *_table(columns, rows, width)]
