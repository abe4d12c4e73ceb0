"""The Runs screen with a fleet, over real asyncssh hosts: a run made on alpha is listed with
HOST alpha next to this host's own run, and its detail is its summary read there; beta,
gone, is one row saying why. A host behind a closed port is a reason, not an exception."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Static

from console.bench.listing import RunRow
from console.cli.services import Services
from console.core.net import free_port
from console.fleet.fleet import Fleet
from console.fleet.hosts import LOCAL_HOST, Host
from console.fleet.remote_runs import HostRuns, RemoteRunError, fetch_runs, fetch_summary
from console.tui.app import ConsoleApp
from console.tui.screens.runs import RunsScreen
from tests.fleet.conftest import SshWorld, write_hosts_toml
from tests.tui.conftest import until

# bench_serving's result line for one level, as `runs import` takes it.
SGLANG_RESULT = {
    "backend": "sglang",
    "max_concurrency": 2,
    "request_rate": float("inf"),
    "completed": 6,
    "duration": 1.5,
    "total_output_tokens": 192,
    "output_throughput": 128.0,
    "request_throughput": 4.0,
    "median_ttft_ms": 20.0,
    "p99_ttft_ms": 30.0,
    "median_tpot_ms": 5.0,
    "p99_tpot_ms": 6.0,
    "server_info": {"served_model_name": "qwen3.6-27b"},
}


def _rows(table: DataTable[object]) -> list[list[str]]:
    return [
        [str(getattr(cell, "plain", cell)) for cell in table.get_row_at(index)]
        for index in range(table.row_count)
    ]


def _detail(screen: RunsScreen) -> str:
    console = Console(width=200, record=True)
    console.print(screen.query_one("#detail-text", Static).content)
    return console.export_text()


@pytest.mark.slow
async def test_runs_screen_lists_and_shows_another_hosts_run(
    ssh_world: SshWorld, tmp_path: Path, cli
) -> None:
    write_hosts_toml(ssh_world)
    await asyncio.to_thread(ssh_world.hosts["beta"].stop)  # beta is gone from the start
    result_file = tmp_path / "sglang.jsonl"
    result_file.write_text(json.dumps(SGLANG_RESULT) + "\n")
    local = cli("--demo", "runs", "import", str(result_file), "--name", "here", "--json")
    assert local.code == 0, local.err
    local_id = json.loads(local.out)["run_id"]

    # The run is made on alpha as its own shell makes it (its environment, its state dir)
    # while the console starts.
    alpha = ssh_world.hosts["alpha"]
    made = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "console", "--demo", "runs", "import", str(result_file)),
        *("--name", "there", "--json"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=alpha.env,
        cwd=alpha.root,
    )
    backend = Services.create(demo=True).live_backend(recordings=None)
    app = ConsoleApp(backend)
    async with app.run_test(size=(160, 50)) as pilot:
        out, err = await asyncio.wait_for(made.communicate(), 90)
        assert made.returncode == 0, err.decode()
        remote_id = json.loads(out)["run_id"]
        await until(pilot, lambda: backend.fleet_now() is not None, 30, "the fleet")

        await pilot.press("r")
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        table = screen.query_one("#runs", DataTable)

        def listed() -> bool:
            rows = _rows(table)
            return any(r[0] == "alpha" and r[1] == remote_id for r in rows) and any(
                r[0] == "beta" and r[1].startswith("beta: stale: ") for r in rows
            )

        await until(pilot, listed, 60, "alpha's run and beta's reason listed")
        rows = _rows(table)
        assert rows[0][:2] == ["local", local_id]
        assert [r[0] for r in rows] == ["local", "alpha", "beta"]

        table.move_cursor(row=[r[1] for r in rows].index(remote_id))
        await until(pilot, lambda: "on host alpha" in _detail(screen), 60, "alpha's run shown")
        text = _detail(screen)
        assert screen.summary is not None
        assert screen.summary.run_id == remote_id
        assert f"{remote_id}  there  [done]" in text, text  # its id, name and status
        # Its level's output tok/s, from the summary read on alpha.
        assert "best per level: 2: the server 128.0 tok/s" in text, text


async def test_a_host_that_cannot_be_reached_is_a_reason(tmp_path: Path) -> None:
    gone = Host("gone", f"tester@127.0.0.1:{free_port()}")
    fleet = Fleet([LOCAL_HOST, gone], connect_timeout_s=5)
    kept = RunRow(
        run_id="20261201-090000-kept",
        path=tmp_path,
        name=None,
        kind="bench",
        status="done",
        cells_done=1,
        cells=1,
        created_wall=None,
        progress=None,
    )
    try:
        listed = await fetch_runs(fleet, "gone", HostRuns("gone", (kept,)))
        assert listed.rows == (kept,)  # the last good listing stays, with the reason
        assert listed.error is not None
        assert listed.error.startswith("stale: cannot connect to "), listed.error
        assert "refused" in listed.error
        with pytest.raises(RemoteRunError, match=r"^stale: "):
            await fetch_summary(fleet, "gone", kept.run_id)
    finally:
        await fleet.stop()
