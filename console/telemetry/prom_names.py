"""Which exporters' series mean which GPU reading, in the console's units (pure).

Two GPU exporters are understood:
- NVIDIA's DCGM exporter, default counters (NVIDIA/dcgm-exporter etc/default-counters.csv at
  d5e5f51, lines 6-7, 11, 14, 23-24, 45-47, 97-98): `DCGM_FI_*` gauges labelled `gpu` (the
  index), `UUID`, `modelName`, `Hostname`. Framebuffer sizes are MiB; the DCP PCIe gauges
  `DCGM_FI_PROF_PCIE_{TX,RX}_BYTES` are bytes per second.
- nvitop-exporter (XuehaiPan/nvitop nvitop-exporter/nvitop_exporter/exporter.py at 3e797b2,
  lines 238-357): gauges declared with a `unit`, which prometheus_client appends to the name
  (`gpu_utilization_Percentage`, `gpu_memory_used_MiB`, `gpu_pcie_rx_throughput_MiBps`),
  labelled `hostname`, `index`, `devicename`, `uuid`.

SGLang's own names are read as the direct scrape reads them (console.telemetry.sglang_source).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class GpuMetric:
    """One exporter series: the GpuSample field it fills and the factor to the field's unit."""

    name: str
    field: str
    scale: float = 1.0
    exporter: str = "dcgm"


GPU_METRICS: tuple[GpuMetric, ...] = (
    GpuMetric("DCGM_FI_DEV_GPU_UTIL", "util_pct"),
    GpuMetric("DCGM_FI_DEV_MEM_COPY_UTIL", "mem_util_pct"),
    GpuMetric("DCGM_FI_DEV_FB_USED", "mem_used_bytes", MIB),
    GpuMetric("DCGM_FI_DEV_FB_FREE", "mem_free_bytes", MIB),
    GpuMetric("DCGM_FI_DEV_FB_RESERVED", "mem_reserved_bytes", MIB),
    GpuMetric("DCGM_FI_DEV_POWER_USAGE", "power_w"),
    GpuMetric("DCGM_FI_DEV_GPU_TEMP", "temp_c"),
    GpuMetric("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz"),
    GpuMetric("DCGM_FI_DEV_MEM_CLOCK", "mem_clock_mhz"),
    GpuMetric("DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_bytes_s"),
    GpuMetric("DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_bytes_s"),
    GpuMetric("gpu_utilization_Percentage", "util_pct", exporter="nvitop"),
    GpuMetric("gpu_memory_utilization_Percentage", "mem_util_pct", exporter="nvitop"),
    GpuMetric("gpu_memory_used_MiB", "mem_used_bytes", MIB, "nvitop"),
    GpuMetric("gpu_memory_total_MiB", "mem_total_bytes", MIB, "nvitop"),
    GpuMetric("gpu_power_usage_W", "power_w", exporter="nvitop"),
    GpuMetric("gpu_power_limit_W", "power_limit_w", exporter="nvitop"),
    GpuMetric("gpu_temperature_C", "temp_c", exporter="nvitop"),
    GpuMetric("gpu_clock_sm_MHz", "sm_clock_mhz", exporter="nvitop"),
    GpuMetric("gpu_clock_memory_MHz", "mem_clock_mhz", exporter="nvitop"),
    GpuMetric("gpu_pcie_tx_throughput_MiBps", "pcie_tx_bytes_s", MIB, "nvitop"),
    GpuMetric("gpu_pcie_rx_throughput_MiBps", "pcie_rx_bytes_s", MIB, "nvitop"),
)
BY_NAME = {metric.name: metric for metric in GPU_METRICS}

INDEX_LABELS = {"dcgm": "gpu", "nvitop": "index"}
"""The label holding the GPU's index, per exporter."""
NAME_LABELS = {"dcgm": "modelName", "nvitop": "devicename"}
"""The label holding the device's product name, per exporter."""

GPU_SELECTOR = '{__name__=~"' + "|".join(metric.name for metric in GPU_METRICS) + '"}'
"""One PromQL selector for every GPU series either exporter publishes."""


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One (instance, index) GPU's fields in the console's units, as exporters reported."""

    instance: str
    index: int
    name: str | None
    fields: dict[str, float]

    def value(self, field: str) -> float | None:
        return self.fields.get(field)

    def mem_total_bytes(self) -> float | None:
        """nvitop reports the total; DCGM's default counters give used + free + reserved."""
        total = self.fields.get("mem_total_bytes")
        if total is not None:
            return total
        parts = [self.fields.get(k) for k in ("mem_used_bytes", "mem_free_bytes")]
        if any(p is None for p in parts):
            return None
        return sum(p for p in parts if p is not None) + self.fields.get("mem_reserved_bytes", 0.0)


def gpu_readings(series: list[tuple[dict[str, str], float]]) -> list[GpuReading]:
    """Group exporter series by (instance, GPU index) into readings; a series of an unknown
    name, without an integer index or without a finite value is left out. Where both
    exporters report a field for one GPU, DCGM's value is kept (it is listed first)."""
    found: dict[tuple[str, int], tuple[str | None, dict[str, float]]] = {}
    order = {metric.name: i for i, metric in enumerate(GPU_METRICS)}
    for labels, value in sorted(series, key=lambda s: order.get(s[0].get("__name__", ""), 99)):
        metric = BY_NAME.get(labels.get("__name__", ""))
        if metric is None or math.isnan(value) or math.isinf(value):
            continue
        index_text = labels.get(INDEX_LABELS[metric.exporter], "")
        if not index_text.isdigit():
            continue
        key = (labels.get("instance", ""), int(index_text))
        name, fields = found.setdefault(key, (labels.get(NAME_LABELS[metric.exporter]), {}))
        if name is None and labels.get(NAME_LABELS[metric.exporter]):
            found[key] = (labels[NAME_LABELS[metric.exporter]], fields)
        fields.setdefault(metric.field, value * metric.scale)
    return [
        GpuReading(instance, index, name, fields)
        for (instance, index), (name, fields) in sorted(found.items())
    ]
