"""GPUs grouped by NUMA node, with the node's CPU load and which server holds each GPU.

Columns drop, right-most optional ones first, as the terminal narrows, so nothing is cut
mid-word at 80 columns.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text

from console.core.units import format_index_set, format_rate_bytes
from console.telemetry.keys import SourceId
from console.telemetry.samples import GpuSample, SourceState, SourceStatus
from console.telemetry.store import TimeSeriesStore
from console.topology.model import Topology
from console.tui.views import ServerView
from console.tui.widgets.columns import Column, RowCache, header_row, layout
from console.tui.widgets.finder import Finder, FindRow, SortValue, sort_value
from console.tui.widgets.pane import Pane

COLUMNS = (
    Column("GPU", 3, "right"),
    Column("UTIL", 4, "right"),
    Column("MEM", 9, "right"),
    Column("PWR", 5, "right"),
    Column("TEMP", 4, "right"),
    Column("RX", 10, "right"),
    Column("TX", 10, "right"),
    Column("SM MHz", 6, "right", 100),
    Column("LINK now/max", 12, "right", 120),
    Column("SERVER", None),
    Column("NAME", None, "left", 160),
)
SORT_COLUMNS = ("GPU", "UTIL", "MEM", "PWR", "TEMP", "RX", "TX", "SERVER")
"""What `o` cycles through on the dashboard (GPUs sort within their NUMA node)."""


def _pct(value: float | None) -> Text:
    if value is None:
        return Text("-", style="dim")
    style = "bold red" if value >= 95 else "yellow" if value >= 60 else ""
    return Text(f"{value:.0f}%", style=style)


def _mem(sample: GpuSample) -> str:
    if sample.mem_used_bytes is None or sample.mem_total_bytes is None:
        return "-"
    return f"{sample.mem_used_bytes / 2**30:.0f}/{sample.mem_total_bytes / 2**30:.0f}G"


def _link(sample: GpuSample) -> Text:
    now = f"G{sample.pcie_gen_current or '?'}x{sample.pcie_width_current or '?'}"
    peak = f"G{sample.pcie_gen_max or '?'}x{sample.pcie_width_max or '?'}"
    return Text(f"{now}/{peak}", style="yellow" if sample.link_narrowed else "")


def _marked(column: Column, finder: Finder) -> Column:
    """The column headed with its sort mark, one cell wider when the mark needs it."""
    label = finder.header(column.header)
    if label == column.header:
        return column
    width = None if column.width is None else max(column.width, len(label))
    return Column(label, width, column.justify, column.min_terminal)


def _order(sample: GpuSample | None, index: int) -> dict[str, SortValue]:
    """Sort values of a GPU's row (numbers, not their formatted text)."""
    if sample is None:
        return {"GPU": sort_value(index)}
    return {
        "GPU": sort_value(index),
        "UTIL": sort_value(sample.util_pct),
        "MEM": sort_value(sample.mem_used_bytes),
        "PWR": sort_value(sample.power_w),
        "TEMP": sort_value(sample.temp_c),
        "RX": sort_value(sample.pcie_rx_bytes_s),
        "TX": sort_value(sample.pcie_tx_bytes_s),
    }


def gpu_indices(store: TimeSeriesStore, topology: Topology) -> list[int]:
    """This host's GPUs and any other the store has readings or states of (GPUs read
    through Prometheus: they have no NUMA node here)."""
    indices = {gpu.index for gpu in topology.gpus}
    for name in store.statuses():
        if name.index is not None:
            indices.add(name.index)
    return sorted(indices)


class GpuTable(Pane):
    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._rows = RowCache()
        self._header: tuple[object, Text] | None = None
        self._cpu_sets: dict[tuple[int, ...], str] = {}

    def show(
        self,
        store: TimeSeriesStore,
        topology: Topology,
        servers: list[ServerView],
        finder: Finder | None = None,
    ) -> tuple[int, int]:
        """Draw the table; returns (GPUs shown, GPUs in all) under the finder's filter."""
        finder = finder or Finder()
        width = self.size.width or 80
        base = [c for c in COLUMNS if width >= c.min_terminal]
        columns = [_marked(c, finder) for c in base]
        widths = layout(columns, width)
        owners = {gpu: s.id for s in servers if s.live for gpu in s.gpus}
        host = store.host()
        node_cpu = {n.node: n.cpu_pct for n in host.numa} if host is not None else {}
        statuses = store.statuses()
        by_node: dict[int | None, list[int]] = {}
        local = {gpu.index: gpu.numa_node for gpu in topology.gpus}
        every = gpu_indices(store, topology)
        for index in every:
            by_node.setdefault(local.get(index), []).append(index)
        nodes = {n.id: n for n in topology.numa_nodes}
        header_key = (tuple(widths), tuple(c.header for c in columns))
        if self._header is None or self._header[0] != header_key:
            self._header = (header_key, header_row(columns, widths))
        lines = [self._header[1]]
        shown = 0
        for node, indices in sorted(
            by_node.items(), key=lambda item: (item[0] is None, item[0] or 0)
        ):
            rows = [
                FindRow(
                    str(index),
                    dict(
                        zip(
                            (c.header for c in base),
                            self._cells(store, statuses, index, owners, base),
                            strict=True,
                        )
                    ),
                    _order(store.gpu(index), index),
                )
                for index in indices
            ]
            rows = finder.apply(rows)
            if not rows:
                continue
            label = "no NUMA node" if node is None else f"NUMA {node}"
            if node in nodes:
                label += f"  cpus {self._cpu_set(nodes[node].cpus)}"
            cpu = node_cpu.get(node) if node is not None else None
            label += f"  CPU {cpu:.0f}%" if cpu is not None else "  CPU -"
            lines.append(Text(label, style="bold cyan"))
            for row in rows:
                lines.append(self._rows.row(list(row.cells.values()), columns, widths))
            shown += len(rows)
        if not every:
            lines.append(Text(topology.gpu_status or "no GPUs", style="yellow"))
        elif not shown:
            lines.append(Text(f"no GPU matches /{finder.text}/ (esc clears)", style="yellow"))
        self.put_lines(lines)
        return shown, len(every)

    def _cpu_set(self, cpus: tuple[int, ...]) -> str:
        if cpus not in self._cpu_sets:
            self._cpu_sets[cpus] = format_index_set(list(cpus))
        return self._cpu_sets[cpus]

    def _cells(
        self,
        store: TimeSeriesStore,
        statuses: Mapping[SourceId, SourceStatus],
        index: int,
        owners: dict[int, str],
        columns: list[Column],
    ) -> list[Text | str]:
        sample = store.gpu(index)
        status = statuses.get(SourceId.gpu(index))
        if sample is None:
            reason = (status.reason if status is not None else None) or "no reading"
            blank: list[Text | str] = [""] * (len(columns) - 2)
            return [str(index), Text(reason, style="dim"), *blank]
        stale = status is not None and status.state is not SourceState.OK
        values: dict[str, Text | str] = {
            "GPU": str(index) + ("!" if stale else ""),
            "UTIL": _pct(sample.util_pct),
            "MEM": _mem(sample),
            "PWR": "-" if sample.power_w is None else f"{sample.power_w:.0f}W",
            "TEMP": "-" if sample.temp_c is None else f"{sample.temp_c:.0f}C",
            "RX": format_rate_bytes(sample.pcie_rx_bytes_s),
            "TX": format_rate_bytes(sample.pcie_tx_bytes_s),
            "SM MHz": "-" if sample.sm_clock_mhz is None else f"{sample.sm_clock_mhz:.0f}",
            "LINK now/max": _link(sample),
            "SERVER": Text(owners.get(index, "-"), style="" if index in owners else "dim"),
            "NAME": sample.name or "-",
        }
        cells = [values[c.header] for c in columns]
        if stale:
            cells = [Text(c, style="dim") if isinstance(c, str) else c for c in cells]
        return cells
