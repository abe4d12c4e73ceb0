"""Run a stored request in this process: `bench` and `campaign` in the foreground, and the
hidden `run-request RUN_DIR` verb that a detached run executes.

This is where a request meets the services (server manager, profile catalog, GPU backend):
the bench package cannot import them, so the runner is assembled here, once, for every way
a run starts.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.cli import run_common as rc

if TYPE_CHECKING:
    from console.bench.campaign import CampaignRunner, CellPlan, RunOptions
    from console.bench.request import BenchRequest, CampaignRequest, RunRequest
    from console.bench.rundir import RunDir
    from console.bench.workers import GatewayReading
    from console.cli.progress_line import ProgressPrinter
    from console.cli.services import Services


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    from console.bench.runner_verb import RUNNER_VERB

    # No help text: a hidden verb, started by `--detach` and by the console, not by users.
    runner = verbs.add_parser(RUNNER_VERB, parents=[common])
    runner.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    runner.set_defaults(handler=_run_request, json=False, out=None)


def bench_cell(services: Services, request: BenchRequest) -> tuple[BenchRequest, CellPlan]:
    """The cell a benchmark loads, and the request with its server id resolved (a prefix
    becomes the full id). UsageError when the managed server is not ready."""
    from console.bench.campaign import CellPlan, StartedServer
    from console.bench.cells import CellTraits, meta_from_plan
    from console.bench.request import cell_id

    if request.server_id is None:
        url = (request.url or "").rstrip("/")
        return dataclasses.replace(request, url=url), CellPlan(
            url, None, None, None, CellTraits(), StartedServer(None, url)
        )
    from console.server.actions import auth_headers, ready_server

    status = ready_server(services.manager(), request.server_id)
    plan = status.record.plan
    server = StartedServer(status.id, status.record.url, auth_headers(plan), plan.gpus, plan)
    cell = CellPlan(
        cell_id(plan.profile, plan.layout, plan.variant),
        plan.profile,
        plan.layout,
        plan.variant,
        meta_from_plan(plan, _tree_flag(services, plan.profile, plan.variant)),
        server,
    )
    return dataclasses.replace(request, server_id=status.id), cell


def _tree_flag(services: Services, profile: str, variant: str) -> str | None:
    """The tree budget flag a profile's variant names, besides DDTREE's (its value is read
    from the plan's argv, which says what the server was launched with)."""
    from console.core.errors import ConsoleError

    try:
        return services.catalog.get(profile).profile.variants[variant].tree_budget_flag
    except (ConsoleError, KeyError):
        return None  # a profile removed or changed since the launch: no tree flag known


def campaign_cells(services: Services, request: CampaignRequest) -> list[CellPlan]:
    from console.bench.campaign import CellPlan
    from console.bench.cells import CellTraits
    from console.bench.request import cell_id

    cells = []
    for cell in request.spec.cell_list():
        loaded = services.catalog.get(cell.profile)
        variant = loaded.profile.variants[cell.variant]
        cells.append(
            CellPlan(
                cell_id(cell.profile, cell.layout, cell.variant),
                cell.profile,
                cell.layout,
                cell.variant,
                CellTraits(
                    algorithm=variant.algorithm.value,
                    architecture=loaded.profile.model.architecture.value,
                    ddtree_budget=variant.ddtree_budget,
                    tree_budget=variant.tree_budget,
                    tree_flag=variant.tree_budget_flag,
                ),
            )
        )
    return cells


def build_runner(
    args: argparse.Namespace,
    services: Services,
    run: RunDir,
    request: RunRequest,
    cells: list[CellPlan] | None = None,
    printer: ProgressPrinter | None = None,
) -> CampaignRunner:
    """The runner for `request` into `run`; a benchmark's cell may be given (already
    resolved by the caller), else it is resolved here. Its events and progress go to
    `printer` (plain lines on the progress stream when none is given)."""
    from console.bench.campaign import CampaignRunner
    from console.bench.request import BenchRequest

    if isinstance(request, BenchRequest):
        if cells is None:
            cells = [bench_cell(services, request)[1]]
        options = run_options(request)
        control = None
    else:
        from console.server.control import ManagedControl

        spec = request.spec
        cells = campaign_cells(services, request)
        options = run_options(request)
        control = ManagedControl(
            services.manager(),
            services.catalog,
            services.topology(),
            demo=services.demo,
            port=spec.port,
            gpus=tuple(spec.gpus) if spec.gpus else None,
        )
    return CampaignRunner(
        run,
        cells,
        options,
        control=control,
        gpu_backend=services.gpu_backend,
        on_event=printer.event if printer else lambda text: rc.say(args, text),
        on_progress=printer.progress if printer else None,
    )


def run_options(request: RunRequest) -> RunOptions:
    """The endpoint, workload and levels of a request, and its saturation search if it asks
    for one (its levels then give the first load and the template of every level)."""
    from console.bench.campaign import RunOptions
    from console.bench.client import Endpoint
    from console.bench.request import BenchRequest
    from console.bench.search_levels import search_for
    from console.bench.workload_files import check_endpoint

    if isinstance(request, BenchRequest):
        endpoint, find_max, limit = request.endpoint, request.find_max, request.find_max_limit
    else:
        spec = request.spec
        endpoint, find_max, limit = spec.endpoint, spec.find_max, spec.find_max_limit
    levels = request.levels()
    workload = request.workload()
    # Token ids on the chat endpoint would go as decimal digits: refused, naming the flag
    # or the campaign key.
    check_endpoint(
        endpoint, workload, "--endpoint" if isinstance(request, BenchRequest) else "endpoint"
    )
    if find_max is None:
        return RunOptions(Endpoint(endpoint), workload, levels)
    search, template = search_for(find_max, limit, levels)
    return RunOptions(Endpoint(endpoint), workload, [template], search=search)


def check_search(request: RunRequest, where: str) -> None:
    """Refuse, before a run folder is made, a search whose limit is below its first load or
    whose highest concurrency this process cannot open sockets for."""
    options = run_options(request)
    if options.search is not None and options.search.kind == "concurrency":
        rc.check_open_files(int(options.search.limit), where)


def run_in_process(
    args: argparse.Namespace,
    services: Services,
    run: RunDir,
    request: RunRequest,
    *,
    resume_hint: str,
    cells: list[CellPlan] | None = None,
) -> int:
    """Run to the end (or a signal) here, then print the summary; the exit status."""
    printer = rc.progress_printer(args)
    runner = build_runner(args, services, run, request, cells, printer)
    try:
        status = rc.execute(args, runner)
    finally:
        printer.close()
    return rc.finish(args, run, status, resume_hint)


def resume_hint(services: Services, run: RunDir, request: RunRequest) -> str:
    from console.bench.request import CampaignRequest
    from console.core.via_host import ddconsole_command

    if isinstance(request, CampaignRequest):
        demo = " --demo" if services.demo else ""
        source = request.source or "FILE"
        return f"`{ddconsole_command()} campaign {source} --resume {run.run_id}{demo}` continues"
    return f"results so far are in {run.path}"


def _run_request(args: argparse.Namespace) -> int:
    """The detached runner: everything it needs is in the run's `run.json`."""
    from console.bench.launch import stored_demo, stored_request
    from console.bench.rundir import RunDir
    from console.cli.services import Services
    from console.core.errors import ConsoleError, UsageError

    if not (args.run_dir / "run.json").is_file():
        raise UsageError(f"{args.run_dir} is not a run folder (no run.json)")
    run = RunDir(args.run_dir.resolve())
    owner = run.owner_alive()
    if owner is not None:
        raise UsageError(f"run {run.run_id} is still running (pid {owner})")
    try:
        request = stored_request(run)
        services = Services.create(demo=stored_demo(run))
        if run.meta().fingerprint is None:
            run.update_meta(
                lambda meta: dataclasses.replace(meta, fingerprint=rc.fingerprint(services))
            )
        printer = rc.progress_printer(args)
        runner = build_runner(args, services, run, request, printer=printer)
    except ConsoleError as exc:
        # A run that never started says why in its own folder (`runs list`, the TUI).
        why = exc.message
        if run.meta().status == "created":
            run.update_meta(lambda meta: dataclasses.replace(meta, status="failed", error=why))
        raise
    rc.say(args, f"run {run.run_id} -> {run.path}")
    gateway = gateway_before(runner.cells)
    try:
        status = rc.execute(args, runner)
    finally:
        printer.close()
    code = rc.finish(args, run, status, resume_hint(services, run, request))
    gateway_after(args, run, gateway, runner.cells)
    return code


def gateway_before(cells: Sequence[CellPlan]) -> GatewayReading | None:
    """A benchmark through a gateway ddconsole launched: its workers' counters now (read
    again after the run for `workers.json`); None for anything else. Only then: a --url
    server is not asked before the run's signal handling is in place (a server that never
    answers would hold Ctrl-C off for the read's timeout)."""
    from console.bench import workers
    from console.server.gateway_plan import is_gateway

    fixed = cells[0].fixed if len(cells) == 1 else None
    if fixed is None or fixed.plan is None or not is_gateway(fixed.plan):
        return None
    return workers.read_gateway(fixed.url, fixed.headers)


def gateway_after(
    args: argparse.Namespace, run: RunDir, before: GatewayReading | None, cells: Sequence[CellPlan]
) -> None:
    """Each worker's share of the run through its gateway: `workers.json`, and the table."""
    from console.bench import workers

    if before is None:
        return
    fixed = cells[0].fixed if cells else None
    shares = workers.finish(before, run.path, fixed.headers if fixed is not None else None)
    if shares is not None:
        rc.say(args, shares)
