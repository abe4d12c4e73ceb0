"""`ddconsole campaign FILE`: launch each cell's server, run its levels, stop it, next."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from console.cli import run_common as rc


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
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


def _campaign(args: argparse.Namespace) -> int:
    from console.bench.campaign import CampaignRunner, CellPlan, RunOptions
    from console.bench.client import Endpoint
    from console.bench.rundir import RunDir
    from console.bench.spec import CampaignSpec, load_campaign
    from console.bench.workload import Workload, load_dataset
    from console.core.errors import UsageError
    from console.server.control import ManagedControl

    services = rc.services(args)
    root = rc.runs_root(args, services)
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
                "fingerprint": rc.fingerprint(services),
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
        return rc.detach(args, run, ["campaign", str(args.file), "--resume", run.run_id])
    levels = rc.levels(
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
    rc.say(args, f"campaign {spec.name}: run {run.run_id} -> {run.path}")
    runner = CampaignRunner(
        run,
        cells,
        RunOptions(Endpoint(spec.endpoint), workload, levels),
        control=control,
        gpu_backend=services.gpu_backend,
        on_event=lambda text: rc.say(args, text),
    )
    status = rc.execute(args, runner)
    demo = " --demo" if services.demo else ""
    return rc.finish(
        args, run, status, f"`ddconsole campaign {args.file} --resume {run.run_id}{demo}` continues"
    )
