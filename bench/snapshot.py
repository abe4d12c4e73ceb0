"""How long `ddconsole snapshot --demo` takes as cron or CI runs it: no terminal at all.

Each round is a fresh process (interpreter start and imports included) with stdin from
/dev/null and stdout/stderr to pipes, writing every format (json, md, svg, png) into a new
folder. Budget: <= 5 s.

    python bench/snapshot.py [--rounds 5] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import update_results


def one_round(work: Path, index: int) -> float:
    out = work / f"snap-{index}"
    env = dict(os.environ, XDG_STATE_HOME=str(work), XDG_CONFIG_HOME=str(work))
    env.pop("TERM", None)
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "console", "snapshot", "--demo", "--out", str(out)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    elapsed = time.monotonic() - started
    if completed.returncode != 0:
        sys.exit(f"snapshot failed: {completed.stderr.strip()}")
    written = sorted(p.name for p in out.iterdir())
    if written != ["dashboard.png", "dashboard.svg", "snapshot.json", "snapshot.md"]:
        sys.exit(f"snapshot wrote {written}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ddconsole-bench-snapshot-"))
    times = [one_round(work, index) for index in range(args.rounds)]
    body = (
        "`python bench/snapshot.py`: `ddconsole snapshot --demo --out DIR` in a fresh process "
        "with no terminal\n(stdin /dev/null, output to pipes), all four formats, "
        f"{args.rounds} rounds, {os.cpu_count()} CPUs.\n\n"
        f"Wall time per snapshot: median **{statistics.median(times):.2f} s**, "
        f"max {max(times):.2f} s ({', '.join(f'{t:.2f}' for t in times)}); budget <= 5 s.\n"
    )
    print(body)
    if not args.no_write:
        update_results("Snapshot (issue 8)", body)


if __name__ == "__main__":
    main()
