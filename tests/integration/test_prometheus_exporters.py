"""GPU exporters read through a real Prometheus, and `export` scraped by one.

The GPU exporters here publish the real exporters' names, types and labels with
prometheus_client on loopback ports (no GPU needed): DCGM's default counters
(NVIDIA/dcgm-exporter etc/default-counters.csv) and nvitop-exporter's unit-suffixed gauges
(XuehaiPan/nvitop nvitop-exporter/nvitop_exporter/exporter.py). What goes through
Prometheus, the query path and the CLI is all real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from console.core.net import free_port
from tests.conftest import REPO
from tests.promproc import running_prometheus
from tests.simproc import SMALL, running_sim

pytestmark = pytest.mark.slow

MIB = 1024 * 1024


class Exporter:
    """A prometheus_client exporter on a free loopback port, stopped with `stop()`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        port = free_port()
        self.httpd, self.thread = start_http_server(port, addr="127.0.0.1", registry=registry)
        self.address = f"127.0.0.1:{port}"

    def stop(self) -> None:
        if self.thread.is_alive():
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread.join(timeout=5)


def dcgm_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    labels = ["gpu", "UUID", "device", "modelName", "Hostname"]
    util = Gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", labels, registry=registry)
    used = Gauge(
        "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", labels, registry=registry
    )
    free = Gauge(
        "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", labels, registry=registry
    )
    power = Gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", labels, registry=registry)
    rx = Gauge("DCGM_FI_PROF_PCIE_RX_BYTES", "PCIe rx bytes/s.", labels, registry=registry)
    for index in (0, 1):
        names = [str(index), f"GPU-{index}", f"nvidia{index}", "NVIDIA H200", "node-a"]
        util.labels(*names).set(40 + index)
        used.labels(*names).set(1000 * (index + 1))
        free.labels(*names).set(5000)
        power.labels(*names).set(300.5)
        rx.labels(*names).set(2.0e9)
    return registry


def nvitop_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    labels = ["hostname", "index", "devicename", "uuid"]
    names = ["node-b", "0", "NVIDIA RTX PRO 6000", "GPU-b0"]
    for name, unit, value in (
        ("gpu_utilization", "Percentage", 75.0),
        ("gpu_memory_used", "MiB", 2048.0),
        ("gpu_memory_total", "MiB", 97887.0),
        ("gpu_power_usage", "W", 450.0),
        ("gpu_pcie_tx_throughput", "MiBps", 12.0),
    ):
        gauge = Gauge(name, name, labels, unit=unit, registry=registry)
        gauge.labels(*names).set(value)
    return registry


METRICS_SCHEMA = json.loads((REPO / "docs" / "metrics.schema.json").read_text())


def _reading(cli, url: str) -> dict:
    """`metrics --once --json --prometheus URL`, checked against its documented schema."""
    result = cli("metrics", "--once", "--json", "--prometheus", url)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    jsonschema.validate(data, METRICS_SCHEMA)
    return data


def _eventually(check, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def test_dcgm_and_nvitop_gpus_through_prometheus(cli, prometheus_binary, tmp_path):
    dcgm, nvitop = Exporter(dcgm_registry()), Exporter(nvitop_registry())
    jobs = {"dcgm": [dcgm.address], "nvitop": [nvitop.address]}
    try:
        with running_prometheus(prometheus_binary, jobs, tmp_path) as prom:
            _check_gpus(cli, prom.url, nvitop)
        # Prometheus gone: a clear error, no traceback.
        result = cli("metrics", "--once", "--prometheus", prom.url)
        assert result.code == 1
        assert "connection refused" in result.err
    finally:
        dcgm.stop()
        nvitop.stop()


def _check_gpus(cli, url: str, nvitop: Exporter) -> None:
    def all_gpus() -> dict:
        reading = _reading(cli, url)
        assert len(reading["gpus"]) == 3, reading["gpus"]
        return reading

    reading = _eventually(all_gpus)
    # Two exporter instances: numbered host by host, sorted by instance.
    by_name: dict[str, list[dict]] = {g["name"]: [] for g in reading["gpus"]}
    for gpu in reading["gpus"]:
        by_name[gpu["name"]].append(gpu)
    h200 = sorted(by_name["NVIDIA H200"], key=lambda g: g["index"])
    [rtx] = by_name["NVIDIA RTX PRO 6000"]
    assert [g["util_pct"] for g in h200] == [40, 41]
    assert h200[1]["mem_used_bytes"] == 2000 * MIB
    assert h200[1]["mem_total_bytes"] == 7000 * MIB
    assert h200[0]["power_w"] == 300.5
    assert h200[0]["pcie_rx_bytes_s"] == 2.0e9
    assert rtx["util_pct"] == 75
    assert rtx["mem_total_bytes"] == 97887 * MIB
    assert rtx["pcie_tx_bytes_s"] == 12 * MIB
    assert {g["state"] for g in reading["gpus"]} == {"ok"}
    assert sorted(g["index"] for g in reading["gpus"]) == [0, 1, 2]
    gpu_source = next(s for s in reading["sources"] if s["name"] == "gpu")
    assert gpu_source["state"] == "ok"
    assert reading["servers"] == []

    # The nvitop exporter stops: its GPU is stale with Prometheus' lastError, the GPU source
    # names the exporter, and the DCGM GPUs keep their numbers.
    nvitop.stop()

    def nvitop_down() -> dict:
        reading = _reading(cli, url)
        gpu_source = next(s for s in reading["sources"] if s["name"] == "gpu")
        assert gpu_source["state"] == "degraded", gpu_source
        return reading

    reading = _eventually(nvitop_down)
    gpu_source = next(s for s in reading["sources"] if s["name"] == "gpu")
    assert f"exporter {nvitop.address} down" in gpu_source["reason"]
    states = {g["index"]: (g["state"], g["reason"]) for g in reading["gpus"]}
    assert states[rtx["index"]][0] == "stale"
    # Prometheus' own lastError (refused, or reset when the exporter closed mid-connection).
    assert f'Get "http://{nvitop.address}/metrics"' in states[rtx["index"]][1]
    assert [states[g["index"]][0] for g in h200] == ["ok", "ok"]


def test_prometheus_scrapes_the_consoles_own_metrics(prometheus_binary, tmp_path):
    port = free_port()
    log = tmp_path / "export.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "console", "export", "--demo", "--prometheus", f":{port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
    try:
        with running_prometheus(
            prometheus_binary, {"ddconsole": [f"127.0.0.1:{port}"]}, tmp_path
        ) as prom:

            def gpu_ok() -> list:
                found = prom.query('ddconsole_source_state{source="gpu",state="ok"}')
                assert found, log.read_text()
                return found

            [series] = _eventually(gpu_ok, 30)
            assert series["value"][1] == "1"
            assert series["metric"]["job"] == "ddconsole"
            stale = prom.query('ddconsole_source_state{state="stale"} == 1')
            assert stale == []
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0, log.read_text()
        assert "serving ddconsole's metrics on http://127.0.0.1:" in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)


def test_export_names_acceptance_per_level_of_the_latest_run(cli, tmp_path):
    eagle = [
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "x",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    ]
    with running_sim([*SMALL, *eagle], tmp_path, speed=20) as sim:
        result = cli(
            "bench", "--url", sim.url, "--concurrency", "1,2", "--requests", "4",
            "--input-len", "32", "--output-len", "64", "--json",
        )  # fmt: skip
        assert result.code == 0, result.err
    [summary_path] = Path(os.environ["XDG_STATE_HOME"]).glob("ddconsole/runs/*/summary.json")
    summary = json.loads(summary_path.read_text())
    [cell] = summary["cells"]
    expected = {str(level["level"]): level["accept_length"] for level in cell["levels"]}
    assert len(expected) == 2
    assert all(value and value > 1 for value in expected.values()), expected
    result = cli("export", "--stdout")
    assert result.code == 0, result.err
    from prometheus_client.parser import text_string_to_metric_families

    found = {
        sample.labels["level"]: sample.value
        for family in text_string_to_metric_families(result.out)
        for sample in family.samples
        if sample.name == "ddconsole_run_level_accept_length"
    }
    assert found == pytest.approx(expected)
    assert f'run_id="{summary["run_id"]}"' in result.out
