"""A run report's text: the level table and the plots, as Markdown (images linked) or as
one self-contained HTML page (SVG inline, CSS in the page, no script, nothing fetched)."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from console.bench.plotdata import (
    PER_GPU,
    PER_USER,
    RunPlots,
    attainment,
    cell_labels,
    goodput,
)
from console.bench.results import RunSummary


@dataclass(frozen=True, slots=True)
class Figure:
    """One plot as the document shows it: its title, its file name, its SVG (for HTML)."""

    title: str
    file: str
    svg: str | None = None


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def level_table(
    summary: RunSummary, plots: RunPlots, gpus: dict[str, int]
) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): a row per cell and level, with the plotted figures; goodput columns
    only when some level has one."""
    labels = cell_labels(summary.cells)
    front = {(p.cell, p.load) for p in (plots.pareto.points if plots.pareto else ()) if p.on_front}
    with_slo = any(goodput(level) is not None for _, level in summary.levels())
    headers = ["CELL", "LOAD", "GPUS", "TOK/S", "TOK/S/GPU", "TOK/S/USER"]
    headers += ["TTFT P50 MS", "TTFT P99 MS", "ITL P50 MS", "ITL P99 MS"]
    if with_slo:
        headers += ["GOODPUT TOK/S", "SLO MET"]
    headers += ["STATUS", "FRONT"]
    rows = []
    for cell, level in summary.levels():
        label = labels[cell.cell_id]
        count = gpus.get(cell.cell_id)
        tok_s = level.output_tok_s
        row = [
            label,
            level.load_label,
            "-" if count is None else str(count),
            _num(tok_s, ".1f"),
            _num(None if tok_s is None or not count else tok_s / count, ".1f"),
            _num(1 / level.itl.p50 if level.itl.p50 else None, ".1f"),
            _ms(level.ttft.p50),
            _ms(level.ttft.p99),
            _ms(level.itl.p50),
            _ms(level.itl.p99),
        ]
        if with_slo:
            met = attainment(level)
            row += [_num(goodput(level), ".1f"), "-" if met is None else f"{met:.0%}"]
        row += [level.status, "*" if (label, level.load_label) in front else ""]
        rows.append(row)
    return headers, rows


DEFINITIONS = (
    f"{PER_GPU}; {PER_USER}. Closed-loop levels are plotted against their concurrency, "
    "open-loop ones against their request rate. TTFT: send to the first chunk carrying a "
    "token. ITL: (last token - first token) / (output tokens - 1), per request. FRONT: on "
    "the Pareto front (no other level is faster both per GPU and per user)."
)


def _heading(summary: RunSummary) -> list[str]:
    facts = [f"{summary.kind or 'run'}, {summary.status}"]
    if summary.host:
        facts.append(f"host {summary.host}")
    if summary.gpu_names:
        facts.append(f"GPUs {summary.gpu_names}")
    if summary.time_scale != 1:
        facts.append(f"simulator time x{summary.time_scale:g}")
    return [f"{summary.name or summary.run_id}", "; ".join(facts)]


def markdown(
    summary: RunSummary, plots: RunPlots, gpus: dict[str, int], figures: Sequence[Figure]
) -> str:
    name, facts = _heading(summary)
    lines = [f"# Run report: {summary.run_id}", "", f"{name} ({facts})", ""]
    if plots.slo:
        lines += [f"SLO: {plots.slo}", ""]
    lines += [f"- {cell}: {knee}" for cell, knee in plots.knees]
    lines += [""] if plots.knees else []
    headers, rows = level_table(summary, plots, gpus)
    lines += ["## Levels", ""]
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("| " + " | ".join("---" for _ in headers) + " |")
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    lines += ["", DEFINITIONS, ""]
    if plots.pareto and plots.pareto.left_out:
        lines += [f"Not on the Pareto plot (GPU count unknown): {', '.join(plots.pareto.left_out)}"]
        lines.append("")
    if figures:
        lines += ["## Plots", ""]
        for figure in figures:
            lines += [f"### {figure.title}", "", f"![{figure.title}]({figure.file})", ""]
    else:
        lines += ["No level measured anything to plot.", ""]
    if summary.findings:
        lines += ["## Findings", ""]
        lines += [f"- **{f.kind}**: {f.message}" for f in summary.findings]
        lines.append("")
    return "\n".join(lines)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.front td { font-weight: bold; }
figure { margin: 1.5em 0; }
figure svg { max-width: 100%; height: auto; }
p.note { color: #555; font-size: 0.85em; }
"""

_XML_HEAD = re.compile(r"^\s*<\?xml[^>]*>\s*(<!DOCTYPE[^>]*>\s*)?", re.DOTALL)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)


def inline_svg(svg: str) -> str:
    """An SVG document as an element of an HTML page: no XML declaration, no DOCTYPE (it
    names a DTD by URL), no RDF metadata (it names vocabularies by URL)."""
    return _METADATA.sub("", _XML_HEAD.sub("", svg)).strip()


def html_page(
    summary: RunSummary, plots: RunPlots, gpus: dict[str, int], figures: Sequence[Figure]
) -> str:
    esc = html.escape
    name, facts = _heading(summary)
    headers, rows = level_table(summary, plots, gpus)
    front_col = headers.index("FRONT")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Run report: {esc(summary.run_id)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Run report: {esc(summary.run_id)}</h1>",
        f"<p>{esc(name)} ({esc(facts)})</p>",
    ]
    if plots.slo:
        parts.append(f"<p>SLO: {esc(plots.slo)}</p>")
    if plots.knees:
        parts.append("<ul>")
        parts += [f"<li>{esc(cell)}: {esc(knee)}</li>" for cell, knee in plots.knees]
        parts.append("</ul>")
    parts += ["<h2>Levels</h2>", "<table><thead><tr>"]
    parts += [f"<th>{esc(h)}</th>" for h in headers]
    parts.append("</tr></thead><tbody>")
    for row in rows:
        klass = ' class="front"' if row[front_col] else ""
        parts.append(f"<tr{klass}>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
    parts += ["</tbody></table>", f'<p class="note">{esc(DEFINITIONS)}</p>']
    if figures:
        parts.append("<h2>Plots</h2>")
        for figure in figures:
            parts.append(f'<figure id="{esc(figure.file)}">')
            parts.append(inline_svg(figure.svg or ""))
            parts.append(f"<figcaption>{esc(figure.title)}</figcaption></figure>")
    else:
        parts.append("<p>No level measured anything to plot.</p>")
    if summary.findings:
        parts.append("<h2>Findings</h2><ul>")
        parts += [f"<li><b>{esc(f.kind)}</b>: {esc(f.message)}</li>" for f in summary.findings]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
