"""How a run's summary prints in the terminal; `bench`, `campaign` and `runs` share it."""

from __future__ import annotations

from typing import Any

from console.cli.render import table


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
