"""Small dialogs: confirm a destructive action, ask for a line of text, show the keys."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

MODAL_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 80%; max-width: 100; height: auto; max-height: 90%;
    border: thick $primary; background: $surface; padding: 0 1;
}}
{name} .title {{ text-style: bold; margin-bottom: 1; }}
{name} .keys {{ color: $text-muted; margin-top: 1; }}
"""


class ConfirmScreen(ModalScreen[bool]):
    """y / Enter confirms, n / Esc cancels."""

    DEFAULT_CSS = MODAL_CSS.format(name="ConfirmScreen")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "Yes", priority=True),
        Binding("n,escape", "answer(False)", "No", priority=True),
    ]

    def __init__(self, title: str, detail: str) -> None:
        super().__init__()
        self.title_text = title
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical():
            # Plain text: a title or detail naming a run or server (another host's, say)
            # may hold `[`; as markup it would be cut or fail.
            yield Static(self.title_text, classes="title", markup=False)
            yield Static(self.detail, markup=False)
            yield Static("y / Enter: yes    n / Esc: no", classes="keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class PromptScreen(ModalScreen[str | None]):
    """One line of input (a search, a value); Enter accepts, Esc cancels."""

    DEFAULT_CSS = MODAL_CSS.format(name="PromptScreen")
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, value: str = "", placeholder: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.value = value
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, classes="title")
            yield Input(self.value, placeholder=self.placeholder, id="prompt")
            yield Static("Enter: accept    Esc: cancel", classes="keys")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """Every key that applies here: the screen's own, then the global ones."""

    DEFAULT_CSS = MODAL_CSS.format(name="HelpScreen")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close", priority=True),
    ]

    def __init__(self, screen_name: str, rows: list[tuple[str, str]], note: str) -> None:
        super().__init__()
        self.screen_name = screen_name
        self.rows = rows
        self.note = note

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, padding=(0, 2))
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("action")
        for key, description in self.rows:
            table.add_row(key, description)
        with Vertical():
            yield Static(f"Keys — {self.screen_name}", classes="title")
            with VerticalScroll():
                yield Static(table)
            yield Static(Text(self.note, style="dim"), classes="keys")

    def action_close(self) -> None:
        self.dismiss(None)
