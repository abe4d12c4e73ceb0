"""Create a run from a typed request, and start it detached, in one place for both front ends.

`create_run` makes the run folder and stores the request in its `run.json`; `detach` starts
`python -m console run-request RUN_DIR` in its own session (it outlives the shell or the
TUI that started it), and that runner reads the request back from `run.json`. The runner
itself is assembled in `console/cli/runner.py`: it needs the server manager and the profile
catalog, which this package does not import.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from console.bench.results import JsonDict, JsonObject
from console.bench.rundir import RunDir
from console.bench.runmeta import RunMeta
from console.bench.runner_verb import RUNNER_VERB
from console.core.errors import ConsoleError

if TYPE_CHECKING:
    # Imported where used: `ddconsole --help` registers the runner's verb from this module
    # and must not load pydantic and httpx.
    from console.bench.request import RunRequest

CLAIM_TIMEOUT_S = 10.0
"""How long a detached runner has to claim its run before `detach` gives up waiting."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Detached:
    """A run started in the background."""

    run_id: str
    run_dir: Path
    pid: int | None
    """The runner's pid once it claimed the run (None if it had not within 10 s)."""

    def to_json(self) -> JsonDict:  # `--detach --json` output
        return {
            "run_id": self.run_id,
            "run_dir": str(self.run_dir),
            "detached": True,
            "pid": self.pid,
        }


def create_run(
    request: RunRequest,
    *,
    runs_root: Path,
    name: str,
    demo: bool,
    fingerprint: JsonObject | None = None,
    argv: Sequence[str] | None = None,
) -> RunDir:
    """A new run folder whose `run.json` holds `request` (and the workload and levels that
    summaries read). `demo` says which services the runner uses; `fingerprint` is written
    by the runner when not given here; `argv` is the command line that asked (the CLI's)."""
    from console.bench.request import CampaignRequest

    # A bad dataset file (or workload) fails here, before a run folder exists: no empty
    # `created 0/0` run is left behind (cheap without a dataset: no prompts are generated).
    request.workload()
    meta = RunMeta(
        kind=request.kind,
        status="created",
        demo=demo,
        request=request.to_json(),
        workload=request.workload_json(),
        fingerprint=fingerprint,
        argv=None if argv is None else tuple(argv),
    )
    if isinstance(request, CampaignRequest):
        # The keys campaign runs always had: `--resume` of a run made before `request`
        # existed reads its spec from here.
        meta = replace(
            meta, spec=request.spec.model_dump(mode="json"), campaign_file=request.source
        )
    else:
        meta = replace(meta, levels=tuple(vars(level) for level in request.levels()))
    return RunDir.create(runs_root, name, meta)


def stored_request(run: RunDir) -> RunRequest:
    """The request a run was made from; a campaign run made before requests were stored
    gives its spec."""
    from console.bench.request import CampaignRequest, request_from_json

    meta = run.meta()
    if meta.request is not None:
        return request_from_json(dict(meta.request))
    if meta.kind == "campaign" and meta.spec is not None:
        return CampaignRequest.from_json({"spec": meta.spec, "source": meta.campaign_file})
    raise ConsoleError(f"run {run.run_id} holds no request to run (made by an older ddconsole)")


def stored_demo(run: RunDir) -> bool:
    """Whether the run belongs to demo mode (its own key, else its fingerprint's)."""
    return run.meta().is_demo


def detach(run: RunDir) -> Detached:
    """Start the runner for `run` in its own session and wait until it claims the run.
    Its output goes to the run's `console.log`. ConsoleError when it exits before claiming,
    with the log's last line."""
    command = [sys.executable, "-m", "console", RUNNER_VERB, str(run.path)]
    attempts_before = len(run.meta().attempts)
    log_path = run.path / "console.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + CLAIM_TIMEOUT_S
    while run.owner_alive() is None and time.monotonic() < deadline:
        if process.poll() is not None and run.owner_alive() is None:
            meta = run.meta()
            if len(meta.attempts) > attempts_before:
                break  # it claimed the run and ran to its end already
            lines = log_path.read_text(errors="replace").strip().splitlines()
            last = lines[-1].removeprefix("ddconsole: error: ") if lines else "no output"
            reason = meta.error or last
            raise ConsoleError(f"run {run.run_id} did not start: {reason} (log: {log_path})")
        time.sleep(0.05)
    # A long-lived caller (the TUI) reaps the runner when it ends, leaving no zombie.
    threading.Thread(target=process.wait, name=f"reap-{run.run_id}", daemon=True).start()
    return Detached(run_id=run.run_id, run_dir=run.path, pid=run.owner_alive())
