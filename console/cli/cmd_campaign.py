"""`ddconsole campaign FILE`: launch each cell's server, run its levels, stop it, next."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.cli import run_common as rc
from console.cli.slo_flags import add_slo_flags

if TYPE_CHECKING:
    from console.bench.request import CampaignRequest


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
    add_slo_flags(campaign, campaign=True)
    campaign.add_argument("--out", type=Path, default=None, metavar="DIR")
    campaign.add_argument("--json", action="store_true")
    campaign.set_defaults(handler=_campaign)


def _campaign(args: argparse.Namespace) -> int:
    from console.bench.launch import create_run, detach, stored_request
    from console.bench.request import CampaignRequest
    from console.bench.rundir import RunDir
    from console.cli import runner
    from console.core.errors import UsageError

    services = rc.services(args)
    root = rc.runs_root(args, services)
    request: CampaignRequest
    if args.resume:
        run = RunDir.open(root, args.resume)
        owner = run.owner_alive()
        if owner is not None:
            raise UsageError(f"run {run.run_id} is still running (pid {owner})")
        stored = stored_request(run)
        if not isinstance(stored, CampaignRequest):
            raise UsageError(f"run {run.run_id} is a {stored.kind} run, not a campaign")
        request = stored
    else:
        # The spec refuses non-finite and absurd numbers itself (console/bench/spec.py), so
        # a file, `--resume` of its stored spec and the TUI all refuse the same.
        request = judged(CampaignRequest.from_file(args.file), args).check(services.catalog)
        rc.check_open_files(max(request.spec.concurrency or [1]), f"{args.file}: concurrency")
        runner.check_search(request, f"{args.file}: find_max_limit")
        run = create_run(
            request,
            runs_root=root,
            name=request.spec.name,
            demo=services.demo,
            fingerprint=rc.fingerprint(services),
        )
    if args.detach:
        return rc.report_detached(args, detach(run))
    rc.say(args, f"campaign {request.spec.name}: run {run.run_id} -> {run.path}")
    from console.core.via_host import ddconsole_command

    demo = " --demo" if services.demo else ""
    dd = ddconsole_command()
    return runner.run_in_process(
        args,
        services,
        run,
        request,
        resume_hint=f"`{dd} campaign {args.file} --resume {run.run_id}{demo}` continues",
    )


def judged(request: CampaignRequest, args: argparse.Namespace) -> CampaignRequest:
    """The campaign with the command line's SLO, attainment, transients and search flags
    over the file's (each validated by the spec, naming the flag's key)."""
    import dataclasses

    changes: dict[str, object] = {
        key: value
        for key, value in (
            ("slo", args.slo),
            ("attainment", args.attainment),
            ("include_transients", args.include_transients),
            ("find_max", args.find_max),
            ("find_max_limit", args.find_max_limit),
        )
        if value is not None
    }
    if not changes:
        return request
    return dataclasses.replace(request, spec=request.spec.with_changes(**changes))
