"""The flags `bench` and `campaign` share for judging levels: SLO, attainment, transients,
and the saturation search."""

from __future__ import annotations

import argparse

from console.cli import argtypes


def add_slo_flags(parser: argparse.ArgumentParser, *, campaign: bool = False) -> None:
    where = " (overrides the file's `slo`)" if campaign else ""
    parser.add_argument(
        "--slo",
        default=None,
        metavar="TARGETS",
        help="latency targets a request must meet, e.g. ttft=200ms,itl=40ms,e2e=20s: each"
        " level then shows the share that met them and goodput (default: the profile's"
        f" [bench] slo){where}",
    )
    parser.add_argument(
        "--attainment",
        type=argtypes.bounded_float(0.0, 1.0, low_open=True),
        default=None,
        metavar="SHARE",
        help="the share of a level's requests that must meet the SLO for it to pass (default 0.95)",
    )
    parser.add_argument(
        "--include-transients",
        action="store_true",
        default=None,
        help="count every request; by default a closed-loop level's statistics exclude its"
        " ramp-up and drain",
    )
    parser.add_argument(
        "--find-max",
        choices=("concurrency", "rate"),
        default=None,
        help="search for the highest concurrency (or rate) meeting the SLO: bracketing,"
        " then bisecting; needs --slo",
    )
    parser.add_argument(
        "--find-max-limit",
        type=argtypes.bounded_float(0.0, 1e6, low_open=True),
        default=None,
        metavar="LOAD",
        help="the highest load the search tries (default: the search's own)",
    )
