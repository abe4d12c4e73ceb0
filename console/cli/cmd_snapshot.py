"""`ddconsole snapshot`, `record` and `replay`: share what the console shows, keep a session.

- snapshot: a headless report (JSON, Markdown, the dashboard as SVG/PNG) of now, or of an
  instant of a recording; no terminal needed (cron, CI, a pipe).
- record: the flight recorder without the TUI.
- replay: the TUI on a recording (or a run directory's telemetry).
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from console.cli import argtypes
from console.core.errors import ConsoleError, UsageError

if TYPE_CHECKING:
    from console.bench.listing import RunRow
    from console.bench.results import RunSummary
    from console.tui.headless import StaticBackend


class RunSource(Protocol):
    """Where runs come from: the results folder (`DiskRuns`) or a recording's backend."""

    def runs(self) -> list[RunRow]: ...

    def run_summary(self, run_id: str) -> RunSummary | None: ...


FORMATS = ("json", "md", "svg", "png")
# What a snapshot is gathered into: its JSON document (the `snapshot.schema.json` form, built
# here, not run data passed on), the static backend the SVG is drawn from, and the newest
# run's summary.
Gathered = tuple[dict[str, Any], "StaticBackend", "RunSummary | None"]
RECENT_RECORDING_S = 600.0


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    snap = verbs.add_parser(
        "snapshot",
        parents=[common],
        help="write a report of now (JSON, Markdown, dashboard SVG/PNG); no terminal needed",
        description="Gathers servers and their plans, the topology, a complete metrics "
        "reading plus the last minutes of history (from this host's flight recordings), and "
        "the latest run's summary. Exits non-zero when there is nothing to report.",
    )
    snap.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    snap.add_argument(
        "--format",
        default=",".join(FORMATS),
        metavar="LIST",
        help="comma-separated: json,md,svg,png (default: all; png is skipped with a note "
        "when cairosvg is missing unless asked for explicitly)",
    )
    snap.add_argument("--from-recording", metavar="FILE", help="a recording or a run directory")
    snap.add_argument("--at", type=argtypes.at_s, metavar="S", help="seconds into the recording")
    snap.add_argument(
        "--history",
        type=argtypes.history_s,
        default=300.0,
        metavar="S",
        help="seconds of history to include (default 300)",
    )
    snap.add_argument("--json", action="store_true", help="print what was written as JSON")
    snap.set_defaults(handler=_snapshot)

    record = verbs.add_parser(
        "record",
        parents=[common],
        help="record GPUs, host and servers to a replayable file (no TUI)",
    )
    record.add_argument(
        "--duration", type=argtypes.duration_s, metavar="S", help="stop after S seconds"
    )
    record.add_argument(
        "--out", metavar="FILE", help="where (default: the state dir's recordings/)"
    )
    record.add_argument("--interval", type=argtypes.interval_s, default=1.0, metavar="S")
    record.add_argument("--json", action="store_true")
    record.set_defaults(handler=_record)

    replay = verbs.add_parser(
        "replay", parents=[common], help="open the console on a recording or a run's telemetry"
    )
    replay.add_argument("file", metavar="FILE", help="a .ddrec.gz recording or a run directory")
    replay.add_argument(
        "--at", type=argtypes.at_s, default=0.0, metavar="S", help="start S seconds in (default 0)"
    )
    replay.add_argument(
        "--speed",
        type=argtypes.speed,
        default=1.0,
        metavar="X",
        help="play X times real time (default 1)",
    )
    replay.add_argument("--paused", action="store_true", help="open paused (space plays)")
    replay.set_defaults(handler=_replay)


def _formats(text: str) -> tuple[list[str], bool]:
    wanted = [f.strip().lower() for f in text.split(",") if f.strip()]
    bad = [f for f in wanted if f not in FORMATS]
    if bad or not wanted:
        raise UsageError(
            f"--format: unknown {', '.join(bad) or 'empty list'}; choose from {','.join(FORMATS)}"
        )
    return wanted, text != ",".join(FORMATS)


def load_recording(path_text: str, *, background: bool = False) -> Any:
    """A recording file, or a run folder's telemetry as a recording. With `background`, a
    recording file returns once its first frames are readable and indexes on (a replay
    opens at once, whatever the file's size)."""
    from console.telemetry.recording import read_recording
    from console.telemetry.run_telemetry import (
        has_telemetry,
        is_telemetry_file,
        recording_from_run,
    )

    path = Path(path_text)
    if path.is_dir() or is_telemetry_file(path):
        # A run's telemetry replays as the run: its servers and GPU names from run.json.
        folder = path if path.is_dir() else path.parent
        if not has_telemetry(folder):
            raise UsageError(f"{path}: no run telemetry (not a run directory)")
        return _with_the_run(recording_from_run(path), folder)
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    return read_recording(path, background=background)


def _with_the_run(recording: Any, folder: Path) -> Any:
    """A run folder's recording listing the run itself, with its summary, as a session
    recording lists the runs it saw (the Runs screen and the snapshot show it)."""
    from console.bench.listing import run_row
    from console.bench.rundir import RunDir
    from console.bench.summary import load_summary
    from console.telemetry.recording import Frame

    frames = [Frame(0.0, "runs", {"v": [run_row(folder).to_json()]})]
    try:
        summary = load_summary(RunDir(folder))
    except ConsoleError:
        summary = None  # an unreadable run lists with its reason and no summary
    if summary is not None:
        frames.append(Frame(0.0, "run_summary", {"id": folder.name, "v": summary.to_json()}))
    recording.frames[:0] = frames
    return recording


def _prefill(store: Any, folder: Path, history_s: float) -> str | None:
    """History from this host's newest flight recording, when it covers the last minutes."""
    from console.telemetry.poller import write_result
    from console.telemetry.recording import SUFFIX, RecordingError, read_recording

    files = (
        sorted(folder.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime)
        if folder.is_dir()
        else []
    )
    if not files:
        return None
    newest = files[-1]
    if time.time() - newest.stat().st_mtime > RECENT_RECORDING_S:
        return None
    try:
        recording = read_recording(newest)
    except RecordingError:
        return None
    end_mono = recording.t0 + recording.duration_s
    if end_mono > time.monotonic() + 1:  # written before a reboot: another clock
        return None
    # Only the polls within the history are read (found by time through the index): a big
    # recording costs its indexing, not a parse of every frame.
    frames, polls = recording.frames, recording.frames.indices("poll")
    since = time.monotonic() - history_s - recording.t0
    first = bisect.bisect_left(polls, frames.applied_at(since - 1e-6))  # all before: older
    for i in polls[first:]:
        frame = frames[i]
        if frame.t >= since:
            try:
                write_result(store, recording.poll_result(frame))
            except (ValueError, KeyError, TypeError):
                continue
    store.commit()
    recording.close()
    return str(newest)


def _latest_run(
    backend: RunSource, damaged: list[tuple[str, str]] | None = None
) -> RunSummary | None:
    """The newest run the backend serves that has a summary (live: the results folder,
    through each run's cache of record; a recording: as it was recorded). `damaged`, when
    given, gets (run id, reason) for each run that could not be read: every run the listing
    marks unreadable, and each newer one whose summary failed."""
    rows = backend.runs()
    if damaged is not None:
        damaged.extend((row.run_id, row.error) for row in rows if row.error is not None)
    for row in reversed(rows):
        if row.error is None:
            try:
                summary = backend.run_summary(row.run_id)
            except ConsoleError as exc:
                if damaged is not None:
                    damaged.append((row.run_id, exc.message))
                continue  # a damaged run: the newest readable one is reported
            if summary is not None:
                return summary
    return None


def _gather_live(args: argparse.Namespace, damaged: list[tuple[str, str]]) -> Gathered:
    """Now, from this host; `damaged` gets the runs that could not be read."""
    import asyncio  # here: completion builds this module's parser and wants it fast

    from console.bench.listing import DiskRuns
    from console.cli.services import Services
    from console.export.snapshot import build_snapshot
    from console.server.session_recorder import server_json
    from console.telemetry.store import TimeSeriesStore
    from console.tui.headless import StaticBackend

    services = Services.create(demo=bool(args.demo))
    store = TimeSeriesStore()
    prefilled = _prefill(store, services.state.recordings, args.history)
    # One reading: latency percentiles since each server started (no window exists yet).
    monitor = services.monitor(store=store, histogram_every=0)

    async def read() -> None:
        try:
            await monitor.once()
        finally:
            await monitor.stop()

    asyncio.run(read())
    statuses = monitor.watcher.current if monitor.watcher else []
    servers = [server_json(s) for s in statuses]
    topology = services.topology()
    now = time.monotonic()
    runs = DiskRuns(services.state.runs)
    latest = _latest_run(runs, damaged)
    damaged.sort()
    document = build_snapshot(
        store=store,
        now_mono=now,
        servers=servers,
        topology=topology.to_json(),
        latest_run=latest,
        demo=services.demo,
        source="live" + (f" + history from {prefilled}" if prefilled else ""),
        history_s=args.history,
    )
    backend = StaticBackend(
        store=store,
        now_mono=now,
        servers=document["servers"],
        topology=topology,
        runs_root=services.state.runs,
        demo=services.demo,
        runs=runs.runs(),
        summaries={latest.run_id: latest} if latest else None,
    )
    return document, backend, latest


def _gather_recording(args: argparse.Namespace) -> Gathered:
    from console.cli.services import Services
    from console.export.snapshot import build_snapshot
    from console.telemetry.store import DEFAULT_CAPACITY
    from console.tui.headless import StaticBackend
    from console.tui.replay import ReplayBackend

    recording = load_recording(args.from_recording)
    services = Services.create(demo=bool(args.demo))
    at = recording.duration_s if args.at is None else args.at
    if at < 0 or at > recording.duration_s + 1e-6:
        damaged = f" (damaged: {recording.damage})" if recording.damage else ""
        raise UsageError(
            f"--at {at:g}: the recording covers 0 to {recording.duration_s:.1f} s{damaged}"
        )
    # A live snapshot's history: what the live store keeps (one seek, no key waiting on it).
    replay = ReplayBackend(
        recording,
        runs_root=services.state.runs,
        position_s=at,
        playing=False,
        history_s=DEFAULT_CAPACITY * float(recording.header.get("interval_s") or 1.0),
    )
    servers = replay.raw_servers()
    latest = _latest_run(replay)
    document = build_snapshot(
        store=replay.store,
        now_mono=replay.now(),
        servers=servers,
        topology=recording.header.get("topology") or {},
        latest_run=latest,
        demo=replay.demo,
        source=f"recording {args.from_recording} at {at:.1f} s",
        history_s=args.history,
        now_wall=recording.t0_wall + at,
    )
    if recording.damage:
        document["recording_damage"] = recording.damage
    backend = StaticBackend(
        store=replay.store,
        now_mono=replay.now(),
        servers=document["servers"],
        topology=replay.topology,
        runs_root=services.state.runs,
        demo=replay.demo,
        runs=replay.runs(),
        summaries={latest.run_id: latest} if latest else None,
    )
    return document, backend, latest


def _snapshot(args: argparse.Namespace) -> int:
    from console.bench.tables import to_markdown as run_markdown
    from console.export.png import png_available, svg_to_png
    from console.export.snapshot import is_empty, to_markdown

    started = time.monotonic()
    formats, explicit = _formats(args.format)
    if args.at is not None and not args.from_recording:
        raise UsageError("--at needs --from-recording FILE")
    if "png" in formats and not explicit and png_available() is not None:
        formats.remove("png")
        print(f"ddconsole: note: skipping png ({png_available()})", file=sys.stderr)
    damaged: list[tuple[str, str]] = []  # runs that could not be read (live only)
    document, backend, latest = (
        _gather_recording(args) if args.from_recording else _gather_live(args, damaged)
    )
    if is_empty(document) and not document["demo"] and not damaged:
        from console.core.via_host import ddconsole_command

        dd = ddconsole_command()
        raise ConsoleError(
            "nothing to snapshot: no GPUs ("
            + (document["topology"].get("gpu_status") or "none found")
            + "), no managed servers and no runs",
            hint=f"launch a server (`{dd} up`), or try `{dd} snapshot --demo`",
        )
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create ({exc.strerror or exc})") from None
    written: list[str] = []

    def write(name: str, text: str) -> None:
        try:
            (out / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConsoleError(f"cannot write {out / name}: {exc.strerror or exc}") from None
        written.append(str(out / name))

    # Each run that could not be read, with its reason: in the JSON as in the report.
    document["unreadable_runs"] = [{"id": run_id, "reason": why} for run_id, why in damaged]
    if "json" in formats:
        write("snapshot.json", json.dumps(document, indent=2, allow_nan=False) + "\n")
    if "md" in formats:
        run_text = None
        if latest is not None:
            # The run's own report, its headings one level down inside the snapshot's.
            run_text = "\n".join(
                "###" + line[1:] if line.startswith("# ") else line
                for line in run_markdown(latest).splitlines()
            )
        markdown = to_markdown(document, latest, run_text, unreadable_runs=damaged)
        if document.get("recording_damage"):
            # Said where the reader looks, not only in snapshot.json.
            markdown += f"\n> **Recording damaged:** {document['recording_damage']}\n"
        write("snapshot.md", markdown)
    if "svg" in formats or "png" in formats:
        from console.tui.headless import render_svg

        svg = render_svg(backend, title=f"ddconsole dashboard: {document['host']['hostname']}")
        if "svg" in formats:
            write("dashboard.svg", svg)
        if "png" in formats:
            svg_to_png(svg, out / "dashboard.png")
            written.append(str(out / "dashboard.png"))
    elapsed = time.monotonic() - started
    if damaged:
        print(_damaged_runs_line(damaged, "md" in formats), file=sys.stderr)
    if document.get("recording_damage"):
        print(
            f"ddconsole: warning: the recording is damaged ({document['recording_damage']}); "
            "the snapshot shows what was readable",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps({"written": written, "seconds": round(elapsed, 2)}))
    else:
        for path in written:
            print(path)
        print(f"snapshot written in {elapsed:.1f} s", file=sys.stderr)
    return 0


def _damaged_runs_line(damaged: list[tuple[str, str]], in_markdown: bool) -> str:
    """One warning line for the runs that could not be read: the first with its reason."""
    from console.core.via_host import ddconsole_command

    run_id, reason = damaged[0]
    more = f", and {len(damaged) - 1} more" if len(damaged) > 1 else ""
    count = f"{len(damaged)} run{'s' if len(damaged) > 1 else ''}"
    where = (
        "listed in snapshot.md"
        if in_markdown
        else f"`{ddconsole_command()} runs show RUN` says why"
    )
    return (
        f"ddconsole: warning: {count} could not be read ({run_id}: "
        f"{' '.join(reason.split())}{more}); {where}"
    )


def _record(args: argparse.Namespace) -> int:
    import asyncio

    from console.cli.services import Services
    from console.server.session_recorder import SessionRecorder

    services = Services.create(demo=bool(args.demo))
    services.state.ensure()
    monitor = services.monitor(interval_s=args.interval)
    path = Path(args.out) if args.out else None
    recorder = SessionRecorder(
        monitor,
        services.state.recordings,
        demo=services.demo,
        topology=services.topology(),
        path=path,
        note="ddconsole record",
    )
    started = time.monotonic()

    async def run() -> None:
        recorder.start()
        if recorder.error:
            raise ConsoleError(recorder.error)
        await monitor.start()
        if not args.json:
            print(f"recording to {recorder.path} (Ctrl-C stops)", file=sys.stderr, flush=True)
        try:
            if args.duration is not None:
                await asyncio.sleep(args.duration)
            else:
                while True:
                    await asyncio.sleep(3600)
        finally:
            await monitor.stop()
            recorder.close()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    files = [str(p) for p in recorder.files]
    size = sum(Path(p).stat().st_size for p in files if Path(p).exists())
    result = {
        "files": files,
        "seconds": round(time.monotonic() - started, 1),
        "bytes": size,
        "error": recorder.error,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"recorded {result['seconds']} s to {', '.join(files)} ({size} bytes)")
        if recorder.error:
            print(f"ddconsole: {recorder.error}", file=sys.stderr)
    return 0 if recorder.error is None else 1


def _replay(args: argparse.Namespace) -> int:
    if args.speed <= 0:
        raise UsageError(f"--speed {args.speed:g}: give a positive factor (1 = real time)")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        from console.core.via_host import ddconsole_command

        raise UsageError(
            "replay opens the console and needs a terminal; for a headless view of one "
            f"instant use `{ddconsole_command()} snapshot --from-recording FILE --at S "
            "--out DIR`"
        )
    from console.cli.services import Services
    from console.tui.app import ConsoleApp
    from console.tui.replay import ReplayBackend

    recording = load_recording(args.file, background=True)
    # While it is indexed, a later --at is followed, and checked once indexing ends.
    if not recording.indexing and not 0 <= args.at <= recording.duration_s + 1e-6:
        raise UsageError(
            f"--at {args.at:g}: the recording covers 0 to {recording.duration_s:.1f} s"
        )
    if not recording.frames:
        raise ConsoleError(
            f"{args.file}: the recording holds no frames"
            + (f" ({recording.damage})" if recording.damage else "")
        )
    services = Services.create(demo=bool(args.demo) or bool(recording.header.get("demo")))
    backend = ReplayBackend(
        recording,
        runs_root=services.state.runs,
        position_s=args.at,
        playing=not args.paused,
        speed=args.speed,
    )
    app = ConsoleApp(backend, warm_up=True)
    try:
        app.run()
    finally:
        recording.close()  # stops a background indexing, deletes the spool
    if recording.damage:
        print(f"ddconsole: {backend.message}", file=sys.stderr)
    return app.return_code or 0
