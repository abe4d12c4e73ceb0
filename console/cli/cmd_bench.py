"""`ddconsole bench`: benchmark one running server over levels of streamed requests."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from console.cli import run_common as rc


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
        type=rc.float_list,
        default=None,
        metavar="R[,R...]",
        help="open-loop Poisson request rates per second instead",
    )
    bench.add_argument(
        "--requests",
        type=int,
        default=None,
        metavar="N",
        help="requests per level (default 16 unless --duration)",
    )
    bench.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="S",
        help="seconds per level instead of a request count",
    )
    _workload_flags(bench)
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
    bench.add_argument("--into", default=None, help=argparse.SUPPRESS)
    bench.set_defaults(handler=_bench)


def _workload_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input-len", type=int, default=512, metavar="N")
    parser.add_argument("--output-len", type=int, default=256, metavar="N")
    parser.add_argument(
        "--range-ratio",
        type=float,
        default=1.0,
        metavar="R",
        help="draw lengths from [len*R, len]; 1.0 is fixed (default)",
    )
    parser.add_argument(
        "--endpoint", choices=("generate", "chat", "completions"), default="generate"
    )
    parser.add_argument(
        "--warmup",
        type=int,
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
        "--vocab-size",
        type=int,
        default=32000,
        metavar="N",
        help="random input ids stay below this (default 32000)",
    )


def _workload(args: argparse.Namespace) -> Any:
    from console.bench.workload import Workload, load_dataset

    prompts = load_dataset(args.dataset, args.output_len) if args.dataset else ()
    return Workload(
        args.input_len,
        args.output_len,
        args.range_ratio,
        args.vocab_size,
        args.seed,
        args.dataset,
        prompts,
    ).validate()


def _bench(args: argparse.Namespace) -> int:
    from console.bench.campaign import CampaignRunner, CellPlan, RunOptions, StartedServer
    from console.bench.cells import meta_from_plan
    from console.bench.client import Endpoint
    from console.bench.rundir import RunDir

    services = rc.services(args)
    workload = _workload(args)
    levels = rc.levels(
        args.concurrency, args.rate, args.requests, args.duration, args.warmup, args.flush_cache
    )
    if args.server:
        manager = services.manager()
        server_id = manager.resolve_id(args.server)
        status = manager.status(server_id)
        if status.state.value != "ready":
            from console.core.errors import UsageError

            raise UsageError(f"server {server_id} is {status.state.value}, not ready")
        plan = status.record.plan
        from console.server.actions import auth_headers

        server = StartedServer(
            server_id, status.record.url, auth_headers(plan), plan.gpus, plan.to_json()
        )
        cell = CellPlan(
            f"{plan.profile}/{plan.layout}/{plan.variant}",
            plan.profile,
            plan.layout,
            plan.variant,
            meta_from_plan(plan.to_json()),
            server,
        )
    else:
        url = args.url.rstrip("/")
        server = StartedServer(None, url)
        cell = CellPlan(url, None, None, None, {}, server)
    name = args.name or f"bench-{cell.cell_id.replace('/', '-')}"
    root = rc.runs_root(args, services)
    if args.into:
        run = RunDir.open(root, args.into)
    else:
        run = RunDir.create(
            root,
            name,
            {
                "kind": "bench",
                "status": "created",
                "fingerprint": rc.fingerprint(services),
                "workload": _workload_json(args),
                "levels": [vars(lv) for lv in levels],
                "argv": sys.argv[1:],
                "cells": [],
            },
        )
    if args.detach:
        return rc.detach(args, run, _bench_argv(args, run.run_id))
    rc.say(args, f"run {run.run_id} -> {run.path}")
    runner = CampaignRunner(
        run,
        [cell],
        RunOptions(Endpoint(args.endpoint), workload, levels),
        control=None,
        gpu_backend=services.gpu_backend,
        on_event=lambda text: rc.say(args, text),
    )
    status = rc.execute(args, runner)
    return rc.finish(args, run, status, f"results so far are in {run.path}")


def _workload_json(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "input_len": args.input_len,
        "output_len": args.output_len,
        "range_ratio": args.range_ratio,
        "endpoint": args.endpoint,
        "seed": args.seed,
        "dataset": str(args.dataset) if args.dataset else None,
        "vocab_size": args.vocab_size,
        "warmup": args.warmup,
        "flush_cache": args.flush_cache,
    }


def _bench_argv(args: argparse.Namespace, run_id: str) -> list[str]:
    """The same `bench` command, to run detached into an existing run folder."""
    argv = ["bench", "--server", args.server] if args.server else ["bench", "--url", args.url]
    if args.concurrency:
        argv += ["--concurrency", ",".join(map(str, args.concurrency))]
    if args.rate:
        argv += ["--rate", ",".join(f"{r:g}" for r in args.rate)]
    if args.requests is not None:
        argv += ["--requests", str(args.requests)]
    if args.duration is not None:
        argv += ["--duration", str(args.duration)]
    argv += [
        "--input-len",
        str(args.input_len),
        "--output-len",
        str(args.output_len),
        "--range-ratio",
        str(args.range_ratio),
        "--endpoint",
        args.endpoint,
        "--warmup",
        str(args.warmup),
        "--seed",
        str(args.seed),
        "--vocab-size",
        str(args.vocab_size),
        "--into",
        run_id,
    ]
    if args.flush_cache:
        argv.append("--flush-cache")
    if args.dataset:
        argv += ["--dataset", str(args.dataset)]
    return argv
