"""How a run's summary prints in the terminal; `bench`, `campaign` and `runs` share it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.cli.render import table

if TYPE_CHECKING:
    from console.bench.compare import CompareResult
    from console.bench.results import RunSummary


def print_summary(summary: RunSummary) -> None:
    from console.bench.tables import (
        METRIC_NOTE,
        SUMMARY_HEADERS,
        acceptance_lines,
        best_line,
        headers,
        judged,
        knee_lines,
        level_notes,
        rank_lines,
        scaling_tables,
        slo_rows,
        slo_title,
        slo_view,
        summary_rows,
        window_line,
        workload_line,
    )

    scale = summary.time_scale
    note = f"  (simulator time x{scale:g})" if scale != 1 else ""
    print(f"run {summary.run_id}: {summary.name} [{summary.status}]{note}")
    sent = workload_line(summary)
    if sent:
        print(sent)
    print(table(list(SUMMARY_HEADERS), summary_rows(summary)))
    print(METRIC_NOTE)
    window = window_line(summary)
    if window:
        print(window)
    for line in level_notes(summary):
        print(f"  {line}")
    if judged(summary):
        view = slo_view(summary)
        print(f"\n{slo_title(summary)}:")
        print(table(list(headers(view)), slo_rows(summary)))
        for line in knee_lines(summary):
            print(f"  {line}")
    ranks = rank_lines(summary)
    if ranks:
        print("\nper DP rank (requests, output tok/s, tok/s per request, acceptance):")
        print("\n".join(f"  {line}" for line in ranks))
    for side in scaling_tables(summary):
        print(f"\n{side.title}:")
        print(table(list(side.headers), side.rows))
    for finding in summary.findings:
        print(f"\n* {finding.kind}: {finding.message}")
    if summary.best:
        print(f"\nbest per level: {best_line(summary)}")
    accepted = acceptance_lines(summary)
    if accepted:
        print("\nacceptance distribution (accepted drafts per verify step):")
        print("\n".join(f"  {line}" for line in accepted))
    print(f"\nfiles: {summary.run_dir}")


def print_compare(result: CompareResult) -> None:
    from console.bench.compare_table import (
        compare_headers,
        compare_text_rows,
        noise_line,
        only_lines,
        run_lines,
    )

    print("\n".join(run_lines(result)))
    if result.rows:
        print(table(compare_headers(result), compare_text_rows(result)))
        print(noise_line(result))
    else:
        print("no cell and level in common")
    for line in only_lines(result):
        print(line)
