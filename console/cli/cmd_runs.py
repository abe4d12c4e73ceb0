"""`ddconsole runs list|show|compare|report|import|stop`."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from console.cli.render import print_json, table
from console.cli.render_runs import print_compare, print_summary
from console.cli.run_common import runs_root, services

if TYPE_CHECKING:
    from console.bench.listing import RunRow
    from console.bench.rundir import RunDir


EXACT_HELP = "the id exactly, never a prefix of another (a caller acting on the run it was shown)"


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    runs = verbs.add_parser(
        "runs", parents=[common], help="list, show, compare, report, import and stop runs"
    )
    sub = runs.add_subparsers(title="actions", metavar="ACTION")
    runs.set_defaults(handler=_runs_list, json=False, out=None)
    r_list = sub.add_parser("list", parents=[common], help="every run")
    r_list.add_argument("--json", action="store_true")
    r_list.add_argument("--out", type=Path, default=None, metavar="DIR")
    r_list.set_defaults(handler=_runs_list)
    r_show = sub.add_parser("show", parents=[common], help="one run's table and findings")
    r_show.add_argument("run", metavar="RUN")
    r_show.add_argument(
        "--follow",
        action="store_true",
        help="keep printing while it runs; exit 1 when it ends failed or interrupted",
    )
    r_show.add_argument("--exact", action="store_true", help=EXACT_HELP)
    r_show.add_argument("--json", action="store_true")
    r_show.add_argument("--out", type=Path, default=None, metavar="DIR")
    r_show.set_defaults(handler=_runs_show)
    r_cmp = sub.add_parser(
        "compare",
        parents=[common],
        help="two runs or more side by side; changes beyond within-run sampling noise marked",
    )
    r_cmp.add_argument("run_a", metavar="RUN1")
    r_cmp.add_argument("run_b", metavar="RUN2")
    r_cmp.add_argument(
        "more", nargs="*", metavar="RUN", help="more runs, each compared with the first"
    )
    r_cmp.add_argument("--json", action="store_true")
    r_cmp.add_argument("--out", type=Path, default=None, metavar="DIR")
    r_cmp.set_defaults(handler=_runs_compare)
    r_rep = sub.add_parser(
        "report",
        parents=[common],
        help="a run's plots (SVG, PNG), a Markdown report and one self-contained HTML page",
    )
    r_rep.add_argument(
        "run", metavar="RUN", help="a run id, a unique prefix of one, or a run folder's path"
    )
    r_rep.add_argument(
        "--format",
        default="svg,png,md,html",
        metavar="LIST",
        help="any of svg,png,md,html, comma-separated (default: all)",
    )
    r_rep.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder to write into (default: the run folder's report/)",
    )
    r_rep.add_argument("--json", action="store_true", help="print the files written as JSON")
    r_rep.set_defaults(handler=_runs_report)
    r_imp = sub.add_parser(
        "import", parents=[common], help="import SGLang bench_serving results (its JSONL) as a run"
    )
    r_imp.add_argument("file", type=Path, metavar="FILE.jsonl")
    r_imp.add_argument("--name", default=None)
    r_imp.add_argument("--json", action="store_true")
    r_imp.add_argument("--out", type=Path, default=None, metavar="DIR")
    r_imp.set_defaults(handler=_runs_import)
    r_stop = sub.add_parser(
        "stop",
        parents=[common],
        help="stop a running benchmark or campaign as Ctrl-C would (resumable)",
    )
    r_stop.add_argument("run", metavar="RUN", help="run id or a unique prefix of one")
    r_stop.add_argument("--exact", action="store_true", help=EXACT_HELP)
    r_stop.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    r_stop.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds to wait for the run to end (default 30)",
    )
    r_stop.add_argument("--json", action="store_true", help="print the outcome as JSON")
    r_stop.add_argument("--out", type=Path, default=None, metavar="DIR", help="results folder")
    r_stop.set_defaults(handler=_runs_stop)


def _runs_list(args: argparse.Namespace) -> int:
    from console.bench.listing import list_runs

    root = runs_root(args, services(args))
    runs = list_runs(root)
    if args.json:
        print_json([r.to_json() for r in runs])
        return 0
    rows = [
        [
            r.run_id,
            r.name or "-",
            r.kind or "-",
            _status_text(r) if r.error is None else f"unreadable: {r.error}",
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


def _status_text(row: RunRow) -> str:
    """`running: level 1 of 3, 8/16 requests, ETA 42 s` in a level; else the run's status."""
    from console.cli.progress_line import eta_text, run_eta_text

    live, progress = row.level, row.progress
    if row.status != "running" or progress is None:
        return row.status
    if progress.phase is not None:
        run = "" if progress.run_eta_s is None else f", run {eta_text(progress.run_eta_s)}"
        return f"running: {progress.phase}{run}"
    if live is None:
        return row.status
    done = f"{live.completed}/{live.total}" if live.total is not None else f"{live.completed}"
    return (
        f"running: level {live.position()}, {done} requests, "
        f"{eta_text(live.eta_s)}{run_eta_text(progress, live)}"
    )


def _runs_show(args: argparse.Namespace) -> int:
    from console.bench.rundir import RunDir
    from console.bench.summary import load_summary

    run = RunDir.open(runs_root(args, services(args)), args.run, exact=args.exact)
    if args.follow:
        import sys

        # With --json, stdout is the one summary document: the progress goes to stderr.
        _follow(run, sys.stderr if args.json else sys.stdout)
    summary = load_summary(run)
    if args.json:
        print_json(summary.to_json())
    else:
        print_summary(summary)
        _print_level_workers(run)
    _warn_damage(run)
    if args.follow and summary.status != "done":
        return 1  # followed to its end: the exit status says how it ended, as `bench` does
    return 0


OWNER_WAIT_S = 20.0
"""How long a follower waits for a run's runner to claim it (a detached start on a loaded box
is slow to import) or, with the run still `running`, for its recorded process to end."""


def _runner_may_come(run: RunDir, missing_for_s: float) -> bool:
    """The run has no live owner: whether it may still be running (its runner not yet
    started, or not yet seen) rather than ended; bounded by `OWNER_WAIT_S`."""
    from console.core.errors import ConsoleError
    from console.hw.procs import is_running

    if missing_for_s >= OWNER_WAIT_S:
        return False
    try:
        meta = run.meta()
    except ConsoleError:
        return False
    if meta.status == "created":
        return True  # the runner writes `running` only after claiming the run
    if meta.status == "running":
        # The runner writes its final status before releasing: a `running` run whose
        # process is gone was killed (interrupted); one whose process lives is still going.
        return meta.pid is not None and is_running(meta.pid, None)
    return False


def _follow(run: RunDir, stream: TextIO) -> None:
    """Print each level's verdict as it is written, and the running level's progress (a bar
    on a terminal, a plain line every ten seconds otherwise), until the runner ends."""
    from console.bench.listing import run_row
    from console.bench.results import LevelRecord
    from console.cli.progress_line import ProgressPrinter

    printer = ProgressPrinter(stream)
    seen = 0
    owner_missing_since: float | None = None
    try:
        while True:
            lines = run.read_jsonl("levels.jsonl")
            # The summary judges a level (one whose every request failed is `failed`, with
            # its reason), not the runner's record of having run it.
            judged = _level_verdicts(run) if lines[seen:] else {}
            for line in lines[seen:]:
                try:
                    level = LevelRecord.from_json(line)
                except ValueError:
                    continue
                status, reason = judged.get((level.cell, level.level), (level.status, None))
                why = f": {reason}" if status in ("failed", "interrupted") and reason else ""
                printer.event(f"{level.cell}: level {level.level + 1} {status}{why}")
            seen = len(lines)
            if run.owner_alive() is None:
                now = time.monotonic()
                owner_missing_since = owner_missing_since or now
                if not _runner_may_come(run, now - owner_missing_since):
                    break
                time.sleep(0.2)
                continue
            owner_missing_since = None
            progress = run_row(run.path).progress
            if progress is not None:
                printer.progress(progress)
            time.sleep(0.5)
    finally:
        printer.close()


def _print_level_workers(run: RunDir) -> None:
    """A run through SGLang's model gateway: each level's per-worker figures."""
    from console.bench.workers import level_table, level_workers

    table = level_table(level_workers(run.path))
    if table is not None:
        print()
        print(table)


def _warn_damage(run: RunDir) -> None:
    """One line per JSONL file whose damaged lines the summary had to skip."""
    import sys

    for name in ("levels.jsonl", "requests.jsonl"):
        damaged = run.damaged_lines(name)
        if damaged:
            print(
                f"ddconsole: warning: {run.path / name}: {damaged} damaged "
                f"line{'s' if damaged != 1 else ''} skipped (not counted above)",
                file=sys.stderr,
            )


def _level_verdicts(run: RunDir) -> dict[tuple[str, int], tuple[str, str | None]]:
    """Each level's status and reason by (cell, level) as the run's summary has them; empty
    while the summary cannot be read (the runner's own statuses are shown then)."""
    from console.bench.summary import load_summary
    from console.core.errors import ConsoleError

    try:
        summary = load_summary(run)
    except ConsoleError:
        return {}
    return {
        (cell.cell_id, level.level): (level.status, level.reason)
        for cell in summary.cells
        for level in cell.levels
    }


def _runs_compare(args: argparse.Namespace) -> int:
    from console.bench.compare import compare_runs
    from console.bench.noise import run_errors
    from console.bench.rundir import RunDir
    from console.bench.summary import load_summary

    root = runs_root(args, services(args))
    runs = [RunDir.open(root, name) for name in (args.run_a, args.run_b, *args.more)]
    summaries = [load_summary(run) for run in runs]
    errors = [
        run_errors(run.path, [(cell.cell_id, level) for cell, level in summary.levels()])
        for run, summary in zip(runs, summaries, strict=True)
    ]
    result = compare_runs(*summaries, errors=errors)
    if args.json:
        print_json(result.to_json())
        return 0
    print_compare(result)
    return 0


def _runs_report(args: argparse.Namespace) -> int:
    from console.bench.plotdata import cell_gpus
    from console.bench.rundir import RunDir
    from console.bench.summary import load_summary
    from console.export.report import parse_formats, write_report

    formats = parse_formats(args.format)
    # The run is found in the state dir's runs/ (or given as a path): --out is where the
    # report goes, not the results folder it means for the other `runs` actions.
    run = RunDir.open(services(args).state.runs, args.run)
    summary = load_summary(run)
    out = args.out if args.out is not None else run.path / "report"
    written = write_report(summary, cell_gpus(run.meta().cells), out, formats)
    if args.json:
        print_json({"run_id": summary.run_id, "out": str(out), "files": [str(p) for p in written]})
    else:
        print(f"report of run {summary.run_id} in {out}:")
        print("\n".join(f"  {path.name}" for path in written))
    _warn_damage(run)
    return 0


def _runs_import(args: argparse.Namespace) -> int:
    from console.bench.sglang_import import import_sglang_jsonl
    from console.bench.summary import write_summaries

    run = import_sglang_jsonl(args.file, runs_root(args, services(args)), args.name)
    summary = write_summaries(run)
    if args.json:
        print_json(summary.to_json())
    else:
        print(f"imported {args.file} as run {run.run_id}")
        print_summary(summary)
    return 0


def _runs_stop(args: argparse.Namespace) -> int:
    """Exit 0 once stopped, 1 when it could not be (not running, declined, still running
    after --timeout), 2 for an unknown run."""
    import sys

    from console.bench.cancel import stop, stop_prompt
    from console.bench.rundir import RunDir
    from console.core.errors import UsageError

    if not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout:g}")
    run = RunDir.open(runs_root(args, services(args)), args.run, exact=args.exact)
    question = stop_prompt(run.path)
    if not args.yes and sys.stdin.isatty():
        # The question goes to stderr: stdout stays the outcome (one JSON document with --json).
        print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline()
        if answer.strip().lower() not in ("y", "yes"):
            print(f"not stopped: run {run.run_id} keeps running", file=sys.stderr)
            return 1
    stopped = stop(run.path, timeout_s=args.timeout)
    if args.json:
        print_json(stopped.to_json())
    else:
        print(stopped.message)
    return 0
