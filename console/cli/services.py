"""What a command works with, real or demo: state paths, profiles, GPU backend, topology."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from console.core.paths import StatePaths
from console.hw.backend import GpuBackend
from console.hw.numa import read_numa_nodes
from console.hw.nvml import NvmlBackend
from console.hw.simulated import SimulatedGpuBackend, SimulatedHostReader
from console.profiles.loader import ProfileCatalog
from console.topology.discover import discover
from console.topology.model import Topology

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet, LocalReading
    from console.server.manager import ServerManager
    from console.server.monitor import Monitor
    from console.telemetry.host_source import HostBackend
    from console.telemetry.store import TimeSeriesStore
    from console.tui.live import LiveBackend


@dataclass
class Services:
    """Built once per command; demo mode swaps GPUs for the simulated host."""

    demo: bool
    state: StatePaths
    prometheus: str | None = None
    """Read SGLang and GPU series through this Prometheus (`ddconsole --prometheus URL`)
    instead of this host's NVML; None reads this host."""
    catalog: ProfileCatalog = field(default_factory=ProfileCatalog)
    _backend: GpuBackend | None = None
    _topology: Topology | None = None
    _host: HostBackend | None = None

    @classmethod
    def create(cls, demo: bool, prometheus: str | None = None) -> Services:
        return cls(demo=demo, state=StatePaths.for_mode(demo), prometheus=prometheus)

    @property
    def gpu_backend(self) -> GpuBackend:
        if self._backend is None:
            if self.demo:
                self._backend = SimulatedGpuBackend(self.state.sim_gpu)
            else:
                self._backend = NvmlBackend()
        return self._backend

    @property
    def host_backend(self) -> HostBackend:
        if self._host is None:
            backend = self.gpu_backend
            if isinstance(backend, SimulatedGpuBackend):
                self._host = SimulatedHostReader(backend)
            else:
                from console.hw.host import HostReader

                self._host = HostReader()
        return self._host

    def monitor(
        self,
        *,
        urls: tuple[str, ...] = (),
        interval_s: float = 1.0,
        with_servers: bool = True,
        store: TimeSeriesStore | None = None,
        manager: ServerManager | None = None,
        sync_interval_s: float = 0.25,
        histogram_every: int | None = None,
    ) -> Monitor:
        """The one place a monitor (and through it a telemetry hub) is built for this host:
        the TUI, `metrics`, `snapshot` and `record` all come here. `manager`: the front end's
        own (the TUI acts through it), else a fresh one when `with_servers`. With
        `prometheus` set, GPUs and every server Prometheus scrapes come from it (one
        PrometheusSource on the same hub) and NVML is not read."""
        from console.server.monitor import Monitor
        from console.telemetry.sglang_source import HISTOGRAM_EVERY

        if manager is None and with_servers:
            manager = self.manager()
        monitor = Monitor(
            manager,
            self.gpu_backend,
            self.host_backend,
            self.topology(),
            interval_s=interval_s,
            urls=urls,
            store=store,
            sync_interval_s=sync_interval_s,
            histogram_every=HISTOGRAM_EVERY if histogram_every is None else histogram_every,
            watch_gpus=self.prometheus is None,
            # Prometheus lists the servers it scrapes: a scan of this host would list them twice.
            external=False if self.prometheus is not None else None,
            # A managed server Prometheus scrapes is reported under its id by the source.
            direct_servers=self.prometheus is None,
        )
        if self.prometheus is not None:
            from console.cli.prom_metrics import managed_endpoints, name_this_host_later
            from console.telemetry.prom_source import PrometheusSource

            watcher = monitor.watcher
            source = PrometheusSource(
                self.prometheus,
                monitor.hub.client,
                interval_s=interval_s,
                managed=None if watcher is None else (lambda: managed_endpoints(watcher.current)),
            )
            # A target named by this host's name or address is a managed server here too;
            # the names are resolved off this (possibly the UI's) loop.
            name_this_host_later(source)
            monitor.poller.add(source)
        return monitor

    def live_backend(
        self, *, recordings: Path | None, record_max_bytes: int | None = None
    ) -> LiveBackend:
        """What the console (TUI) runs on: this host, its servers, a flight recorder
        writing to `recordings` (None: not recording)."""
        from console.tui.live import LiveBackend

        return LiveBackend(
            demo=self.demo,
            manager=self.manager(),
            monitor_factory=self.monitor,
            topology=self.topology(),
            catalog=self.catalog,
            runs_root=self.state.runs,
            recordings=recordings,
            record_max_bytes=record_max_bytes,
            fleet_factory=self.fleet,
        )

    def fleet(self, local_reading: LocalReading | None = None) -> Fleet:
        """Every host of hosts.toml (`local` first), for the console's fleet view; a
        damaged hosts file is a UsageError naming it. `local_reading`: this host's readings
        from the console's own monitor, instead of a second process scraping it."""
        from console.fleet.fleet import Fleet

        return Fleet.from_config(demo=self.demo, interval_s=1.0, local_reading=local_reading)

    def manager(self) -> ServerManager:
        from console.server.manager import ServerManager

        self.state.ensure()
        return ServerManager(self.state, self.gpu_backend, demo=self.demo)

    def topology(self) -> Topology:
        if self._topology is None:
            backend = self.gpu_backend
            if isinstance(backend, SimulatedGpuBackend):
                self._topology = discover(backend, backend.numa_nodes)
            else:
                self._topology = discover(backend, read_numa_nodes)
        return self._topology
