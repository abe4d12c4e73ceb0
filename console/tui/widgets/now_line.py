"""The focused server's latest readings in one line, refreshed every tick."""

from __future__ import annotations

from rich.text import Text

from console.bench.acceptance import drop_position, sparkline
from console.bench.listing import Progress
from console.telemetry.quantile import Quantile, format_quantile
from console.telemetry.samples import ServerSample
from console.telemetry.store import TimeSeriesStore
from console.tui.views import LIVE_STATES, ServerView


def _num(value: float | None, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value * scale:{spec}}"


def latency_pair(sample: ServerSample, kind: str) -> str:
    """The server's p50/p99 of `kind` (ttft, itl) in ms, each as its histogram bucket
    supports it (`<100/<100 ms`, `38/42 ms`), marked when they cover the whole uptime."""
    pair = "/".join(
        format_quantile(sample.quantile(f"{kind}_{q}_s"), suffix=False) for q in ("p50", "p99")
    )
    scope = " since start" if sample.latency_scope == "since_start" else ""
    return f"{pair} ms{scope}"


def _exact_pair(p50: float | None, p99: float | None) -> str:
    return (
        "/".join(
            format_quantile(None if v is None else Quantile.exact(v), suffix=False)
            for v in (p50, p99)
        )
        + " ms"
    )


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
        f"TTFT p50/p99 {latency_pair(sample, 'ttft')}{when}",
        style="dim",
    )
    return text


def now_line(
    store: TimeSeriesStore,
    server: ServerView | None,
    width: int = 200,
    now: float | None = None,
    client: Progress | None = None,
) -> Text:
    """One line, or more where the terminal is narrow (fields never split). `now` is the
    instant shown (the backend's), for the age of a stopped server's last figures. `client`:
    a benchmark running against this server, whose exact TTFT/ITL are shown beside the
    server's histogram figures, each labelled by its source."""
    if server is None:
        return Text("")
    sample = store.server(server.id)
    if server.state not in LIVE_STATES:
        return last_line(server, sample if isinstance(sample, ServerSample) else None, now)
    text = Text.assemble(("now ", "bold"), (server.id, "bold cyan"), "  ")
    if not isinstance(sample, ServerSample):
        text.append("no metrics yet", style="dim")
        return text
    bench = client is not None and (client.ttft_p50_s is not None or client.itl_p50_s is not None)
    source = "server " if bench else ""
    fields: list[tuple[str, str]] = [
        ("tok/s", _num(sample.decode_tok_s, ".1f")),
        ("accept", _num(sample.accept_length, ".2f")),
        ("running", _num(sample.running, ".0f")),
        ("queued", _num(sample.queued, ".0f")),
        (f"{source}TTFT p50/p99", latency_pair(sample, "ttft")),
        (f"{source}ITL p50/p99", latency_pair(sample, "itl")),
    ]
    if client is not None and bench:
        fields += [
            ("bench TTFT p50/p99", _exact_pair(client.ttft_p50_s, client.ttft_p99_s)),
            ("bench ITL p50/p99", _exact_pair(client.itl_p50_s, client.itl_p99_s)),
        ]
    if client is not None and client.correct_drafts_histogram:
        # The running benchmark's accepted drafts per verify step, 0 first, and where
        # acceptance drops (the first position fewer than half of the steps reach).
        histogram = client.correct_drafts_histogram
        drop = drop_position(histogram)
        fields.append(
            (
                "bench drafts 0..",
                f"{sparkline(histogram)} drop {'-' if drop is None else drop}",
            )
        )
    fields.append(
        ("KV", _num(None if sample.token_usage is None else sample.token_usage * 100, ".0f") + "%")
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
