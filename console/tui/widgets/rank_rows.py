"""Under the focused server's figures: one line per DP rank of a server with dp > 1.

Each rank's decode tok/s (and its share of the server's), tok/s per running request, running,
queued and acceptance length. A rank that starves (no work while requests queue on its
peers) or lags (decodes each request much slower than the best rank) is marked: under DP
attention its peers wait on it every step, under plain DP its requests take longer.
"""

from __future__ import annotations

from rich.text import Text

from console.telemetry.samples import RankFigures, ServerSample
from console.tui.widgets.pane import Pane

LAG_RATIO = 0.5
"""A rank lags when its tok/s per running request is below this share of the best rank's: a
batch of mixed lengths moves per-request speed by far less, a throttled or starved rank more."""


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else f"{value:{spec}}"


def _idle(rank: RankFigures) -> bool:
    """Nothing running and nothing decoded: the acceptance gauge then holds its last window,
    which says nothing about now."""
    return not rank.running and not rank.decode_tok_s


def _per_request(rank: RankFigures) -> float | None:
    if rank.decode_tok_s is None or not rank.running:
        return None
    return rank.decode_tok_s / rank.running


def rank_marks(ranks: tuple[RankFigures, ...]) -> dict[int, str]:
    """`starves` (idle while requests queue on a peer), `idle` (idle beside busy peers) or
    `lags` per rank that is; the others are absent."""
    marks: dict[int, str] = {}
    busy = [r for r in ranks if (r.running or 0) + (r.queued or 0) > 0]
    queueing = any((r.queued or 0) > 0 for r in ranks)
    if busy and len(busy) < len(ranks):
        for rank in ranks:
            if rank not in busy:
                # Idle beside busy peers happens as a benchmark drains; idle while requests
                # wait elsewhere is the dispatcher passing this rank by.
                marks[rank.rank] = "starves" if queueing else "idle"
    speeds = {r.rank: s for r in ranks if (s := _per_request(r)) is not None}
    if len(speeds) >= 2:
        best = max(speeds.values())
        for number, speed in speeds.items():
            if best > 0 and speed < best * LAG_RATIO:
                marks[number] = "lags"
    return marks


def rank_lines(sample: ServerSample | None, width: int) -> list[Text]:
    """One line per DP rank (none for a server without DP ranks); fields that do not fit
    the width wrap under the rank, never split."""
    if sample is None or not sample.dp_ranks:
        return []
    ranks = sample.dp_ranks
    total = sum(r.decode_tok_s or 0.0 for r in ranks)
    marks = rank_marks(ranks)
    lines: list[Text] = []
    for rank in ranks:
        share = (
            f" ({(rank.decode_tok_s or 0.0) / total:.0%})"
            if total > 0 and rank.decode_tok_s is not None
            else ""
        )
        fields = [
            ("tok/s", _num(rank.decode_tok_s, ".1f") + share),
            ("per req", _num(_per_request(rank), ".1f")),
            ("running", _num(rank.running, ".0f")),
            ("queued", _num(rank.queued, ".0f")),
            ("accept", _num(None if _idle(rank) else rank.accept_length, ".2f")),
        ]
        line = Text.assemble(("  ", ""), (f"dp{rank.rank}", "bold"), "  ")
        mark = marks.get(rank.rank)
        used = line.cell_len
        for index, (label, value) in enumerate(fields):
            piece = Text.assemble((f"{label} ", "dim"), (value, "bold"))
            if index and used + 3 + piece.cell_len > width:
                lines.append(line)
                line = Text("       ")
                used = line.cell_len
            elif index:
                line.append(" · ", style="dim")
                used += 3
            line.append_text(piece)
            used += piece.cell_len
        if mark:
            tag = Text(f"  {mark}", style="dim" if mark == "idle" else "bold yellow")
            if used + tag.cell_len > width:
                lines.append(line)
                line = Text("       ")
            line.append_text(tag)
        lines.append(line)
    return lines


class RankRows(Pane):
    """The focused server's DP ranks; takes no room for a server without them."""

    DEFAULT_CSS = """
    RankRows { display: none; }
    """

    def show(self, sample: ServerSample | None) -> None:
        lines = rank_lines(sample, self.size.width or self.app.size.width)
        self.display = bool(lines)
        if lines:
            self.put_lines(lines)
