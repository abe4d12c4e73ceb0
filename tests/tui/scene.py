"""A fixed demo scene for snapshot tests and screenshots: same seed, same clock, same frame.

It is a real recording, written with the flight recorder's writer and replayed by the
replay backend, of a simulated 8-GPU host over five minutes: a Qwen3.6-27B DDTree server
on GPU 0 under a benchmark stepping through concurrency 1, 4 and 16; an idle Qwen tp4
server on GPUs 4-7 whose process runs outside its NUMA node; a Kimi K2.6 tp8 server that
failed with CUDA out of memory. Numbers follow the simulator's calibration (catalog.toml).
Two finished campaign runs (recorded from the simulator) sit in its runs folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import math
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from console.bench.listing import DiskRuns, RunRow
from console.bench.results import RunSummary
from console.bench.shipped import campaign_files
from console.hw.simulated import SimulatedGpuBackend
from console.profiles.command import build_command
from console.profiles.loader import ProfileCatalog
from console.telemetry.keys import SourceId
from console.telemetry.recording import RecordingWriter, header, read_recording
from console.telemetry.samples import (
    Binding,
    CostSample,
    GpuSample,
    HostSample,
    NumaLoad,
    ServerSample,
    SourceState,
    SourceStatus,
)
from console.telemetry.source import PollResult
from console.topology.discover import discover
from console.topology.placement import resolve
from console.tui.replay import ReplayBackend

FIXTURES = Path(__file__).with_name("fixtures")
# A fixed path: it shows on screen (log and run paths), so snapshots must not vary.
ROOT = (Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())) / "ddconsole-scene"
DURATION_S = 300
T0 = 1000.0
WALL0 = 1_795_000_000.0
A, B, C = "qwen3.6-27b-tp1-1", "qwen3.6-27b-tp4-2", "kimi-k2.6-tp8-3"

# (from t, concurrency, tok/s, accept, TTFT p50 ms, ITL p50 ms) of server A's benchmark.
PHASES: tuple[tuple[int, int, float, float | None, float | None, float | None], ...] = (
    (0, 0, 0.0, None, None, None),
    (40, 1, 150.6, 14.2, 59, 6.2),
    (130, 4, 154.1, 14.2, 147, 24.8),
    (220, 16, 155.0, 13.9, 610, 97.0),
)


def _phase(t: float) -> tuple[int, float, float | None, float | None, float | None]:
    current = PHASES[0]
    for phase in PHASES:
        if t >= phase[0]:
            current = phase
    return current[1:]


def _plan(
    catalog: ProfileCatalog,
    topology: Any,
    profile: str,
    layout: str,
    variant: str,
    port: int,
    gpus: tuple[int, ...],
) -> dict[str, Any]:
    command = build_command(catalog.get(profile), layout, variant, port=port, demo=True, gpus=gpus)
    plan = resolve(command, topology, port_checker=None, numactl_present=False).to_json()
    plan["argv"] = ["python3", *plan["argv"][1:]]
    return plan


def _server(
    plan: dict[str, Any], server_id: str, state: str, t_launch: float, **extra: Any
) -> dict[str, Any]:
    return {
        "id": server_id,
        "profile": plan["profile"],
        "layout": plan["layout"],
        "variant": plan["variant"],
        "state": state,
        "port": plan["port"],
        "url": f"http://127.0.0.1:{plan['port']}",
        "gpus": plan["gpus"],
        "numa_nodes": plan["numa_nodes"],
        "log_path": str(ROOT / "logs" / f"{server_id}.log"),
        "launched_wall": WALL0 + t_launch,
        "demo": True,
        "plan": plan,
        **extra,
    }


def _gpu(t: float, index: int, rng: random.Random, topology: Any) -> GpuSample:
    info = topology.gpus[index]
    concurrency, *_ = _phase(t)
    busy = index == 0 and concurrency > 0
    loaded = index == 0 or index >= 4
    util = (96.5 + rng.uniform(-2, 2)) if busy else (rng.uniform(0, 2) if loaded else 0.0)
    return GpuSample(
        t_mono=T0 + t,
        source=SourceId.gpu(index),
        index=index,
        name=info.name,
        util_pct=round(util, 1),
        mem_util_pct=round(util * 0.6, 1),
        mem_used_bytes=int((88.2 if loaded else 0.5) * 2**30),
        mem_total_bytes=info.memory_total_bytes,
        power_w=round(520 + rng.uniform(-15, 15), 1) if busy else (64.0 if loaded else 24.0),
        power_limit_w=600.0,
        temp_c=round(66 + rng.uniform(-1, 1), 1) if busy else (34.0 if loaded else 31.0),
        sm_clock_mhz=2602.0 if busy else 180.0,
        mem_clock_mhz=14001.0,
        pcie_tx_bytes_s=round(1.7e3 * concurrency + rng.uniform(0, 200)) if busy else 0.0,
        pcie_rx_bytes_s=round(1.1e5 * max(1, concurrency) ** 0.5) if busy else 0.0,
        pcie_gen_current=5 if busy or loaded else 1,
        pcie_gen_max=info.pcie_gen_max,
        pcie_width_current=info.pcie_width_current,
        pcie_width_max=info.pcie_width_max,
        throttle_reasons=(),
        numa_node=info.numa_node,
    )


def _server_sample(t: float, rng: random.Random) -> ServerSample:
    concurrency, tok_s, accept, ttft_ms, itl_ms = _phase(t)
    if concurrency == 0:
        return ServerSample(
            t_mono=T0 + t,
            source=SourceId.server(A),
            server_id=A,
            decode_tok_s=0.0,
            finished_tok_s=0.0,
            requests_s=0.0,
            gen_throughput=0.0,
            running=0.0,
            queued=0.0,
            token_usage=0.0,
            accept_length=None,
            accept_rate=None,
            ttft_p50_s=None,
            ttft_p99_s=None,
            itl_p50_s=None,
            itl_p99_s=None,
            e2e_p50_s=None,
            e2e_p99_s=None,
            spec_verify_s=None,
        )
    jitter = 1 + rng.uniform(-0.03, 0.03)
    assert ttft_ms is not None
    assert itl_ms is not None
    assert accept is not None
    return ServerSample(
        t_mono=T0 + t,
        source=SourceId.server(A),
        server_id=A,
        decode_tok_s=round(tok_s * jitter, 1),
        finished_tok_s=round(tok_s * 0.98, 1),
        requests_s=round(tok_s / 256, 2),
        gen_throughput=round(tok_s * jitter, 1),
        running=float(concurrency),
        queued=0.0,
        token_usage=round(0.02 * concurrency, 3),
        accept_length=round(accept * (1 + rng.uniform(-0.02, 0.02)), 2),
        accept_rate=round(accept / 16, 3),
        ttft_p50_s=ttft_ms / 1000 * jitter,
        ttft_p99_s=ttft_ms * 1.4 / 1000,
        itl_p50_s=itl_ms / 1000 * jitter,
        itl_p99_s=itl_ms * 1.25 / 1000,
        e2e_p50_s=(ttft_ms + 255 * itl_ms) / 1000,
        e2e_p99_s=(ttft_ms + 255 * itl_ms) * 1.2 / 1000,
        spec_verify_s=round(tok_s / accept, 1),
    )


def _scene_key(seed: int) -> str:
    """What the scene's files depend on: this module, its fixtures, the seed, and the bench
    code whose summary.json caches a reused scene's runs folder would hold."""
    digest = hashlib.sha256(str(seed).encode())
    here = Path(__file__)
    sources = [
        here,
        *sorted(FIXTURES.rglob("*")),
        *sorted((here.parents[2] / "console" / "bench").glob("*.py")),
    ]
    for source in sources:
        if source.is_file():
            digest.update(source.name.encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def build(root: Path = ROOT, seed: int = 7) -> Path:
    """The scene under `root` (a symlink to a folder named by the scene's key), written once
    and shared by every test process: pytest-xdist workers and concurrent sessions never
    delete files another process is reading, and the on-screen paths stay fixed."""
    key = _scene_key(seed)
    built = root.with_name(f"{root.name}.{key}")
    recording = root / "scene.ddrec.gz"
    if root.is_symlink() and root.resolve() == built.resolve() and (built / ".complete").exists():
        return recording
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.with_name(f"{root.name}.lock")).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (built / ".complete").exists():
            staging = Path(tempfile.mkdtemp(prefix=f"{root.name}.staging-", dir=root.parent))
            _write(staging, seed)
            (staging / ".complete").touch()
            shutil.rmtree(built, ignore_errors=True)
            staging.rename(built)
        if not (root.is_symlink() and root.resolve() == built.resolve()):
            if root.is_dir() and not root.is_symlink():
                shutil.rmtree(root)
            link = root.with_name(f"{root.name}.link-{os.getpid()}")
            link.unlink(missing_ok=True)
            link.symlink_to(built.name)
            link.replace(root)
        _remove_old_scenes(root, keep=built)
    return recording


def _remove_old_scenes(root: Path, keep: Path) -> None:
    """Scenes of other keys untouched for a day: no test process still reads them."""
    for old in root.parent.glob(f"{root.name}.*"):
        if old != keep and old.is_dir() and not old.is_symlink():
            with contextlib.suppress(OSError):
                if time.time() - old.stat().st_mtime > 86_400:
                    shutil.rmtree(old)


def _write(root: Path, seed: int) -> None:
    """Write the scene's recording, logs and runs into `root` (the recording names its logs
    under ROOT, the path the screens show)."""
    (root / "logs").mkdir(parents=True)
    shutil.copytree(FIXTURES / "runs", root / "runs")
    rng = random.Random(seed)
    backend = SimulatedGpuBackend(None)
    topology = discover(backend, backend.numa_nodes)
    catalog = ProfileCatalog()
    plan_a = _plan(catalog, topology, "qwen3.6-27b", "tp1", "ddtree-b15", 30000, (0,))
    plan_b = _plan(catalog, topology, "qwen3.6-27b", "tp4", "off", 30001, (4, 5, 6, 7))
    plan_c = _plan(catalog, topology, "kimi-k2.6", "tp8", "eagle3", 30002, tuple(range(8)))
    oom = "CUDA out of memory: tried to allocate 3.50 GiB, GPU 3"
    (root / "logs" / f"{C}.log").write_text(
        # Lines as sglang 0.5.23 writes them (tests/fixtures/sglang-0.5.23/corpus.toml); the
        # key is masked as ddconsole's waiter writes a managed server's log.
        "[2026-11-29 18:00:01] server_args={'model_path': 'moonshotai/Kimi-K2.6', "
        "'tp_size': 8, 'api_key': '***'}\n"
        "[2026-11-29 18:00:02 TP0] Init parallel begin.\n"
        "[2026-11-29 18:00:09 TP0] Load weight begin. avail mem=94.50 GB\n"
        "[2026-11-29 18:00:41 TP3] Scheduler hit an exception: Traceback (most recent call "
        "last):\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 3 has a "
        "total capacity of 94.97 GiB of which 1.12 GiB is free.\n"
        "[2026-11-29 18:00:41] Received sigquit from a child process. It usually means the "
        "child failed.\n"
    )
    (root / "logs" / f"{A}.log").write_text(
        "".join(
            f"[2026-11-29 18:0{i // 10}:{i % 10}0] Decode batch. #running-req: 1, "
            f"#token: {700 + 16 * i}, accept len: 14.2, gen throughput (token/s): 150.{i}\n"
            for i in range(40)
        )
        + "[2026-11-29 18:07:00] The server is fired up and ready to roll!\n"
    )
    (root / "logs" / f"{B}.log").write_text("The server is fired up and ready to roll!\n")
    path = root / "scene.ddrec.gz"
    head = header(
        demo=True,
        topology=topology.to_json(),
        interval_s=1.0,
        t0_mono=T0,
        note="ddconsole test scene",
    )
    writer = RecordingWriter(path, head)
    failed = _server(
        plan_c,
        C,
        "failed",
        10.0,
        reason=oom,
        failure_kind="cuda-oom",
        failure_excerpt=[
            "torch.OutOfMemoryError: CUDA out of memory. Tried to "
            "allocate 3.50 GiB. GPU 3 has a total capacity of "
            "94.97 GiB"
        ],
        exit_code=1,
        uptime_s=31.0,
    )
    for t in range(DURATION_S + 1):
        servers = [
            _server(plan_a, A, "ready", -600.0, uptime_s=600.0 + t, pid=4242, phase="ready"),
            _server(plan_b, B, "ready", -3600.0, uptime_s=3600.0 + t, pid=4343, phase="ready"),
        ]
        if t == 0 or t == 25:
            writer.servers(T0 + t, servers + ([failed] if t >= 25 else []))
        samples: list[Any] = [_gpu(t, i, rng, topology) for i in range(len(topology.gpus))]
        concurrency = _phase(t)[0]
        samples.append(
            HostSample(
                t_mono=T0 + t,
                source=SourceId.HOST,
                cpu_pct=round(7 + concurrency * 0.4 + rng.uniform(0, 1), 1),
                numa=(
                    NumaLoad(
                        node=0,
                        cpu_pct=round(12 + concurrency * 0.8 + rng.uniform(0, 2), 1),
                        cpus=32,
                    ),
                    NumaLoad(node=1, cpu_pct=round(3 + rng.uniform(0, 1), 1), cpus=32),
                ),
                mem_used_bytes=180 * 2**30,
                mem_total_bytes=1024 * 2**30,
                load1=3.1,
                load5=2.9,
                load15=2.5,
                bindings=(
                    Binding(
                        server_id=A,
                        intended_nodes=(0,),
                        actual_nodes=(0,),
                        actual_cpus=32,
                        processes=3,
                    ),
                    Binding(
                        server_id=B,
                        intended_nodes=(1,),
                        actual_nodes=(0, 1),
                        actual_cpus=64,
                        processes=5,
                    ),
                ),
            )
        )
        samples.append(_server_sample(t, rng))
        samples.append(
            CostSample(
                t_mono=T0 + t,
                source=SourceId.CONSOLE,
                cpu_pct=round(2.1 + rng.uniform(-0.3, 0.3), 2),
                rss_bytes=92 * 2**20,
                poll_ms=(
                    (str(SourceId.GPUS), 0.4),
                    (str(SourceId.HOST), 0.2),
                    (str(SourceId.server(A)), 2.3),
                ),
            )
        )

        def ok(source: SourceId, poll_s: float, now: float = T0 + t) -> SourceStatus:
            return SourceStatus(
                name=source, state=SourceState.OK, last_ok_mono=now, last_poll_s=poll_s
            )

        statuses = [ok(SourceId.gpu(i), 0.0004) for i in range(8)]
        statuses += [
            ok(SourceId.GPUS, 0.0004),
            ok(SourceId.HOST, 0.0002),
            ok(SourceId.CONSOLE, 0.00001),
            ok(SourceId.server(A), 0.0023),
            SourceStatus(
                name=SourceId.server(B),
                state=SourceState.STALE,
                reason="no fresh reading",
                last_ok_mono=T0 + 250,
                last_poll_s=0.0019,
            )
            if t > 255
            else ok(SourceId.server(B), 0.0019),
        ]
        writer.poll(T0 + t, PollResult(samples, statuses))
        if t == 40:
            writer.event(T0 + t, "started run 20261129-185811-qwen-ddtree-budgets")
    writer.close()
    assert not math.isnan(DURATION_S)


class SceneBackend(ReplayBackend):
    """The recording frozen at its last instant, shown as demo mode (no replay controls)."""

    def __init__(self, root: Path) -> None:
        super().__init__(read_recording(build(root)), runs_root=root / "runs", playing=False)
        self.replay = None
        self.campaigns = campaign_files()

    async def start(self) -> None:
        return None

    def runs(self) -> list[RunRow]:
        """The scene's runs folder (its recording lists none): the fixture runs."""
        return DiskRuns(self.runs_root).runs()

    def run_summary(self, run_id: str) -> RunSummary | None:
        return DiskRuns(self.runs_root).run_summary(run_id)


def backend(root: Path = ROOT) -> SceneBackend:
    return SceneBackend(root)
