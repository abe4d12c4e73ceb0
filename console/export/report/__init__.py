"""`ddconsole runs report`: a run's plots as SVG and PNG files, a Markdown report linking
them and one self-contained HTML page (matplotlib, an optional dependency, imported only
when a report is written)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from console.bench.plotdata import Pareto, run_plots
from console.bench.results import RunSummary
from console.core.errors import ConsoleError, UsageError

FORMATS = ("svg", "png", "md", "html")
INSTALL_HINT = "pip install 'ddconsole[report]' (matplotlib)"


class ReportUnavailable(ConsoleError):
    pass


def report_available() -> str | None:
    """None when reports can be drawn; else why not."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        return f"runs report draws with matplotlib, which is not installed ({exc})"
    return None


def parse_formats(text: str) -> tuple[str, ...]:
    """`svg,md` -> ("svg", "md"); UsageError naming --format for an unknown one."""
    asked = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    unknown = [f for f in asked if f not in FORMATS]
    if unknown or not asked:
        raise UsageError(
            f"--format {text!r}: {'unknown ' + ', '.join(unknown) if unknown else 'empty'}; "
            f"choose from {','.join(FORMATS)}"
        )
    return asked


def write_report(
    summary: RunSummary, gpus: dict[str, int], out: Path, formats: Sequence[str]
) -> list[Path]:
    """Write the report's files into `out` (created); the paths written, in order. Markdown
    links the SVGs (written for it when svg is not asked for, PNGs when only png is)."""
    why = report_available()
    if why is not None:
        raise ReportUnavailable(why, hint=INSTALL_HINT)
    from console.export.report.document import Figure, html_page, markdown
    from console.export.report.figures import figures, overview, png_bytes, svg_text

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"{out}: cannot create the report folder ({exc.strerror or exc})",
            hint="write it elsewhere with --out DIR",
        ) from None
    plots = run_plots(summary, gpus)
    drawn = figures(plots) if not plots.empty else []
    titles = [
        Pareto.title if stem == "pareto" else next(p.title for p in plots.plots if p.key == stem)
        for stem, _ in drawn
    ]
    written: list[Path] = []

    def write(name: str, data: str | bytes) -> None:
        path = out / name
        try:
            if isinstance(data, bytes):
                path.write_bytes(data)
            else:
                path.write_text(data, encoding="utf-8")
        except OSError as exc:
            raise ConsoleError(
                f"cannot write {path}: {exc.strerror or exc}", hint="choose --out DIR"
            ) from None
        written.append(path)

    svgs = {stem: svg_text(figure, salt=stem) for stem, figure in drawn}
    image = "png" if "png" in formats and "svg" not in formats else "svg"
    if "svg" in formats or ("md" in formats and image == "svg"):
        for stem, text in svgs.items():
            write(f"{stem}.svg", text)
    if "png" in formats:
        for stem, figure in drawn:
            write(f"{stem}.png", png_bytes(figure))
        if drawn:
            write("overview.png", png_bytes(overview(plots), dpi=90))
    shown = [
        Figure(title, f"{stem}.{image}", svgs[stem])
        for (stem, _), title in zip(drawn, titles, strict=True)
    ]
    if "md" in formats:
        write("report.md", markdown(summary, plots, gpus, shown))
    if "html" in formats:
        write("report.html", html_page(summary, plots, gpus, shown))
    return written
