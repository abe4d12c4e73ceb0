"""`ddconsole bench`, `ddconsole campaign` and `ddconsole runs`."""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from console.cli.render import print_json, table


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"levels must be positive integers: {text!r}")
    return values


def _float_list(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"rates must be positive: {text!r}")
    return values


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    bench = verbs.add_parser(
        "bench", parents=[common], help="benchmark a running server: levels of streamed requests"
    )
    target = bench.add_mutually_exclusive_group(required=True)
    target.add_argument("--server", metavar="ID", help="a managed server (see `ddconsole ps`)")
    target.add_argument("--url", metavar="URL", help="any SGLang server")
    bench.add_argument(
        "--concurrency",
        type=_int_list,
        default=None,
        metavar="1,4,16",
        help="closed-loop concurrency levels (default 1)",
    )
    bench.add_argument(
        "--rate",
        type=_float_list,
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

    campaign = verbs.add_parser(
        "campaign",
        parents=[common],
        help="launch each cell's server, run its levels, stop it, next",
    )
    campaign.add_argument("file", type=Path, metavar="FILE.toml")
    campaign.add_argument(
        "--resume", metavar="RUN", help="continue this run, skipping finished cells and levels"
    )
    campaign.add_argument(
        "--detach",
        action="store_true",
        help="run in the background; follow with `ddconsole runs show RUN --follow`",
    )
    campaign.add_argument("--out", type=Path, default=None, metavar="DIR")
    campaign.add_argument("--json", action="store_true")
    campaign.set_defaults(handler=_campaign)

    runs = verbs.add_parser("runs", parents=[common], help="list, show, compare and import runs")
    sub = runs.add_subparsers(title="actions", metavar="ACTION")
    runs.set_defaults(handler=_runs_list, json=False, out=None)
    r_list = sub.add_parser("list", parents=[common], help="every run")
    r_list.add_argument("--json", action="store_true")
    r_list.add_argument("--out", type=Path, default=None, metavar="DIR")
    r_list.set_defaults(handler=_runs_list)
    r_show = sub.add_parser("show", parents=[common], help="one run's table and findings")
    r_show.add_argument("run", metavar="RUN")
    r_show.add_argument("--follow", action="store_true", help="keep printing while it runs")
    r_show.add_argument("--json", action="store_true")
    r_show.add_argument("--out", type=Path, default=None, metavar="DIR")
    r_show.set_defaults(handler=_runs_show)
    r_cmp = sub.add_parser("compare", parents=[common], help="two runs side by side")
    r_cmp.add_argument("run_a", metavar="RUN1")
    r_cmp.add_argument("run_b", metavar="RUN2")
    r_cmp.add_argument("--json", action="store_true")
    r_cmp.add_argument("--out", type=Path, default=None, metavar="DIR")
    r_cmp.set_defaults(handler=_runs_compare)
    r_imp = sub.add_parser(
        "import", parents=[common], help="import SGLang bench_serving results (its JSONL) as a run"
    )
    r_imp.add_argument("file", type=Path, metavar="FILE.jsonl")
    r_imp.add_argument("--name", default=None)
    r_imp.add_argument("--json", action="store_true")
    r_imp.add_argument("--out", type=Path, default=None, metavar="DIR")
    r_imp.set_defaults(handler=_runs_import)


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


def _services(args: argparse.Namespace) -> Any:
    from console.cli.services import Services

    return Services.create(demo=bool(getattr(args, "demo", False)))


def _runs_root(args: argparse.Namespace, services: Any) -> Path:
    return Path(args.out) if getattr(args, "out", None) else services.state.runs


def _say(args: argparse.Namespace, text: str) -> None:
    print(text, file=sys.stderr if getattr(args, "json", False) else sys.stdout, flush=True)


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


def _levels(
    concurrency: list[int] | None,
    rates: list[float] | None,
    requests: int | None,
    duration: float | None,
    warmup: int,
    flush: bool,
) -> list[Any]:
    from console.bench.levels import LevelSpec
    from console.core.errors import UsageError

    if requests is None and duration is None:
        requests = 16
    if requests is not None and requests < 1:
        raise UsageError("--requests must be at least 1")
    if duration is not None and duration <= 0:
        raise UsageError("--duration must be positive")
    if rates:
        cap = concurrency[0] if concurrency else None
        return [
            LevelSpec(i, cap, rate, requests, duration, warmup, flush)
            for i, rate in enumerate(rates)
        ]
    return [
        LevelSpec(i, c, None, requests, duration, warmup, flush)
        for i, c in enumerate(concurrency or [1])
    ]


def _execute(args: argparse.Namespace, runner: Any) -> str:
    """Run with SIGINT/SIGTERM stopping cleanly (in-flight requests are the only loss)."""

    from console.bench.rundir import RunWriteError

    async def main() -> str:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, runner.stop.set)
        return str(await runner.run_all())

    try:
        return asyncio.run(main())
    except RunWriteError as exc:
        # Servers were stopped on the way out; what was written so far stays usable.
        print(f"ddconsole: stopped: {exc}", file=sys.stderr, flush=True)
        return "write-error"


def _finish(args: argparse.Namespace, run: Any, status: str, resume_hint: str) -> int:
    from console.bench.summary import summarize_run

    if status == "write-error":
        _say(args, resume_hint)
        return 1
    summary = summarize_run(run)
    if args.json:
        print_json(summary)
    else:
        print_summary(summary)
    if status == "interrupted":
        _say(args, f"interrupted; {resume_hint}")
        return 130
    failed = [c for c in summary["cells"] if c["status"] == "failed"]
    return 1 if failed and len(failed) == len(summary["cells"]) else 0


def _bench(args: argparse.Namespace) -> int:
    from console.bench.campaign import CampaignRunner, CellPlan, RunOptions, StartedServer
    from console.bench.cells import meta_from_plan
    from console.bench.client import Endpoint
    from console.bench.rundir import RunDir

    services = _services(args)
    workload = _workload(args)
    levels = _levels(
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
        import os

        headers = {}
        if plan.api_key_env and os.environ.get(plan.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[plan.api_key_env]}"
        server = StartedServer(server_id, status.record.url, headers, plan.gpus, plan.to_json())
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
    root = _runs_root(args, services)
    if args.into:
        run = RunDir.open(root, args.into)
    else:
        run = RunDir.create(
            root,
            name,
            {
                "kind": "bench",
                "status": "created",
                "fingerprint": _fingerprint(services),
                "workload": _workload_json(args),
                "levels": [vars(lv) for lv in levels],
                "argv": sys.argv[1:],
                "cells": [],
            },
        )
    if args.detach:
        return _detach(args, run, _bench_argv(args, run.run_id))
    _say(args, f"run {run.run_id} -> {run.path}")
    runner = CampaignRunner(
        run,
        [cell],
        RunOptions(Endpoint(args.endpoint), workload, levels),
        control=None,
        gpu_backend=services.gpu_backend,
        on_event=lambda text: _say(args, text),
    )
    status = _execute(args, runner)
    return _finish(args, run, status, f"results so far are in {run.path}")


def _fingerprint(services: Any) -> dict[str, Any]:
    from console.bench.campaign import fingerprint

    return fingerprint(services.gpu_backend, services.demo)


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


def _campaign(args: argparse.Namespace) -> int:
    from console.bench.campaign import CampaignRunner, CellPlan, RunOptions
    from console.bench.client import Endpoint
    from console.bench.rundir import RunDir
    from console.bench.spec import CampaignSpec, load_campaign
    from console.bench.workload import Workload, load_dataset
    from console.core.errors import UsageError
    from console.server.control import ManagedControl

    services = _services(args)
    root = _runs_root(args, services)
    if args.resume:
        run = RunDir.open(root, args.resume)
        meta = run.meta()
        owner = run.owner_alive()
        if owner is not None:
            raise UsageError(f"run {run.run_id} is still running (pid {owner})")
        spec = CampaignSpec.model_validate(meta["spec"])
    else:
        spec = load_campaign(args.file)
        for cell in spec.cell_list():
            from console.profiles.command import select

            select(services.catalog.get(cell.profile), cell.layout, cell.variant)
        run = RunDir.create(
            root,
            spec.name,
            {
                "kind": "campaign",
                "status": "created",
                "spec": spec.model_dump(mode="json"),
                "campaign_file": str(args.file.resolve()),
                "fingerprint": _fingerprint(services),
                "workload": {
                    "input_len": spec.input_len,
                    "output_len": spec.output_len,
                    "range_ratio": spec.range_ratio,
                    "endpoint": spec.endpoint,
                    "seed": spec.seed,
                    "requests": spec.requests,
                    "duration_s": spec.duration_s,
                },
                "cells": [],
            },
        )
    if args.detach:
        return _detach(args, run, ["campaign", str(args.file), "--resume", run.run_id])
    levels = _levels(
        spec.concurrency,
        spec.rates or None,
        spec.requests,
        spec.duration_s,
        spec.warmup,
        spec.flush_cache,
    )
    dataset = Path(spec.dataset) if spec.dataset else None
    workload = Workload(
        spec.input_len,
        spec.output_len,
        spec.range_ratio,
        seed=spec.seed,
        dataset=dataset,
        prompts_from_file=load_dataset(dataset, spec.output_len) if dataset else (),
    ).validate()
    cells = []
    for cell in spec.cell_list():
        loaded = services.catalog.get(cell.profile)
        variant = loaded.profile.variants[cell.variant]
        cells.append(
            CellPlan(
                f"{cell.profile}/{cell.layout}/{cell.variant}",
                cell.profile,
                cell.layout,
                cell.variant,
                {
                    "algorithm": variant.algorithm.value,
                    "architecture": loaded.profile.model.architecture.value,
                    "ddtree_budget": variant.ddtree_budget,
                },
            )
        )
    control = ManagedControl(
        services.manager(),
        services.catalog,
        services.topology(),
        demo=services.demo,
        port=spec.port,
        gpus=tuple(spec.gpus) if spec.gpus else None,
    )
    _say(args, f"campaign {spec.name}: run {run.run_id} -> {run.path}")
    runner = CampaignRunner(
        run,
        cells,
        RunOptions(Endpoint(spec.endpoint), workload, levels),
        control=control,
        gpu_backend=services.gpu_backend,
        on_event=lambda text: _say(args, text),
    )
    status = _execute(args, runner)
    demo = " --demo" if services.demo else ""
    return _finish(
        args, run, status, f"`ddconsole campaign {args.file} --resume {run.run_id}{demo}` continues"
    )


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


def _detach(args: argparse.Namespace, run: Any, argv: list[str]) -> int:
    """Run `ddconsole ARGV` in its own session (it outlives this shell) and say how to follow."""
    command = [sys.executable, "-m", "console", *argv]
    if getattr(args, "demo", False):
        command.append("--demo")
    if args.out:
        command += ["--out", str(args.out)]
    with (run.path / "console.log").open("ab") as log:
        subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + 10
    while run.owner_alive() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    demo = " --demo" if getattr(args, "demo", False) else ""
    pid = run.owner_alive()
    if args.json:
        print_json({"run_id": run.run_id, "run_dir": str(run.path), "detached": True, "pid": pid})
    else:
        print(
            f"running in the background as run {run.run_id} ({run.path}), pid {pid}\n"
            f"follow it: ddconsole runs show {run.run_id} --follow{demo}"
        )
    return 0


# -- runs ---------------------------------------------------------------------------------


def print_summary(summary: dict[str, Any]) -> None:
    from console.bench.tables import METRIC_NOTE, SUMMARY_HEADERS, best_line, summary_rows

    scale = summary.get("time_scale") or 1
    note = f"  (simulator time x{scale:g})" if scale != 1 else ""
    print(f"run {summary['run_id']}: {summary.get('name')} [{summary['status']}]{note}")
    print(table(list(SUMMARY_HEADERS), summary_rows(summary)))
    print(METRIC_NOTE)
    for finding in summary["findings"]:
        print(f"\n* {finding['kind']}: {finding['message']}")
    if summary["best"]:
        print(f"\nbest per level: {best_line(summary)}")
    print(f"\nfiles: {summary['run_dir']}")


def _runs_list(args: argparse.Namespace) -> int:
    from console.bench.listing import list_runs

    services = _services(args)
    root = _runs_root(args, services)
    runs = list_runs(root)
    if args.json:
        print_json([r.to_json() for r in runs])
        return 0
    rows = [
        [
            r.run_id,
            r.name or "-",
            r.kind or "-",
            r.status if r.error is None else f"unreadable: {r.error}",
            f"{r.cells_done}/{r.cells}",
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_wall))
            if r.created_wall
            else "-",
        ]
        for r in runs
    ]
    if rows:
        print(table(["RUN", "NAME", "KIND", "STATUS", "CELLS DONE", "CREATED"], rows))
    else:
        print(f"no runs in {root}")
    return 0


def _runs_show(args: argparse.Namespace) -> int:
    from console.bench.rundir import RunDir
    from console.bench.summary import summarize_run

    services = _services(args)
    run = RunDir.open(_runs_root(args, services), args.run)
    if args.follow:
        seen = 0
        while True:
            lines = run.read_jsonl("levels.jsonl")
            for level in lines[seen:]:
                print(
                    f"{level.get('cell')}: level {level.get('level')} {level.get('status')}",
                    flush=True,
                )
            seen = len(lines)
            if run.owner_alive() is None:
                break
            time.sleep(0.5)
    summary = summarize_run(run)
    if args.json:
        print_json(summary)
    else:
        print_summary(summary)
    return 0


def _runs_compare(args: argparse.Namespace) -> int:
    from console.bench.compare import compare_runs
    from console.bench.rundir import RunDir
    from console.bench.summary import summarize_run
    from console.bench.tables import COMPARE_HEADERS, compare_rows

    services = _services(args)
    root = _runs_root(args, services)
    a = summarize_run(RunDir.open(root, args.run_a))
    b = summarize_run(RunDir.open(root, args.run_b))
    result = compare_runs(a, b)
    if args.json:
        print_json(result)
        return 0
    print(f"A = {a['run_id']} ({a.get('name')})\nB = {b['run_id']} ({b.get('name')})")
    print(table(list(COMPARE_HEADERS), compare_rows(result)))
    for side in ("only_a", "only_b"):
        for item in result[side]:
            print(f"only in {side[-1].upper()}: {item}")
    return 0


def _runs_import(args: argparse.Namespace) -> int:
    from console.bench.sglang_import import import_sglang_jsonl
    from console.bench.summary import summarize_run, write_summaries

    services = _services(args)
    run = import_sglang_jsonl(args.file, _runs_root(args, services), args.name)
    write_summaries(run)
    summary = summarize_run(run)
    if args.json:
        print_json(summary)
    else:
        print(f"imported {args.file} as run {run.run_id}")
        print_summary(summary)
    return 0
