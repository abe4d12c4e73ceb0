"""The Bench screen's other hosts without a link: `g`'s request as the CLI flags that
reproduce it there (each parsed back by the real `bench` parser to the same request), the
answers of `bench --detach --json` and `runs stop --json` read into outcomes, and the ready
servers of a reading as `ddconsole --demo metrics --json` prints it offered as targets."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from console.bench.cancel import StoppedRun
from console.bench.launch import Detached
from console.bench.request import BenchRequest
from console.cli import cmd_bench
from console.fleet.link import RemoteResult
from console.fleet.remote_bench import bench_args, read_started, read_stopped, stop_args
from console.tui.bench_hosts import campaign_note, remote_bench_detail, remote_targets
from console.tui.remote_rows import remote_hosts
from tests.unit.test_remote_rows import READY, reading, summary

SERVER = READY["id"]


def _parsed(args: list[str]) -> argparse.Namespace:
    """`args` as the real `ddconsole bench` parser reads them."""
    parser = argparse.ArgumentParser()
    cmd_bench.register(parser.add_subparsers(), argparse.ArgumentParser(add_help=False))
    return parser.parse_args(args)


def test_g_request_becomes_the_flags_that_reproduce_it() -> None:
    # What `g` builds from the demo load fields, with an SLO typed in.
    request = BenchRequest(
        server_id=SERVER, concurrency=(1, 4), requests=8, input_len=64, output_len=32, slo="ttft=2s"
    ).validate()
    args, left = bench_args(request)
    assert left == []
    assert args == [
        "bench",
        f"--server={SERVER}",
        "--concurrency=1,4",
        "--requests=8",
        "--input-len=64",
        "--output-len=32",
        "--slo=ttft=2s",
        "--detach",
        "--json",
    ]
    ns = _parsed(args)
    assert (ns.server, ns.concurrency, ns.requests) == (SERVER, [1, 4], 8)
    assert (ns.input_len, ns.output_len, ns.slo) == (64, 32, "ttft=2s")
    assert ns.detach
    assert ns.json
    # The defaults are left to the CLI there: no flag for what it would do anyway.
    assert not any(a.startswith(("--warmup", "--seed", "--attainment")) for a in args)


def test_every_flagged_field_goes_and_local_files_are_named() -> None:
    request = BenchRequest(
        server_id=SERVER,
        rates=(0.5, 2.0),
        duration_s=30.0,
        warmup=3,
        seed=7,
        flush_cache=True,
        endpoint="completions",
        attainment=0.9,
        include_transients=True,
        name="night",
    )
    args, left = bench_args(request)
    ns = _parsed(args)
    assert (ns.rate, ns.duration, ns.warmup, ns.seed) == ([0.5, 2.0], 30.0, 3, 7)
    assert ns.flush_cache
    assert ns.include_transients
    assert (ns.endpoint, ns.attainment, ns.name) == ("completions", 0.9, "night")
    assert left == []
    _, left = bench_args(replace(request, dataset="/data/prompts.jsonl"))
    assert left == ["dataset /data/prompts.jsonl (a file on this host)"]


@pytest.mark.parametrize("server_id", [None, "--all", "a/b", "two words"])
def test_an_id_the_cli_there_could_misread_is_refused(server_id: str | None) -> None:
    with pytest.raises(ValueError, match="not a server id"):
        bench_args(BenchRequest(server_id=server_id, url=None if server_id else "http://x:1"))


def test_a_started_run_is_read_from_the_clis_answer() -> None:
    run_dir = Path("/state/runs/20261206-071500-bench-qwen")
    answer = Detached(run_id=run_dir.name, run_dir=run_dir, pid=4242).to_json()
    started = read_started("alpha", RemoteResult(0, json.dumps(answer) + "\n", ""))
    assert started.ok
    assert started.run_id == "20261206-071500-bench-qwen"
    assert started.message == "run 20261206-071500-bench-qwen on alpha (detached, pid 4242 there)"
    refused = read_started(
        "alpha", RemoteResult(2, "", "ddconsole: error: no server 'x': no managed servers\n")
    )
    assert not refused.ok
    assert refused.run_id is None
    assert refused.message == "benchmark on alpha not started: no server 'x': no managed servers"
    damaged = read_started("alpha", RemoteResult(0, json.dumps({"run_id": "../up"}), ""))
    assert not damaged.ok
    assert "names no run" in damaged.message


def test_a_stop_is_read_from_the_clis_answer() -> None:
    run_id = "20261206-071500-bench-qwen"
    assert stop_args(run_id)[-2:] == ["--", run_id]
    stopped = StoppedRun(
        run_id=run_id,
        run_dir=Path("/state/runs") / run_id,
        kind="bench",
        pid=4242,
        status="interrupted",
        cells_done=0,
        cells=1,
        resume=None,
    )
    answer = stopped.to_json()
    ok, line = read_stopped("alpha", run_id, RemoteResult(0, json.dumps(answer), ""))
    assert ok
    assert line == f"alpha: stopped run {run_id}: 0 of 1 cell done; results in /state/runs/{run_id}"
    # What `runs stop` there says of a run that has ended: the reason, then a hint.
    ended = (
        f"ddconsole: error: run {run_id} is not running (done): nothing to stop\n"
        f"  hint: `ddconsole runs show {run_id}` shows what it did\n"
    )
    ok, line = read_stopped("alpha", run_id, RemoteResult(1, "", ended))
    assert not ok
    assert line == (
        f"stop {run_id} on alpha failed: run {run_id} is not running (done): nothing to stop"
    )
    other = {**answer, "run_id": "20261206-000000-other"}
    ok, line = read_stopped("alpha", run_id, RemoteResult(0, json.dumps(other), ""))
    assert not ok
    assert "answered for '20261206-000000-other'" in line


def test_ready_servers_of_other_hosts_are_targets_and_a_stale_host_a_note() -> None:
    data = {"alpha": reading(), "beta": reading()}
    hosts = remote_hosts(
        [summary("local"), summary("alpha"), summary("beta", "stale", "connection lost")],
        data.get,
    )
    targets = remote_targets(hosts)
    # alpha's ready server (its stopped one is not a target); beta, stale, is one note.
    assert [(t.key, t.host, t.server is not None) for t in targets] == [
        (f"remote:alpha/{SERVER}", "alpha", True),
        ("host:beta", "beta", False),
    ]
    assert targets[0].label.plain == f"alpha  {SERVER}  off  :39925"
    assert targets[1].label.plain == "beta  stale: connection lost"


def test_what_the_screen_says_about_another_host() -> None:
    assert "ddconsole --host alpha campaign FILE.toml --detach" in campaign_note("alpha")
    detail = remote_bench_detail(
        "alpha", ["bench", f"--server={SERVER}", "--detach"], ["dataset d (a file on this host)"]
    )
    assert detail.splitlines() == [
        f"It runs detached on alpha: ddconsole --host alpha bench --server={SERVER} --detach",
        "Not carried there: dataset d (a file on this host).",
        "x on its row stops it there.",
    ]
