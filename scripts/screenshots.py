"""Render every screen of the console from the fixed demo scene to SVG and PNG.

    .venv/bin/python scripts/screenshots.py [OUT_DIR]   (default: screenshots/)

Headless, at 160x50 and 80x24, same seed and clock each time (tests/tui/scene.py). PNGs
need cairosvg (the `png` extra, also in `test`). Clock text is rendered in UTC.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from console.export.png import png_available, svg_to_png

SCREENS = (
    ("dashboard", "d"),
    ("servers", "s"),
    ("bench", "b"),
    ("runs", "r"),
    ("logs", "l"),
    ("topology", "t"),
)
SIZES = ((160, 50), (80, 24))


async def render(out: Path) -> list[Path]:
    from console.tui.app import ConsoleApp
    from tests.tui.conftest import settle
    from tests.tui.scene import backend

    written = []
    for width, height in SIZES:
        for name, _key in SCREENS:
            app = ConsoleApp(backend(), mode=name)
            async with app.run_test(size=(width, height)) as pilot:
                await settle(pilot)
                # The same waits as the snapshot tests (textual's take_svg_screenshot).
                await pilot.pause()
                await pilot.wait_for_scheduled_animations()
                await pilot.pause()
                svg = out / f"{name}-{width}x{height}.svg"
                svg.write_text(app.export_screenshot(title=f"ddconsole {name}"))
                written.append(svg)
    return written


def main() -> None:
    os.environ["TZ"] = "UTC"
    time.tzset()
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    written = asyncio.run(render(out))
    why_not = png_available()
    for svg in written:
        if why_not is None:
            svg_to_png(svg.read_text(), svg.with_suffix(".png"))
        print(svg)
    if why_not is not None:
        print(f"wrote SVG only: {why_not}")


if __name__ == "__main__":
    main()
