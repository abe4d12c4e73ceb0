"""`ddconsole sim ARGS...`: run the SGLang-compatible simulator in the foreground."""

from __future__ import annotations

import argparse
from typing import Any


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "sim",
        help="run the SGLang-compatible simulator (takes SGLang's launch arguments)",
        description="Runs the simulator the demo mode launches: SGLang launch arguments plus "
        "--sim-speed FACTOR, --sim-seed N and --sim-fault KIND[:ARG][,...] "
        "(slow-start, crash-at-load:{oom,kv-oom,hybrid-oom,nccl,import,notfound,gated,version,"
        "dp-port,badflag}, crash-mid-stream[:N], runtime-oom[:TOKENS], prefill-oom, hang[:S], "
        "bad-metrics, metrics-nan, metrics-reset[:S], metrics-500, http-500[:RATE], orphans, "
        "misbind, hold-capture:PATH, dp-starve:RANK, dp-slow:RANK[:FACTOR]). "
        "`ddconsole sim --help` prints SGLang's own options.",
        add_help=False,
        # No option of its own: every argument, `--model-path` and `--help` included, is
        # the simulator's (with "-" as a prefix, argparse stops REMAINDER at the first
        # option-like argument: "unrecognized arguments: --model-path").
        prefix_chars="\x00",
    )
    parser.add_argument(
        "sim_args",
        nargs=argparse.REMAINDER,
        metavar="ARGS",
        help="SGLang's launch arguments and the simulator's --sim-* flags",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from console.sim.server import main

    sim_args = list(args.sim_args)
    if sim_args[:1] == ["--"]:
        sim_args = sim_args[1:]  # `ddconsole sim -- ARGS`, the form older READMEs gave
    return main(sim_args)
