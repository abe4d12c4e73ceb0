"""`ddconsole` with no command: open the TUI (Textual is imported only here)."""

from __future__ import annotations

import argparse
import sys

from console.core.errors import UsageError
from console.core.settings import load_settings


def run_tui(args: argparse.Namespace) -> int:
    prometheus = prometheus_url(args)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        from console.core.via_host import ddconsole_command

        raise UsageError(
            "the console needs a terminal; without one use a headless verb (see "
            f"`{ddconsole_command()} --help`)"
        )
    from console.cli.services import Services
    from console.tui.app import ConsoleApp

    services = Services.create(demo=bool(args.demo), prometheus=prometheus)
    backend = services.live_backend(
        recordings=None if args.no_record else services.state.ensure().recordings,
        record_max_bytes=max(1, args.record_max_mb) * 1024 * 1024,
    )
    reason = read_only_reason(args)
    if reason is not None:
        backend.make_read_only(reason)
    app = ConsoleApp(backend, warm_up=True)
    app.run()
    return app.return_code or 0


def prometheus_url(args: argparse.Namespace) -> str | None:
    """The `--prometheus URL` the console reads through, None for this host; a URL that is
    not http(s) is a UsageError naming the flag."""
    url = getattr(args, "prometheus", None)
    if url is None:
        return None
    url = str(url)
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--prometheus {url}: give a full URL such as http://127.0.0.1:9090")
    return url


def read_only_reason(args: argparse.Namespace) -> str | None:
    """Why this console is read-only (`--read-only`, or `read_only = true` in config.toml);
    None when it may act. A damaged config.toml is a UsageError naming the file and key."""
    from console.tui.read_only import read_only_reason as reason

    flag = bool(getattr(args, "read_only", False))
    settings = load_settings()
    if not (flag or settings.read_only):
        return None
    return reason(flag=flag, config=settings.path, demo=bool(args.demo))
