"""Pick campaign cells (profile x layout x variant) and the load to put on each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, cast

from rich.segment import Segment
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.widgets import Input, Label, SelectionList, Static
from textual.widgets.option_list import OptionDoesNotExist

from console.profiles.loader import ProfileCatalog


@dataclass(frozen=True)
class CellsChoice:
    cells: tuple[tuple[str, str, str], ...]
    concurrency: tuple[int, ...]
    requests: int


def parse_positive_ints(text: str, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise ValueError(f"{what}: give whole numbers separated by commas, e.g. 1,4,16") from None
    if not values or any(v < 1 for v in values):
        raise ValueError(f"{what}: give at least one number, each 1 or more")
    return values


class TickList(SelectionList[str]):
    """A selection list whose ticks read `[x]` / `[ ]`, not a colour alone."""

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        segments = list(strip)
        try:
            selection = self.get_option_at_index(self.scroll_offset.y + y)
        except OptionDoesNotExist:
            return strip
        if len(segments) < 4:
            return strip
        mark = "[x]" if selection.value in self.selected else "[ ]"
        # The three button cells become the mark, in the button's style (its click target).
        return Strip([Segment(mark, segments[1].style), *segments[3:]])


class CellsScreen(ModalScreen[CellsChoice | None]):
    DEFAULT_CSS = """
    CellsScreen { align: center middle; }
    CellsScreen > Vertical {
        width: 90%; max-width: 120; height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    CellsScreen SelectionList { height: 1fr; }
    CellsScreen #load { height: 3; }
    CellsScreen #load Input { width: 1fr; }
    CellsScreen #load Label { padding: 1 1 0 1; }
    CellsScreen .title { text-style: bold; }
    CellsScreen .keys { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "accept", "Start", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, catalog: ProfileCatalog) -> None:
        super().__init__()
        self.catalog = catalog
        """The profiles whose layouts and variants make the cells offered."""

    def compose(self) -> ComposeResult:
        catalog = self.catalog
        cells: list[tuple[str, str]] = []
        for name in catalog.names():
            try:
                profile = catalog.get(name).profile
            except Exception:  # a broken user profile is listed by `profiles check`
                continue
            for layout in profile.layouts:
                for variant in profile.variants:
                    cells.append((f"{name}  {layout}  {variant}", f"{name}|{layout}|{variant}"))
        with Vertical():
            yield Static(
                "Campaign from chosen cells (each cell: launch, load, stop)", classes="title"
            )
            yield TickList(*cells, id="cells")
            with Horizontal(id="load"):
                yield Label("concurrency")
                yield Input("1,4", id="concurrency")
                yield Label("requests/level")
                yield Input("16", id="requests")
            yield Static(
                "Space toggle  Tab next field  Ctrl+S review and start  Esc cancel", classes="keys"
            )

    def action_accept(self) -> None:
        selected = self.query_one("#cells", SelectionList).selected
        if not selected:
            self.notify("choose at least one cell (Space)", severity="warning")
            return
        try:
            concurrency = parse_positive_ints(
                self.query_one("#concurrency", Input).value, "concurrency"
            )
            requests = parse_positive_ints(self.query_one("#requests", Input).value, "requests")
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        cells = tuple(
            cast("tuple[str, str, str]", tuple(str(value).split("|"))) for value in selected
        )
        self.dismiss(CellsChoice(cells, concurrency, requests[0]))

    def action_cancel(self) -> None:
        self.dismiss(None)
