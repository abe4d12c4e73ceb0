"""NUMA nodes from sysfs, including odd hosts."""

from __future__ import annotations

from pathlib import Path

from console.core.units import format_index_set, parse_index_set
from console.hw.numa import pci_numa_node, read_numa_nodes


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
