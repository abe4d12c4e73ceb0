"""`ddconsole bench`: benchmark one running server over levels of streamed requests."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from console.bench.demo_defaults import DEMO_INPUT_LEN, DEMO_OUTPUT_LEN, DEMO_REQUESTS
from console.cli import argtypes
from console.cli import run_common as rc
from console.cli.slo_flags import add_slo_flags

DEFAULT_INPUT_LEN = 512
DEFAULT_OUTPUT_LEN = 256
# With --demo, a benchmark given no counts or lengths runs the demo load the TUI's `g`
# runs too (console/bench/demo_defaults.py): about 40 s at concurrency 1 against the
# demo's slowest server.


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    bench = verbs.add_parser(
        "bench", parents=[common], help="benchmark a running server: levels of streamed requests"
    )
    target = bench.add_mutually_exclusive_group(required=True)
    target.add_argument("--server", metavar="ID", help="a managed server (see `ddconsole ps`)")
    target.add_argument("--url", metavar="URL", help="any SGLang server")
    bench.add_argument(
        "--concurrency",
        type=rc.int_list,
        default=None,
        metavar="1,4,16",
        help="closed-loop concurrency levels (default 1)",
    )
    bench.add_argument(
        "--rate",
        type=argtypes.positive_float_list,
        default=None,
        metavar="R[,R...]",
        help="open-loop Poisson request rates per second instead",
    )
    bench.add_argument(
        "--requests",
        type=argtypes.requests,
        default=None,
        metavar="N",
        help=f"requests per level (default 16, {DEMO_REQUESTS} with --demo, unless --duration)",
    )
    bench.add_argument(
        "--duration",
        type=argtypes.duration_s,
        default=None,
        metavar="S",
        help="seconds per level instead of a request count",
    )
    _workload_flags(bench)
    add_slo_flags(bench)
    bench.add_argument("--name", default=None, help="a name for the run")
    bench.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="results folder (default: the state dir's runs/)",
    )
    bench.add_argument("--json", action="store_true", help="print the run summary as JSON")
    bench.add_argument(
        "--detach",
        action="store_true",
        help="run in the background; follow with `ddconsole runs show RUN --follow`",
    )
    bench.set_defaults(handler=_bench)


def _workload_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-len",
        type=argtypes.token_count,
        default=None,
        metavar="N",
        help=f"prompt length in tokens (default {DEFAULT_INPUT_LEN}, {DEMO_INPUT_LEN} with --demo)",
    )
    parser.add_argument(
        "--output-len",
        type=argtypes.token_count,
        default=None,
        metavar="N",
        help=f"output tokens per request (default {DEFAULT_OUTPUT_LEN}, {DEMO_OUTPUT_LEN} with"
        " --demo)",
    )
    parser.add_argument(
        "--range-ratio",
        type=float,
        default=1.0,
        metavar="R",
        help="draw lengths from [len*R, len]; 1.0 is fixed (default)",
    )
    parser.add_argument(
        "--endpoint",
        choices=("generate", "chat", "completions"),
        default="generate",
        help="SGLang API to load: native /generate (default) or the OpenAI ones; chat takes"
        " text prompts only (--dataset, --workload chat-prompts), the others token ids too",
    )
    parser.add_argument(
        "--warmup",
        type=argtypes.warmup,
        default=1,
        metavar="N",
        help="uncounted requests before each level (default 1)",
    )
    parser.add_argument(
        "--flush-cache", action="store_true", help="POST /flush_cache before each level"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--dataset",
        type=Path,
        default=None,
        metavar="FILE",
        help='prompts from JSONL ({"prompt": ...}) or ShareGPT JSON',
    )
    parser.add_argument(
        "--workload",
        default=None,
        metavar="NAME|FILE",
        help="what to send besides random ids: chat (production-like lengths), shared-prefix,"
        " multi-turn (a growing shared prefix), each with KIND:key=N,... parameters (e.g."
        " multi-turn:turns=8,conversations=16); a shipped file (chat-prompts, chat-trace,"
        " mooncake-agent; see workloads/README.md) or a dataset or trace file's path",
    )
    parser.add_argument(
        "--trace",
        type=Path,
        default=None,
        metavar="FILE",
        help='replay a JSONL trace at its own arrival times: {"timestamp": s, "input_len": N,'
        ' "output_len": M[, "prefix_group": G]} or Mooncake\'s format (ms, hash_ids)',
    )
    parser.add_argument(
        "--replay-speed",
        type=argtypes.bounded_float(0.0, 1e6, low_open=True),
        default=1.0,
        metavar="X",
        help="a trace's arrivals X times as fast as recorded (default 1)",
    )
    parser.add_argument(
        "--vocab-size",
        type=argtypes.vocab_size,
        default=32000,
        metavar="N",
        help="random input ids stay below this (default 32000)",
    )


def profile_slo(services: Any, profile: str) -> str | None:
    """The profile's default SLO ([bench] slo); None when it has none or is gone."""
    from console.core.errors import ConsoleError

    try:
        slo: str | None = services.catalog.get(profile).profile.bench.slo
    except ConsoleError:
        return None
    return slo


def _bench(args: argparse.Namespace) -> int:
    from console.bench.launch import create_run, detach
    from console.bench.request import BenchRequest, require_slo
    from console.bench.workload_files import check_endpoint, cli_workload
    from console.cli import runner
    from console.profiles.slo import DEFAULT_ATTAINMENT

    if args.concurrency:
        rc.check_open_files(max(args.concurrency), "--concurrency")
    services = rc.services(args)
    demo = services.demo
    requests = args.requests
    if requests is None and args.duration is None and demo:
        requests = DEMO_REQUESTS
    input_len = args.input_len or (DEMO_INPUT_LEN if demo else DEFAULT_INPUT_LEN)
    output_len = args.output_len or (DEMO_OUTPUT_LEN if demo else DEFAULT_OUTPUT_LEN)
    request = BenchRequest(
        server_id=args.server,
        url=args.url,
        concurrency=tuple(args.concurrency or ()),
        rates=tuple(args.rate or ()),
        requests=requests,
        duration_s=args.duration,
        input_len=input_len,
        output_len=output_len,
        range_ratio=args.range_ratio,
        endpoint=args.endpoint,
        warmup=args.warmup,
        flush_cache=args.flush_cache,
        seed=args.seed,
        dataset=str(args.dataset) if args.dataset else None,
        workload_name=cli_workload(args.workload, args.trace),
        replay_speed=args.replay_speed,
        vocab_size=args.vocab_size,
        name=args.name,
        slo=args.slo,
        attainment=DEFAULT_ATTAINMENT if args.attainment is None else args.attainment,
        include_transients=bool(args.include_transients),
        find_max=args.find_max,
        find_max_limit=args.find_max_limit,
    ).validate()
    # A bad dataset, workload or trace, or token ids for the chat endpoint, fails here,
    # before a run folder exists.
    check_endpoint(request.endpoint, request.workload())
    request, cell = runner.bench_cell(services, request)
    if request.slo is None and cell.profile:
        request = dataclasses.replace(request, slo=profile_slo(services, cell.profile))
    require_slo(request.find_max, request.slo)
    runner.check_search(request, "--find-max-limit")
    run = create_run(
        request,
        runs_root=rc.runs_root(args, services),
        name=request.run_name(cell.cell_id),
        demo=services.demo,
        fingerprint=rc.fingerprint(services),
        argv=sys.argv[1:],
    )
    if args.detach:
        return rc.report_detached(args, detach(run))
    rc.say(args, f"run {run.run_id} -> {run.path}")
    # Through a gateway ddconsole launched: each worker's share, from its /engine_metrics.
    gateway = runner.gateway_before([cell])
    code = runner.run_in_process(
        args, services, run, request, resume_hint=f"results so far are in {run.path}", cells=[cell]
    )
    runner.gateway_after(args, run, gateway, [cell])
    return code
