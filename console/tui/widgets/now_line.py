"""The focused server's latest readings in one line, refreshed every tick."""

from __future__ import annotations

from rich.text import Text

from console.telemetry.samples import ServerSample
from console.telemetry.store import TimeSeriesStore
from console.tui.views import ServerView


def _num(value: float | None, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value * scale:{spec}}"


def now_line(store: TimeSeriesStore, server: ServerView | None, width: int = 200) -> Text:
    """One line, or more where the terminal is narrow (fields never split)."""
    if server is None:
        return Text("")
    sample = store.server(server.id)
    text = Text.assemble(("now ", "bold"), (server.id, "bold cyan"), "  ")
    if not isinstance(sample, ServerSample):
        text.append("no metrics yet", style="dim")
        return text
    fields = (
        ("tok/s", _num(sample.decode_tok_s, ".1f")),
        ("accept", _num(sample.accept_length, ".2f")),
        ("running", _num(sample.running, ".0f")),
        ("queued", _num(sample.queued, ".0f")),
        (
            "TTFT p50/p99",
            f"{_num(sample.ttft_p50_s, '.0f', 1000)}/{_num(sample.ttft_p99_s, '.0f', 1000)} ms",
        ),
        (
            "ITL p50/p99",
            f"{_num(sample.itl_p50_s, '.1f', 1000)}/{_num(sample.itl_p99_s, '.1f', 1000)} ms",
        ),
        ("KV", _num(None if sample.token_usage is None else sample.token_usage * 100, ".0f") + "%"),
    )
    line_len = text.cell_len
    for index, (label, value) in enumerate(fields):
        piece = Text.assemble((f"{label} ", "dim"), (value, "bold"))
        if index and line_len + 3 + piece.cell_len > width:
            text.append("\n    ")
            line_len = 4
        elif index:
            text.append(" · ", style="dim")
            line_len += 3
        text.append_text(piece)
        line_len += piece.cell_len
    return text
