"""One line per server: what runs where, its state, port, uptime and why it failed."""

from __future__ import annotations

from rich.text import Text

from console.core.units import format_duration, format_index_set
from console.tui.views import ServerView
from console.tui.widgets.columns import Column, layout, render_row
from console.tui.widgets.pane import Pane

STATE_STYLES = {
    "ready": "bold green",
    "starting": "yellow",
    "loading": "yellow",
    "warming": "yellow",
    "unresponsive": "bold red",
    "stopping": "magenta",
    "stopped": "dim",
    "failed": "bold red",
}
COLUMNS = (
    Column("", 1),
    Column("ID", 20),
    Column("PLAN", 28),
    Column("STATE", 24),
    Column("PORT", 6),
    Column("GPUS", 7, "left", 110),
    Column("UP", 7, "right"),
    Column("REASON", None),
)


def state_word(server: ServerView) -> Text:
    return Text(server.state, style=STATE_STYLES.get(server.state, ""))


def state_text(server: ServerView) -> Text:
    label = server.state
    if server.state in ("starting", "loading", "warming") and server.phase:
        label = f"{server.state}: {server.phase}"
    return Text(label, style=STATE_STYLES.get(server.state, ""))


class ServerStrip(Pane):
    def show(
        self,
        servers: list[ServerView],
        focused: str | None,
        note: str | None = None,
        host: str | None = None,
    ) -> None:
        """One line per server; `note` (the stopped servers folded away) under them. `host`:
        the other host these servers run on (a launch there is not this console's `n`)."""
        if not servers and note:
            self.put(Text(note, style="dim"))
            return
        if not servers and host is not None:
            self.put(
                Text.assemble(
                    (f"no servers on {host}  ", "dim"),
                    (f"ddconsole --host {host} up PROFILE", "bold"),
                    (" launches one there", "dim"),
                )
            )
            return
        if not servers:
            self.put(
                Text.assemble(
                    ("no servers  ", "dim"),
                    ("s", "bold"),
                    (" servers, then ", "dim"),
                    ("n", "bold"),
                    (" to launch one", "dim"),
                )
            )
            return
        width = self.size.width or 80
        id_width = min(24, max(len(s.id) for s in servers))
        columns = [c for c in COLUMNS if width >= c.min_terminal]
        columns = [Column("ID", id_width) if c.header == "ID" else c for c in columns]
        if width < 100:
            # Narrow: the id already names profile and layout; the variant is what is left.
            variant_width = max(len(s.variant) for s in servers)
            columns = [
                Column("VARIANT", variant_width)
                if c.header == "PLAN"
                else Column("STATE", 12)
                if c.header == "STATE"
                else c
                for c in columns
            ]
        widths = layout(columns, width)
        lines = []
        for server in servers:
            values: dict[str, Text | str] = {
                "": Text("▶", style="bold") if server.id == focused else " ",
                "ID": Text(server.id, style="bold" if server.id == focused else ""),
                "PLAN": server.label,
                "VARIANT": server.variant,
                "STATE": state_text(server),
                "PORT": f":{server.port}" if server.port else "-",
                "GPUS": format_index_set(list(server.gpus)),
                "UP": format_duration(server.uptime_s),
                "REASON": Text(
                    server.reason or "", style="red" if server.state == "failed" else ""
                ),
            }
            lines.append(render_row([values[c.header] for c in columns], columns, widths))
        if note:
            lines.append(Text(note, style="dim"))
        self.put_lines(lines)
