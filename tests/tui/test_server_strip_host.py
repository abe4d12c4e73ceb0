"""The Dashboard's server strip on another host with no servers: it names the command that
launches one there, not this console's `n` (which launches here)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from console.tui.widgets.server_strip import ServerStrip


class StripApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ServerStrip(id="strip")


async def test_no_servers_on_another_host_names_the_command_there() -> None:
    app = StripApp()
    async with app.run_test(size=(100, 10)) as pilot:
        strip = app.query_one(ServerStrip)
        strip.show([], None, host="alpha")
        await pilot.pause()
        assert (
            strip.text.plain
            == "no servers on alpha  ddconsole --host alpha up PROFILE launches one there"
        )
        strip.show([], None)
        await pilot.pause()
        assert strip.text.plain == "no servers  s servers, then n to launch one"
