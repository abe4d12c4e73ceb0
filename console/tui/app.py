"""The console application."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.widgets import DataTable, Footer, Header, Static

from console.core.units import format_bytes, format_index_set
from console.topology.model import Topology


class ConsoleApp(App[None]):
    """Shows the host's GPUs by NUMA node; later screens build on this shell."""

    TITLE = "ddconsole"
    BINDINGS: ClassVar = [("q", "quit", "Quit")]
    CSS = """
    #badge { dock: top; height: 1; background: $warning; color: $text; text-style: bold; }
    #status { height: auto; padding: 0 1; }
    """

    def __init__(self, *, demo: bool, topology: Topology) -> None:
        super().__init__()
        self.demo = demo
        self.topology = topology

    def compose(self) -> ComposeResult:
        yield Header()
        if self.demo:
            yield Static(" DEMO  simulated host and servers", id="badge")
        yield Static(self._status_text(), id="status")
        yield DataTable(id="gpus", cursor_type="row")
        yield Footer()

    def _status_text(self) -> str:
        topo = self.topology
        if topo.gpu_status:
            return topo.gpu_status
        return f"{len(topo.gpus)} GPUs, {len(topo.numa_nodes)} NUMA nodes ({topo.source})"

    def on_mount(self) -> None:
        table = self.query_one("#gpus", DataTable)
        table.add_columns("GPU", "NAME", "MEMORY", "NUMA", "CPUS", "PCIE NOW/MAX")
        for gpu in self.topology.gpus:
            table.add_row(
                str(gpu.index),
                gpu.name,
                format_bytes(gpu.memory_total_bytes, 0),
                "-" if gpu.numa_node is None else str(gpu.numa_node),
                format_index_set(list(gpu.cpu_affinity)),
                f"Gen{gpu.pcie_gen_current} x{gpu.pcie_width_current} / "
                f"Gen{gpu.pcie_gen_max} x{gpu.pcie_width_max}",
            )
