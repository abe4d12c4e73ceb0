"""The state of every source (ok/degraded/stale/stalled/unavailable) and the console's cost."""

from __future__ import annotations

from rich.text import Text

from console.core.units import format_bytes
from console.telemetry.samples import SourceState
from console.telemetry.store import TimeSeriesStore
from console.tui.views import FeedNote
from console.tui.widgets.pane import Pane

STATE_STYLES = {
    SourceState.OK: "green",
    SourceState.DEGRADED: "yellow",
    SourceState.STALE: "yellow",
    SourceState.STALLED: "bold red",
    SourceState.UNAVAILABLE: "red",
}


class SourcesBar(Pane):
    def show(self, store: TimeSeriesStore, feed: FeedNote | None = None) -> None:
        """Every source's state; `feed` (where readings come from when not this host,
        e.g. a Prometheus and its targets' health) leads the line."""
        statuses = store.statuses()
        text = Text("sources ", style="bold")
        per_gpu = [s for name, s in statuses.items() if name.index is not None]
        bad_gpus = [s for s in per_gpu if s.state is not SourceState.OK]
        items: list[Text] = []
        for name, status in sorted(statuses.items()):
            if name.index is not None:
                continue
            label = name.name if name.kind == "server" else str(name)
            item = Text(f"{label} ", style="")
            item.append(status.state.value, style=STATE_STYLES.get(status.state, ""))
            if status.state is not SourceState.OK and status.reason:
                item.append(f" ({status.reason})", style="dim")
            items.append(item)
        if per_gpu:
            gpus = Text(f"{len(per_gpu) - len(bad_gpus)}/{len(per_gpu)} GPUs ")
            gpus.append(
                "ok" if not bad_gpus else "degraded",
                style="green" if not bad_gpus else "yellow",
            )
            for status in bad_gpus[:2]:
                gpus.append(f" ({status.name}: {status.reason})", style="dim")
            items.insert(0, gpus)
        if feed is not None:
            items.insert(0, Text(feed.text, style="" if feed.ok else "yellow"))
        for index, item in enumerate(items):
            if index:
                text.append(" · ", style="dim")
            text.append_text(item)
        cost = store.cost()
        if cost is not None:
            text.append("   console ", style="bold")
            cpu = "-" if cost.cpu_pct is None else f"{cost.cpu_pct:.1f}% CPU"
            text.append(f"{cpu} {format_bytes(cost.rss_bytes, 0)}")
        self.put(text)
