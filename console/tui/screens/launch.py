"""The launch flow: profile -> layout -> variant, with the plan previewed before anything runs.

Enter launches the highlighted combination (defaults: the first profile's first layout and
`off`, so a server is `n` + Enter away); Tab/arrows move between the three lists. The plan
and the SGLang flag check are computed on worker threads.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from console.topology.placement import Plan
from console.tui.backend import ActionRefused, Backend
from console.tui.from_thread import call_live

PREFERRED_PROFILE = "qwen3.6-27b"


@dataclass(frozen=True)
class LaunchChoice:
    plan: Plan


def plan_view(plan: Plan, flag_check: str | None) -> Group:
    rows = Table(box=None, show_header=False, padding=(0, 1), expand=True)
    rows.add_column("k", style="bold", no_wrap=True, width=9)
    rows.add_column("v", overflow="fold")
    binding = ", ".join(
        f"GPU {gpu}→node {'?' if node is None else node}" for gpu, node in plan.numa_binding.items()
    )
    rows.add_row("model", f"{plan.model} [{plan.architecture}] as {plan.served_name}")
    rows.add_row("decoding", plan.algorithm if plan.algorithm != "off" else "autoregressive")
    rows.add_row("gpus", f"{','.join(map(str, plan.gpus))} (tp {plan.tp}, dp {plan.dp})")
    rows.add_row("numa", f"{plan.numa_policy}: {binding}")
    rows.add_row("listen", f"{plan.host}:{plan.port}")
    rows.add_row("env", " ".join(f"{k}={v}" for k, v in sorted(plan.shown_env.items())) or "-")
    rows.add_row("argv", shlex.join(plan.shown_argv))
    if plan.requires:
        rows.add_row("needs", Text(plan.requires, style="yellow"))
    for warning in plan.warnings:
        rows.add_row("warning", Text(warning.message, style="bold yellow"))
    check = Text(
        flag_check or "checking flags against the installed SGLang…",
        style="dim" if flag_check is None else "",
    )
    rows.add_row("flags", check)
    return Group(rows)


class LaunchScreen(ModalScreen[LaunchChoice | None]):
    DEFAULT_CSS = """
    LaunchScreen { align: center middle; }
    LaunchScreen > Vertical {
        width: 96%; max-width: 160; height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    LaunchScreen #pickers { height: 9; }
    LaunchScreen OptionList { width: 1fr; height: 100%; }
    LaunchScreen #preview { height: 1fr; border-top: solid $primary-darken-2; }
    LaunchScreen .title { text-style: bold; }
    LaunchScreen .keys { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "accept", "Launch", priority=True),
        Binding("escape", "cancel", "Cancel"),
        Binding("left", "move(-1)", "Previous list", show=False),
        Binding("right", "move(1)", "Next list", show=False),
    ]

    def __init__(
        self, backend: Backend, *, title: str = "Launch a server", replacing: str | None = None
    ) -> None:
        super().__init__()
        self.backend = backend
        self.title_text = title
        self.replacing = replacing
        self.plan: Plan | None = None
        self.error: str | None = None
        self.flag_result: str | None = None

    def compose(self) -> ComposeResult:
        catalog = self.backend.catalog
        names = catalog.names()
        with Vertical():
            yield Static(self.title_text, classes="title")
            with Horizontal(id="pickers"):
                yield OptionList(*[Option(n, id=n) for n in names], id="profile")
                yield OptionList(id="layout")
                yield OptionList(id="variant")
            with VerticalScroll(id="preview"):
                yield Static("", id="plan")
            yield Static("↑↓ choose  ←→/Tab next list  Enter launch  Esc cancel", classes="keys")

    def on_mount(self) -> None:
        profiles = self.query_one("#profile", OptionList)
        names = self.backend.catalog.names()
        if names:
            profiles.highlighted = (
                names.index(PREFERRED_PROFILE) if PREFERRED_PROFILE in names else 0
            )
        profiles.focus()
        self._fill_profile()

    def _highlighted(self, list_id: str) -> str | None:
        widget = self.query_one(f"#{list_id}", OptionList)
        if widget.highlighted is None or widget.option_count == 0:
            return None
        return widget.get_option_at_index(widget.highlighted).id

    def _fill_profile(self) -> None:
        name = self._highlighted("profile")
        layouts = self.query_one("#layout", OptionList)
        variants = self.query_one("#variant", OptionList)
        layouts.clear_options()
        variants.clear_options()
        if name is None:
            return
        try:
            profile = self.backend.catalog.get(name).profile
        except Exception as exc:  # a bad user profile: say so, keep the dialog usable
            self._show_error(getattr(exc, "message", str(exc)))
            return
        layouts.add_options(
            [
                Option(f"{k}  TP {v.tp}, GPUs {','.join(map(str, v.gpus))}", id=k)
                for k, v in profile.layouts.items()
            ]
        )
        variants.add_options(
            [
                Option(k if v.algorithm == "off" else f"{k}  {v.algorithm.value}", id=k)
                for k, v in profile.variants.items()
            ]
        )
        layouts.highlighted = 0 if layouts.option_count else None
        off = list(profile.variants).index("off") if "off" in profile.variants else 0
        variants.highlighted = off if variants.option_count else None
        self._replan()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "profile":
            self._fill_profile()
        else:
            self._replan()

    def _replan(self) -> None:
        profile = self._highlighted("profile")
        layout = self._highlighted("layout")
        variant = self._highlighted("variant")
        if profile and layout and variant:
            self.plan = None
            self.query_one("#plan", Static).update(Text("planning…", style="dim"))
            self._make_plan(profile, layout, variant)

    @work(thread=True, exclusive=True, group="plan")
    def _make_plan(self, profile: str, layout: str, variant: str) -> None:
        try:
            plan = self.backend.plan(profile, layout, variant, replacing=self.replacing)
        except ActionRefused as exc:
            call_live(self, self._show_error, exc.message)
            return
        if get_current_worker().is_cancelled:
            return
        call_live(self, self._show_plan, plan, None)
        check = self.backend.flag_check(plan)
        if not get_current_worker().is_cancelled:
            call_live(self, self._show_plan, plan, check)

    def _show_plan(self, plan: Plan, check: str | None) -> None:
        self.plan = plan
        self.error = None
        self.flag_result = check
        self.query_one("#plan", Static).update(plan_view(plan, check))

    def _show_error(self, message: str) -> None:
        self.plan = None
        self.error = message
        self.query_one("#plan", Static).update(Text(message, style="bold red"))

    def action_move(self, step: int) -> None:
        lists = list(self.query(OptionList))
        focused = self.focused
        index = lists.index(focused) if focused in lists else 0
        lists[(index + step) % len(lists)].focus()

    def action_accept(self) -> None:
        if self.plan is None:
            self.notify(self.error or "the plan is not ready yet", severity="warning")
            return
        self.dismiss(LaunchChoice(self.plan))

    def action_cancel(self) -> None:
        self.dismiss(None)
