"""SVG to PNG for snapshots and screenshots (cairosvg, an optional dependency)."""

from __future__ import annotations

from pathlib import Path

from console.core.errors import ConsoleError


class PngUnavailable(ConsoleError):
    pass


def png_available() -> str | None:
    """None when PNGs can be written; else why not."""
    try:
        import cairosvg  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"PNG output needs cairosvg and the cairo library ({exc})"
    return None


def svg_to_png(svg: str, path: Path) -> None:
    why = png_available()
    if why is not None:
        raise PngUnavailable(why, hint="pip install 'ddconsole[png]', or leave png out of --format")
    import cairosvg

    # cairosvg ignores the SVG's per-run textLength, so the terminal grid needs a local
    # monospace font that has box-drawing and block glyphs.
    text = svg.replace("Fira Code, monospace", "DejaVu Sans Mono, monospace")
    cairosvg.svg2png(bytestring=text.encode(), write_to=str(path))
