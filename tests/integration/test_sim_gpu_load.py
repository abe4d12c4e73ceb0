"""A simulated server's load shows up on the simulated host's GPUs, through console.hw."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from console.hw.procs import cmdline, process_info
from console.hw.simulated import GPU_MEMORY_BYTES, IDLE_MEMORY_BYTES, SimulatedGpuBackend
from tests.simproc import QWEN, running_sim


def test_load_appears_on_the_servers_gpus_only(tmp_path: Path):
    folder = tmp_path / "sim-gpu"
    backend = SimulatedGpuBackend(folder)
    env = {"DDCONSOLE_SIM_GPU_DIR": str(folder), "CUDA_VISIBLE_DEVICES": "4,5"}
    with running_sim([*QWEN, "--tp-size", "2"], tmp_path, speed=2, env=env) as sim:
        stop = threading.Event()

        def load() -> None:
            with httpx.Client(base_url=sim.url, timeout=30) as client:
                while not stop.is_set():
                    client.post(
                        "/generate",
                        json={
                            "input_ids": [1] * 32,
                            "sampling_params": {"max_new_tokens": 64, "ignore_eos": True},
                        },
                    )

        worker = threading.Thread(target=load)
        worker.start()
        try:
            time.sleep(2.5)
            busy = backend.read(4)
            other = backend.read(5)
            idle = backend.read(0)
            first_tx = busy.pcie_tx_bytes_total
            time.sleep(1.2)
            later_tx = backend.read(4).pcie_tx_bytes_total
        finally:
            stop.set()
            worker.join()
        procs = backend.compute_processes(4)
        owners = {gpu: backend.compute_processes(gpu)[0].pid for gpu in (4, 5)}
        titles = {gpu: cmdline(pid) for gpu, pid in owners.items()}
        parents = {process_info(pid).ppid for pid in owners.values()}  # type: ignore[union-attr]
    assert busy.util_pct is not None
    assert busy.util_pct > 50
    assert other.util_pct == busy.util_pct  # both GPUs of the TP group
    # Weights (54 GB / 2) plus the KV pool sit on each of the group's GPUs.
    assert busy.mem_used_bytes is not None
    assert busy.mem_used_bytes > 60e9
    assert busy.mem_used_bytes <= GPU_MEMORY_BYTES
    assert busy.power_w is not None
    assert busy.power_w > 200
    assert busy.pcie_gen_current == 5
    assert later_tx is not None
    assert first_tx is not None
    assert later_tx > first_tx  # all-reduce traffic keeps counting
    assert idle.util_pct == 0
    assert idle.mem_used_bytes == IDLE_MEMORY_BYTES
    assert idle.pcie_gen_current == 1  # idle links train down to save power
    # As NVML shows on a real host, each GPU's process is the scheduler of the rank on it,
    # not the leader (sglang 0.5.23 srt/managers/scheduler.py:6294, 6362).
    assert [p.pid for p in procs] == [owners[4]]
    assert titles == {4: "sglang::scheduler_TP0", 5: "sglang::scheduler_TP1"}
    assert parents == {sim.proc.pid}
    # After the server exits its load disappears.
    deadline = time.monotonic() + 5
    while backend.compute_processes(4) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert backend.compute_processes(4) == ()
