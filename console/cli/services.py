"""What a command works with, real or demo: state paths, profiles, GPU backend, topology."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from console.core.paths import StatePaths
from console.hw.backend import GpuBackend
from console.hw.numa import read_numa_nodes
from console.hw.nvml import NvmlBackend
from console.hw.simulated import SimulatedGpuBackend
from console.profiles.loader import ProfileCatalog
from console.topology.discover import discover
from console.topology.model import Topology

if TYPE_CHECKING:
    from console.server.manager import ServerManager


@dataclass
class Services:
    """Built once per command; demo mode swaps GPUs for the simulated host."""

    demo: bool
    state: StatePaths
    catalog: ProfileCatalog = field(default_factory=ProfileCatalog)
    _backend: GpuBackend | None = None
    _topology: Topology | None = None

    @classmethod
    def create(cls, demo: bool) -> Services:
        return cls(demo=demo, state=StatePaths.for_mode(demo))

    @property
    def gpu_backend(self) -> GpuBackend:
        if self._backend is None:
            if self.demo:
                self._backend = SimulatedGpuBackend(self.state.sim_gpu)
            else:
                self._backend = NvmlBackend()
        return self._backend

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
