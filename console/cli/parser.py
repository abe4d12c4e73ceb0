"""The argparse tree of `ddconsole`; each verb's module adds its own subparser."""

from __future__ import annotations

import argparse

from console import __version__


def common_parent() -> argparse.ArgumentParser:
    """Flags every verb accepts after its name too (`ddconsole plan ... --demo`)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--demo",
        action="store_true",
        default=argparse.SUPPRESS,
        help="use the built-in simulator and a simulated 8-GPU host (no GPU needed)",
    )
    return parent


def build_parser() -> argparse.ArgumentParser:
    from console.cli import (
        cmd_bench,
        cmd_campaign,
        cmd_diagnose,
        cmd_metrics,
        cmd_plan,
        cmd_profiles,
        cmd_runs,
        cmd_servers,
        cmd_sim,
        cmd_snapshot,
        runner,
    )

    parser = argparse.ArgumentParser(
        prog="ddconsole",
        description=(
            "Launch, watch and benchmark SGLang servers on multi-GPU hosts. "
            "Without a command, opens the console (TUI)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"ddconsole {__version__}")
    parser.add_argument(
        "--demo",
        action="store_true",
        default=False,
        help="use the built-in simulator and a simulated 8-GPU host (no GPU needed)",
    )
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="the console does not keep a flight recording of this session",
    )
    parser.add_argument(
        "--record-max-mb",
        type=int,
        default=256,
        metavar="MB",
        help="size limit of the recordings folder; the oldest go first (default 256)",
    )
    common = common_parent()
    verbs = parser.add_subparsers(title="commands", metavar="COMMAND")
    cmd_profiles.register(verbs, common)
    cmd_plan.register(verbs, common)
    cmd_servers.register(verbs, common)
    cmd_diagnose.register(verbs, common)
    cmd_metrics.register(verbs, common)
    cmd_bench.register(verbs, common)
    cmd_campaign.register(verbs, common)
    cmd_runs.register(verbs, common)
    cmd_snapshot.register(verbs, common)
    cmd_sim.register(verbs, common)
    runner.register(verbs, common)
    return parser
