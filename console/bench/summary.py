"""Level and run summaries computed from a run's files, and `summary.json` as their cache.

Every number is derived from `levels.jsonl`, `requests.jsonl` and the run's GPU readings
(`run_gpu_readings`), so a summary can be rebuilt at any time (after a crash, on `--resume`).
`load_summary` is how readers get one: it returns `summary.json` while that is newer than
every file it is built from, and rebuilds (and rewrites) it otherwise. Findings come from
`findings.py`; the files' text forms from `tables.py`.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from console.bench.acceptance import drop_position, sum_histograms
from console.bench.findings import find_all
from console.bench.knee import knee_of
from console.bench.prompt_check import prompt_len_counts
from console.bench.rank_facts import rank_levels
from console.bench.results import (
    CANCELLED,
    BestLevel,
    CellMeta,
    CellSummary,
    LevelRecord,
    LevelSummary,
    RequestResult,
    RunSummary,
    most_common_error,
)
from console.bench.rundir import RunDir, RunWriteError
from console.bench.slo import Slo, SloOutcome, evaluate
from console.bench.stats import describe, mean, percentile
from console.bench.steady import ALL, STEADY, steady_window
from console.bench.tables import to_csv, to_markdown
from console.core.errors import ConsoleError
from console.profiles.models import DDTREE_BUDGET_FLAG
from console.telemetry.run_telemetry import RunGpuReading, run_gpu_readings

SUMMARY_FILE = "summary.json"
# The files a summary is built from; a run's telemetry may be in any `telemetry*` file.
SOURCE_FILES = ("run.json", "levels.jsonl", "requests.jsonl")
TELEMETRY_GLOB = "telemetry*"


class UnreadableRun(ConsoleError):
    """A run whose files cannot be read (a damaged run.json, a requests.jsonl that is a
    folder, a permission): its listing and screens say so, and other runs carry on."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"run {run_id} is unreadable: {reason}")
        self.run_id = run_id
        self.reason = reason


def verify_tokens_per_step(cell: CellMeta) -> int | None:
    """Tokens the target verifies per step: 1 autoregressive, budget + 1 for DDTree, the
    draft block for chains."""
    algorithm = (cell.algorithm or "off").upper()
    if algorithm in ("OFF", "NONE", ""):
        return 1
    if algorithm == "DDTREE" and cell.ddtree_budget:
        return cell.ddtree_budget + 1
    drafts = cell.server_draft_tokens or cell.num_draft_tokens
    return drafts or None


def summarize_level(
    level: LevelRecord,
    requests: Sequence[RequestResult],
    cell: CellMeta,
    gpu: Sequence[RunGpuReading],
    *,
    slo: Slo | None = None,
    include_transients: bool = False,
) -> LevelSummary:
    """One level from its record, its requests, its cell and the run's GPU readings.
    Statistics count the level's steady window (`console.bench.steady`) unless
    `include_transients`; `slo` judges the same requests."""
    scale = level.time_scale
    requests = [r for r in requests if r.error != CANCELLED]
    every_ok = [r for r in requests if not r.error]
    errors: dict[str, int] = defaultdict(int)
    for request in requests:
        if request.error:
            errors[str(request.error)] += 1
    level_duration = float(level.wall_s or 0.0) * scale
    window = steady_window(
        requests,
        concurrency=level.concurrency,
        rate=level.rate,
        started_wall=level.started_wall or 0.0,
        duration_s=level_duration,
        time_scale=scale,
        include_transients=include_transients or level.started_wall is None,
    )
    ok = [r for r in window.requests if not r.error]
    duration = window.duration_s
    output_tokens = sum(int(r.output_tokens or 0) for r in every_ok)
    judged = evaluate(slo, window.requests) if slo is not None else None
    gaps = [g / 1e6 for r in ok for g in r.chunk_gaps_us]
    before, after = level.counters_before, level.counters_after
    verify_delta = before.delta(after, "spec_verify_calls") if before else None
    generation_delta = before.delta(after, "generation_tokens") if before else None
    accept_counters = (
        generation_delta / verify_delta if verify_delta and generation_delta is not None else None
    )
    per_request_accept = mean([r.accept_length for r in ok])
    request_accepts = sorted(r.accept_length for r in ok if r.accept_length is not None)
    histograms = [r.spec_correct_drafts_histogram for r in ok if r.spec_correct_drafts_histogram]
    histogram = sum_histograms(histograms)
    steps = []
    for r in ok:
        count = r.spec_verify_ct or ((r.output_tokens or 0) - 1)
        if count and r.e2e_s is not None and r.ttft_s is not None:
            steps.append((r.e2e_s - r.ttft_s) / count)
    step_time = mean(steps)
    accept = accept_counters if accept_counters is not None else per_request_accept
    if cell.algorithm is None:
        # Unknown (a --url server whose /server_info did not say): measured acceptance wins.
        speculative = accept is not None
    else:
        speculative = cell.algorithm.upper() not in ("OFF", "NONE", "")
    accepted_per_step = accept if speculative else 1.0
    tokens_per_chunk = mean([r.tokens_per_chunk for r in ok])
    picked = _gpu_readings(gpu, level, cell)
    prompt_len_checked, prompt_len_off = prompt_len_counts(every_ok)
    # Every request failed: the level failed, whatever the runner recorded.
    status = "failed" if requests and not every_ok else level.status
    reason = None
    if level.status == "interrupted" and level.error:
        # Its server was stopped from outside: the requests it broke are no verdict on it.
        status, reason = "interrupted", level.error
    elif status == "failed":
        # The server's own failure (it crashed mid-level) explains its requests' errors.
        reason = level.error or most_common_error(errors)
    return LevelSummary(
        level=level.level,
        label=level.label,
        concurrency=level.concurrency,
        rate=level.rate,
        status=status,
        reason=reason,
        requests=len(every_ok),
        errors=sum(errors.values()),
        error_kinds=dict(errors),
        duration_s=duration,
        output_tokens=output_tokens,
        # A level with no finished request has no throughput (not 0 tok/s).
        output_tok_s=window.output_tokens / duration if duration > 0 and ok else None,
        request_s=window.completions / duration if duration > 0 and ok else None,
        accept_length=accepted_per_step if speculative else None,
        accept_length_counters=accept_counters,
        accept_length_per_request=per_request_accept,
        accept_length_gauge=after.accept_length_gauge if after else None,
        tokens_per_chunk=tokens_per_chunk,
        verify_tokens_per_step=verify_tokens_per_step(cell),
        accepted_tokens_per_step=accepted_per_step,
        step_time_s=step_time,
        effective_tok_s=(
            accepted_per_step / step_time if step_time and accepted_per_step else None
        ),
        chunk_accept_mismatch=(
            abs(tokens_per_chunk - accept) / accept
            if speculative and tokens_per_chunk and accept
            else None
        ),
        ttft=describe([r.ttft_s for r in ok]),
        itl=describe([r.itl_s for r in ok]),
        e2e=describe([r.e2e_s for r in ok]),
        chunk_gap=describe(gaps),
        gpu_util_pct=mean([t.util_pct for t in picked]),
        gpu_power_w=mean([t.power_w for t in picked]),
        pcie_rx_bytes_s=mean([t.pcie_rx_bytes_s for t in picked]),
        pcie_tx_bytes_s=mean([t.pcie_tx_bytes_s for t in picked]),
        gpu_samples=len(picked),
        correct_drafts_histogram=histogram,
        correct_drafts_requests=len(histograms) if histogram is not None else None,
        accept_drop_position=drop_position(histogram) if histogram is not None else None,
        accept_length_p10=percentile(request_accepts, 10),
        accept_length_p50=percentile(request_accepts, 50),
        accept_length_p90=percentile(request_accepts, 90),
        # Per rank: every finished request over the level's wall time (RANKS_NOTE), so the
        # ranks add up to the level's requests and tokens whatever its window.
        dp_ranks=rank_levels(
            every_ok, level_duration if level_duration > 0 else None, cell.server_dp_size
        ),
        early_stop=level.early_stop,
        achieved_rate=level.achieved_rate,
        sent_rate=level.sent_rate,
        behind=level.behind,
        prompt_len_checked=prompt_len_checked,
        prompt_len_off=prompt_len_off,
        window=window.kind,
        window_note=window.why,
        window_start_s=window.start_s,
        window_end_s=window.end_s,
        counted_requests=len(ok),
        **asdict(
            _slo_figures(
                slo,
                judged,
                duration,
                ok,
                window.output_tokens,
                window.completions,
                level.early_stop or level.behind,
            )
        ),
    )


@dataclass(frozen=True, slots=True)
class SloFigures:
    """A level's figures against its SLO (the LevelSummary fields of the same names); all
    None without an SLO or a measured request."""

    slo_met: int | None = None
    slo_counted: int | None = None
    slo_attainment: float | None = None
    slo_pass: bool | None = None
    slo_ttft_attainment: float | None = None
    slo_itl_attainment: float | None = None
    slo_e2e_attainment: float | None = None
    goodput_tok_s: float | None = None
    goodput_req_s: float | None = None


def _slo_figures(
    slo: Slo | None,
    judged: SloOutcome | None,
    duration: float,
    counted: Sequence[RequestResult],
    window_tokens: float,
    completions: int,
    failed_by: str | None = None,
) -> SloFigures:
    """Goodput is the throughput's share that good requests generated: their output tokens
    over all of the counted requests', times the window's tokens, so it equals throughput
    when every request met the SLO."""
    if slo is None or judged is None or not judged.counted:
        return SloFigures()
    passed = judged.passes(slo)
    if failed_by is not None:
        # A search stopped it once it could no longer reach the attainment, or a rate
        # level's server (or client) fell behind its arrivals.
        passed = False
    by_metric = judged.met_by_metric
    counted_tokens = sum(int(r.output_tokens or 0) for r in counted)
    goodput = (
        window_tokens * judged.good_output_tokens / counted_tokens / duration
        if duration > 0 and counted_tokens
        else None
    )
    return SloFigures(
        slo_met=judged.met,
        slo_counted=judged.counted,
        slo_attainment=judged.attainment,
        slo_pass=passed,
        slo_ttft_attainment=by_metric.get("ttft"),
        slo_itl_attainment=by_metric.get("itl"),
        slo_e2e_attainment=by_metric.get("e2e"),
        goodput_tok_s=goodput,
        # Completions in the window, in the share of the counted requests that were good.
        goodput_req_s=(
            completions * judged.met / len(counted) / duration if duration > 0 and counted else None
        ),
    )


def _gpu_readings(
    gpu: Sequence[RunGpuReading], level: LevelRecord, cell: CellMeta
) -> list[RunGpuReading]:
    """The readings taken while the level ran, of the cell's GPUs (all when not known)."""
    start, end = level.started_wall, level.ended_wall
    if start is None or end is None:
        return []
    gpus = set(cell.gpus)
    return [t for t in gpu if start <= t.t_wall <= end and (not gpus or t.index in gpus)]


def _requests_by_level(run: RunDir) -> dict[tuple[str, int, int], list[RequestResult]]:
    by_level: dict[tuple[str, int, int], list[RequestResult]] = defaultdict(list)
    for row in run.read_jsonl("requests.jsonl"):
        try:
            key = (str(row.get("cell")), int(row.get("level", -1)), int(row.get("attempt", 1)))
            by_level[key].append(RequestResult.from_json(row))
        except (TypeError, ValueError, OverflowError):
            continue  # a line no ddconsole wrote: skipped, not the run
    return by_level


def _level_records(run: RunDir) -> list[LevelRecord]:
    records = []
    for row in run.read_jsonl("levels.jsonl"):
        try:
            records.append(LevelRecord.from_json(row))
        except ValueError:
            continue
    return records


@dataclass(frozen=True, slots=True)
class Judging:
    """How a run's levels are judged: the SLO of each cell's profile, and whether ramp-up
    and drain are counted; from the run's stored request."""

    slos: Mapping[str, Slo | None]
    default: Slo | None
    include_transients: bool = False
    searched: bool = False
    """The run searched for each cell's highest load meeting the SLO (`--find-max`)."""

    def slo(self, profile: str | None) -> Slo | None:
        return self.slos.get(profile or "", self.default)

    @classmethod
    def of(cls, stored: object) -> Judging:
        """From `run.json`'s request (none, or one this ddconsole cannot read: no SLO)."""
        from console.bench.request import BenchRequest, CampaignRequest, request_from_json

        try:
            request = request_from_json(stored) if stored is not None else None
        except ConsoleError:
            request = None
        try:
            if isinstance(request, BenchRequest):
                return cls(
                    {},
                    request.slo_target(),
                    request.include_transients,
                    request.find_max is not None,
                )
            if isinstance(request, CampaignRequest):
                slos = {p: request.slo_target(p) for p in request.profile_slos}
                return cls(
                    slos,
                    request.slo_target(None),
                    request.spec.include_transients,
                    request.spec.find_max is not None,
                )
        except ConsoleError:
            pass  # targets this ddconsole does not read: the levels are shown unjudged
        return cls({}, None)


def summarize_run(run: RunDir) -> RunSummary:
    """The run's summary, computed from its files (readers use `load_summary`)."""
    meta = run.meta()
    records = _level_records(run)
    requests = _requests_by_level(run)
    try:
        gpu = run_gpu_readings(run.path)
    except UnicodeDecodeError as exc:
        raise ConsoleError(
            f"{run.path}: a telemetry file is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    judging = Judging.of(meta.request)
    cells_out = []
    for cell in meta.cells:
        # A level run again after --resume supersedes the earlier attempt.
        latest: dict[int, LevelRecord] = {}
        for record in sorted((r for r in records if r.cell == cell.cell_id), key=lambda r: r.level):
            latest[record.level] = record
        slo = judging.slo(cell.profile)
        if meta.kind == "sglang-bench":
            levels = meta.imported_levels
        else:
            levels = _cell_levels(
                cell, sorted(latest.items()), requests, gpu, slo, judging.include_transients
            )
        cells_out.append(
            CellSummary(
                cell_id=cell.cell_id,
                profile=cell.profile,
                layout=cell.layout,
                variant=cell.variant,
                algorithm=cell.algorithm,
                architecture=cell.architecture,
                ddtree_budget=cell.ddtree_budget,
                tree_budget=cell.tree_budget or cell.ddtree_budget,
                tree_flag=cell.tree_flag or (DDTREE_BUDGET_FLAG if cell.ddtree_budget else None),
                server=cell.server_id or cell.url,
                status=cell.status,
                reason=cell.reason,
                levels=levels,
                slo=None if slo is None else slo.describe(),
                knee=None if slo is None else knee_of(levels, slo, searched=judging.searched),
            )
        )
    cells = _with_speedups(cells_out)
    status = meta.status
    if status == "running" and run.owner_alive() is None:
        status = "interrupted"
    return RunSummary(
        run_id=run.run_id,
        run_dir=str(run.path),
        name=meta.name,
        kind=meta.kind,
        status=status,
        created_wall=meta.created_wall,
        fingerprint=dict(meta.fingerprint or {}),
        time_scale=1.0 if meta.time_scale is None else meta.time_scale,
        workload=None if meta.workload is None else dict(meta.workload),
        cells=cells,
        best=best_per_level(cells),
        findings=tuple(find_all([cell.facts() for cell in cells])),
    )


def _cell_levels(
    cell: CellMeta,
    records: Sequence[tuple[int, LevelRecord]],
    requests: Mapping[tuple[str, int, int], list[RequestResult]],
    gpu: Sequence[RunGpuReading],
    slo: Slo | None,
    include_transients: bool,
) -> tuple[LevelSummary, ...]:
    """A cell's levels, all counted one way: when some closed-loop level was too short for a
    steady window, every level counts every request. A curve whose low loads count a steady
    window and whose high loads count ramp-up and drain would show a step that is the
    method's, not the server's."""

    def summarized(every: bool) -> tuple[LevelSummary, ...]:
        return tuple(
            summarize_level(
                record,
                requests.get((cell.cell_id, index, record.attempt), []),
                cell,
                gpu,
                slo=slo,
                include_transients=every,
            )
            for index, record in records
        )

    levels = summarized(include_transients)
    short = _too_short(levels)
    if not short or not any(lv.window == STEADY for lv in levels):
        return levels
    why = f"{short} too short for a steady state, so each level of the cell counts every request"
    return tuple(replace(lv, window_note=why) for lv in summarized(True))


def _too_short(levels: Sequence[LevelSummary]) -> str:
    """`concurrency 16 and 32 were` for the closed-loop levels without a steady window
    (other than cut-short ones); empty when none."""
    loads = [
        lv.load_label
        for lv in levels
        if lv.window == ALL
        and lv.rate is None
        and lv.status != "interrupted"
        and (lv.window_note or "").startswith("too short")
    ]
    if not loads:
        return ""
    verb = "was" if len(loads) == 1 else "were"
    return f"concurrency {', '.join(loads)} {verb}"


def _with_speedups(cells: Sequence[CellSummary]) -> tuple[CellSummary, ...]:
    """Each level's output tok/s over its `off` twin (same profile, layout and load)."""
    baseline: dict[tuple[str | None, str | None, int | None, float | None], float] = {}
    for cell in cells:
        if cell.is_autoregressive:
            for level in cell.levels:
                if level.output_tok_s and level.status != "interrupted":
                    key = (cell.profile, cell.layout, level.concurrency, level.rate)
                    baseline[key] = level.output_tok_s
    out = []
    for cell in cells:
        levels = []
        for level in cell.levels:
            base = baseline.get((cell.profile, cell.layout, level.concurrency, level.rate))
            # A level cut short (stopped by the user, from here or outside) is no result.
            tok_s = level.output_tok_s if level.status != "interrupted" else None
            speedup = tok_s / base if base and tok_s else None
            levels.append(replace(level, speedup_vs_off=speedup))
        out.append(replace(cell, levels=tuple(levels)))
    return tuple(out)


def best_per_level(cells: Sequence[CellSummary]) -> tuple[BestLevel, ...]:
    best: dict[tuple[int | None, float | None], BestLevel] = {}
    for cell in cells:
        for level in cell.levels:
            tok_s = level.output_tok_s
            if tok_s is None or level.requests == 0 or level.status == "interrupted":
                continue  # a level cut short is no result
            key = (level.concurrency, level.rate)
            if key not in best or tok_s > best[key].output_tok_s:
                best[key] = BestLevel(
                    concurrency=level.concurrency,
                    rate=level.rate,
                    profile=cell.profile,
                    layout=cell.layout,
                    variant=cell.variant,
                    output_tok_s=tok_s,
                )
    return tuple(best[k] for k in sorted(best, key=lambda k: (k[0] or 0, k[1] or 0)))


def write_summaries(run: RunDir, summary: RunSummary | None = None) -> RunSummary:
    """Compute (unless given) and write `summary.json`, `.csv` and `.md`, each atomically."""
    summary = summarize_run(run) if summary is None else summary
    run.write_text(SUMMARY_FILE, json.dumps(summary.to_json(), indent=2, default=str) + "\n")
    run.write_text("summary.csv", to_csv(summary))
    run.write_text("summary.md", to_markdown(summary))
    return summary


# -- the cache of record -----------------------------------------------------------------

# Summaries already read, by folder, with the stat signature they were read under: a screen
# that asks every second gets the same object back without reading a file.
_LOADED: dict[Path, tuple[tuple[int, ...], RunSummary]] = {}
_LOADED_LOCK = threading.Lock()
# One loader per run at a time: screens ask from worker threads, and two threads that both
# found the cache stale would both rebuild it.
_RUN_LOCKS: dict[Path, threading.Lock] = {}


def _sources_signature(path: Path) -> tuple[int, ...] | None:
    """Newest mtime (ns) over the files a summary is built from, and their sizes; None when
    there is no run.json."""
    times: list[int] = []
    sizes: list[int] = []
    names = [*SOURCE_FILES, *sorted(p.name for p in path.glob(TELEMETRY_GLOB))]
    for name in names:
        try:
            stat = (path / name).stat()
        except OSError:
            if name == "run.json":
                return None
            continue
        times.append(stat.st_mtime_ns)
        sizes.append(stat.st_size)
    return (max(times), *sizes)


def _read_cached(run: RunDir, newest_source_ns: int) -> RunSummary | None:
    """`summary.json` when it is strictly newer than every source and of this schema."""
    path = run.path / SUMMARY_FILE
    try:
        if path.stat().st_mtime_ns <= newest_source_ns:
            return None
        return RunSummary.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None  # missing, damaged or foreign: rebuilt, never trusted


def load_summary(run: RunDir) -> RunSummary:
    """The run's summary through its cache of record.

    `summary.json` is returned while it is newer than run.json, levels.jsonl, requests.jsonl
    and the telemetry; otherwise the summary is rebuilt and the files rewritten (unless a
    live campaign owns the run: it writes its own after every level). Raises UnreadableRun
    for a run whose files cannot be read, with the file and the reason.
    """
    with _LOADED_LOCK:
        lock = _RUN_LOCKS.setdefault(run.path, threading.Lock())
    with lock:
        try:
            return _load(run)
        except UnreadableRun:
            raise
        except ConsoleError as exc:
            raise UnreadableRun(run.run_id, exc.message) from None
        except OSError as exc:
            where = exc.filename or run.path
            raise UnreadableRun(run.run_id, f"{where}: {exc.strerror or exc}") from None
        except (ValueError, TypeError, KeyError) as exc:
            raise UnreadableRun(run.run_id, f"{type(exc).__name__}: {exc}") from None


def cached_summary(run: RunDir) -> RunSummary | None:
    """The run's summary when its cache of record is fresh (a few stats and, at most, one
    read of `summary.json`); None when it would have to be rebuilt. Never builds one: the
    flight recorder calls this on the event loop."""
    signature = _sources_signature(run.path)
    if signature is None:
        return None
    with _LOADED_LOCK:
        held = _LOADED.get(run.path)
    key = (*signature, *_summary_stat(run))
    if held is not None and held[0] == key and held[1].status != "running":
        return held[1]
    summary = _read_cached(run, signature[0])
    if summary is None or summary.status == "running":
        return None
    summary = replace(summary, run_dir=str(run.path))
    with _LOADED_LOCK:
        _LOADED[run.path] = (key, summary)
    return summary


def _load(run: RunDir) -> RunSummary:
    signature = _sources_signature(run.path)
    if signature is None:
        return summarize_run(run)  # raises the run's own "unreadable" error
    try:
        summary_stat = (run.path / SUMMARY_FILE).stat()
        key = (*signature, summary_stat.st_mtime_ns, summary_stat.st_size)
    except OSError:
        key = signature
    with _LOADED_LOCK:
        held = _LOADED.get(run.path)
    if held is not None and held[0] == key and held[1].status != "running":
        return held[1]
    summary = _read_cached(run, signature[0])
    if summary is not None:
        summary = replace(summary, run_dir=str(run.path))
        if summary.status == "running" and run.owner_alive() is None:
            summary = None  # its campaign died without saying so: rebuilt as interrupted
    if summary is None:
        summary = summarize_run(run)
        if run.owner_alive() is None:
            try:
                write_summaries(run, summary)
            except RunWriteError:
                pass  # a read-only results folder still shows its runs
            else:
                key = (*signature, *_summary_stat(run))
    with _LOADED_LOCK:
        _LOADED[run.path] = (key, summary)
    return summary


def _summary_stat(run: RunDir) -> tuple[int, int]:
    try:
        stat = (run.path / SUMMARY_FILE).stat()
    except OSError:
        return (0, 0)
    return (stat.st_mtime_ns, stat.st_size)
