"""The focused server's latest readings in one line, refreshed every tick."""

from __future__ import annotations

from rich.text import Text

from console.telemetry.samples import ServerSample
from console.telemetry.store import TimeSeriesStore
from console.tui.views import LIVE_STATES, ServerView


def _num(value: float | None, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value * scale:{spec}}"


def last_line(server: ServerView, sample: ServerSample | None, now: float | None) -> Text:
    """A stopped or failed server: no live figures; its last ones, dim, marked `last`, with
    how long before the instant shown they were read."""
    text = Text.assemble(
        (f"{server.state} ", "bold red" if server.state == "failed" else "bold"),
        (server.id, "bold cyan"),
        "  ",
    )
    if sample is None:
        text.append("no live figures (none were read before it stopped)", style="dim")
        return text
    when = "" if now is None else f" read {max(0.0, now - sample.t_mono):.0f} s before now"
    text.append(
        f"no live figures · last {_num(sample.decode_tok_s, '.1f')} tok/s, "
        f"running {_num(sample.running, '.0f')}, queued {_num(sample.queued, '.0f')}, "
        f"TTFT p50 {_num(sample.ttft_p50_s, '.0f', 1000)} ms{when}",
        style="dim",
    )
    return text


def now_line(
    store: TimeSeriesStore, server: ServerView | None, width: int = 200, now: float | None = None
) -> Text:
    """One line, or more where the terminal is narrow (fields never split). `now` is the
    instant shown (the backend's), for the age of a stopped server's last figures."""
    if server is None:
        return Text("")
    sample = store.server(server.id)
    if server.state not in LIVE_STATES:
        return last_line(server, sample if isinstance(sample, ServerSample) else None, now)
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
