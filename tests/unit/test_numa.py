"""NUMA nodes from sysfs, including odd hosts; where SGLang binds its schedulers and how the
binding is read back."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.core.units import format_index_set, parse_index_set
from console.hw.discover import scheduler_processes
from console.hw.host import HostReader
from console.hw.numa import pci_numa_node, read_numa_nodes
from console.hw.procs import process_info
from console.hw.simload import SimGpuLoad, SimProcess, SimPublication, publish, read_publications
from console.hw.simulated import SimulatedGpuBackend, SimulatedHostReader
from console.sim.proctree import ProcessTree, Rank, plan_ranks, scheduler_title
from console.telemetry.host_source import HostSource, WatchedServer
from console.telemetry.samples import Binding, HostSample


def _node(root: Path, index: int, cpulist: str, mem_kb: int | None = None) -> None:
    folder = root / f"node{index}"
    folder.mkdir(parents=True)
    (folder / "cpulist").write_text(cpulist + "\n")
    if mem_kb is not None:
        (folder / "meminfo").write_text(f"Node {index} MemTotal:       {mem_kb} kB\n")


def test_two_nodes(tmp_path: Path):
    _node(tmp_path, 0, "0-31,64-95", 1024)
    _node(tmp_path, 1, "32-63,96-127")
    (tmp_path / "online").write_text("0-1\n")
    nodes = read_numa_nodes(tmp_path)
    assert [n.id for n in nodes] == [0, 1]
    assert len(nodes[0].cpus) == 64
    assert nodes[0].memory_total_bytes == 1024 * 1024
    assert nodes[1].memory_total_bytes is None


def test_missing_sysfs_gives_one_node_with_all_cpus(tmp_path: Path):
    nodes = read_numa_nodes(tmp_path / "absent")
    assert len(nodes) == 1
    assert nodes[0].id == 0
    assert len(nodes[0].cpus) >= 1


def test_garbage_cpulist_is_skipped(tmp_path: Path):
    _node(tmp_path, 0, "0-3")
    _node(tmp_path, 1, "banana")
    nodes = read_numa_nodes(tmp_path)
    assert [n.id for n in nodes] == [0]


def test_memory_only_nodes_fall_back(tmp_path: Path):
    _node(tmp_path, 0, "")
    nodes = read_numa_nodes(tmp_path)
    assert len(nodes) == 1
    assert nodes[0].cpus


def test_pci_numa_node(tmp_path: Path):
    dev = tmp_path / "0000:3b:00.0"
    dev.mkdir()
    (dev / "numa_node").write_text("1\n")
    other = tmp_path / "0000:5e:00.0"
    other.mkdir()
    (other / "numa_node").write_text("-1\n")
    assert pci_numa_node("00000000:3B:00.0", tmp_path) == 1
    assert pci_numa_node("00000000:5E:00.0", tmp_path) is None
    assert pci_numa_node(None, tmp_path) is None
    assert pci_numa_node("garbage", tmp_path) is None


def test_index_sets_round_trip():
    assert parse_index_set("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)
    assert format_index_set([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
    assert format_index_set([]) == "-"


# -- SGLang's schedulers, the only NUMA-bound processes ------------------------------------


@pytest.mark.parametrize(
    ("tp", "dp_rank", "tp_rank", "title"),
    [
        # sglang 0.5.23 srt/managers/scheduler.py:6279-6294: " DP{d}" when a DP rank was
        # passed, " TP{t}" when tp > 1, spaces to underscores.
        (1, None, 0, "sglang::scheduler"),
        (4, None, 3, "sglang::scheduler_TP3"),
        (1, 1, 0, "sglang::scheduler_DP1"),
        (2, 1, 0, "sglang::scheduler_DP1_TP0"),
    ],
)
def test_scheduler_titles(tp: int, dp_rank: int | None, tp_rank: int, title: str) -> None:
    assert scheduler_title(tp, dp_rank, tp_rank) == title


def _plan(**overrides: object) -> list[Rank]:
    args: dict[str, Any] = {
        "tp": 4,
        "dp": 1,
        "gpus": [4, 5, 6, 7],
        "numa_node": None,
        "auto_bind": True,
        "gpus_per_node": 4,
        "node_count": 2,
    }
    args.update(overrides)
    return plan_ranks(**args)


def test_ranks_follow_numa_node_by_local_gpu_id() -> None:
    # srt/utils/numa_utils.py:140-141: numa_node[gpu_id], gpu_id counted after
    # CUDA_VISIBLE_DEVICES; DP rank d, TP rank t drives local GPU d*tp + t
    # (data_parallel_controller.py:444-448, 738-743).
    ranks = _plan(tp=2, dp=2, numa_node=[0, 0, 1, 1])
    assert [(r.title, r.gpu, r.numa_node) for r in ranks] == [
        ("sglang::scheduler_DP0_TP0", 4, 0),
        ("sglang::scheduler_DP0_TP1", 5, 0),
        ("sglang::scheduler_DP1_TP0", 6, 1),
        ("sglang::scheduler_DP1_TP1", 7, 1),
    ]
    # Auto binding (SGLANG_AUTO_NUMA_BIND, default on): each GPU's own node.
    assert {r.numa_node for r in _plan()} == {1}
    assert {r.numa_node for r in _plan(auto_bind=False)} == {None}
    assert {r.numa_node for r in _plan(misbind=True)} == {0}
    assert {r.numa_node for r in _plan(numa_node=[0, 0, 0, 0], misbind=True)} == {1}


@pytest.mark.parametrize(
    ("intended", "actual", "matches"),
    [((0,), (0,), True), ((0, 1), (1,), True), ((1,), (0,), False), ((0,), (0, 1), False)],
)
def test_binding_matches_when_schedulers_stay_inside(
    intended: tuple[int, ...], actual: tuple[int, ...], matches: bool
) -> None:
    assert (
        Binding(
            server_id="s", intended_nodes=intended, actual_nodes=actual, actual_cpus=32, processes=4
        ).matches
        is matches
    )


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def test_simulated_host_answers_per_process(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    """A bound scheduler gets its node's CPUs; the leader, the detokenizer and an unbound
    scheduler get every CPU, as SGLang binds nothing else (srt/utils/numa_utils.py:28-68)."""
    bound, unbound, detokenizer = (p.pid for p in sleepers)
    publish(
        tmp_path,
        SimPublication(
            os.getpid(),
            time.time(),
            {1: SimGpuLoad(mem_used_bytes=1), 2: SimGpuLoad(mem_used_bytes=2)},
            "x",
            (
                SimProcess(bound, "sglang::scheduler_TP0", 1, 1, _ticks(bound)),
                SimProcess(unbound, "sglang::scheduler_TP1", 2, None, _ticks(unbound)),
                SimProcess(detokenizer, "sglang::detokenizer", start_ticks=_ticks(detokenizer)),
            ),
            _ticks(os.getpid()),
        ),
    )
    gpus = SimulatedGpuBackend(tmp_path)
    host = SimulatedHostReader(gpus)
    every = set(range(64))
    assert host.process_cpus(bound) == set(range(32, 64))
    assert host.process_cpus(unbound) == every
    assert host.process_cpus(detokenizer) == every
    assert host.process_cpus(os.getpid()) == every
    assert host.process_cpus(1) is None
    # The GPU's process is its scheduler, not the publisher.
    assert [p.pid for p in gpus.compute_processes(1)] == [bound]
    assert [p.pid for p in gpus.compute_processes(2)] == [unbound]


def test_simulated_host_checks_each_published_process_by_start_time(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    """A published pid that now names another process (another start time, as after pid
    reuse) or was published without a start time holds no GPU and has no binding; a
    publication with no such process left is dropped."""
    reused, live, unknown = (p.pid for p in sleepers)
    publish(
        tmp_path,
        SimPublication(
            os.getpid(),
            time.time(),
            {1: SimGpuLoad(mem_used_bytes=1), 2: SimGpuLoad(mem_used_bytes=2)},
            "x",
            (
                SimProcess(reused, "sglang::scheduler_TP0", 1, 1, _ticks(reused) + 1),
                SimProcess(live, "sglang::scheduler_TP1", 2, 1, _ticks(live)),
                SimProcess(unknown, "sglang::detokenizer"),
            ),
            _ticks(os.getpid()),
        ),
    )
    gpus = SimulatedGpuBackend(tmp_path)
    host = SimulatedHostReader(gpus)
    assert gpus.compute_processes(1) == ()
    assert [p.pid for p in gpus.compute_processes(2)] == [live]
    assert host.process_cpus(reused) is None
    assert host.process_cpus(unknown) is None
    assert host.process_cpus(live) == set(range(32, 64))
    # The publisher itself on a reused pid, with nothing it listed still running.
    publish(
        tmp_path,
        SimPublication(
            os.getpid(),
            time.time() - 60,
            {1: SimGpuLoad(mem_used_bytes=1)},
            "x",
            (SimProcess(reused, "sglang::scheduler", 1, 1, _ticks(reused) + 1),),
            _ticks(os.getpid()) + 1,
        ),
    )
    assert read_publications(tmp_path) == []
    assert list(tmp_path.glob("*.json")) == []


def test_real_host_binding_reads_the_schedulers_only() -> None:
    """On this host, with real processes: schedulers under a leader (here the test process,
    which may use every CPU) pinned to one CPU read as one CPU, the leader's own affinity
    left out; with no scheduler there is no binding reading at all (unknown)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs at least two usable CPUs to tell one CPU from all of them")
    cpu = min(os.sched_getaffinity(0))
    assert asyncio.run(_bindings()) == ()
    ranks = _plan(tp=2, gpus=[0, 1])
    tree = ProcessTree(ranks, dp=1, orphans=False)
    tree.start()
    try:
        _wait_titled(2)
        for child in tree.schedulers:
            os.sched_setaffinity(child.pid, {cpu})
        (binding,) = asyncio.run(_bindings())
        assert binding.actual_cpus == 1
        assert binding.processes == 2
    finally:
        tree.kill()


async def _bindings() -> tuple[Binding, ...]:
    """One poll of a fresh host source watching this process as a server's leader."""
    source = HostSource(HostReader(), servers=lambda: [WatchedServer("here", os.getpid(), (0,))])
    try:
        result = await source.poll(0.0)
    finally:
        await source.close()
    (sample,) = result.samples
    assert isinstance(sample, HostSample)
    return sample.bindings


def _wait_titled(count: int) -> None:
    deadline = time.monotonic() + 20
    while len(scheduler_processes(os.getpid())) < count:
        assert time.monotonic() < deadline, "schedulers never retitled themselves"
        time.sleep(0.05)


def _ticks(pid: int) -> int:
    info = process_info(pid)
    assert info is not None
    return info.start_ticks
