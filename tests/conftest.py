"""Shared fixtures: isolated XDG folders, the CLI in-process, marker gating."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import pytest

from console.core.net import free_port
from tests.sglang_fork import SglangForkServer

REPO = Path(__file__).resolve().parent.parent
# Captured before any fixture repoints XDG folders: where the sglang venv is cached.
REAL_CACHE_HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own config, state and cache folders."""
    home = tmp_path / "xdg"
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        folder = home / name.lower()
        folder.mkdir(parents=True)
        monkeypatch.setenv(name, str(folder))
    return home


@pytest.fixture
def user_profiles(isolated_dirs: Path) -> Path:
    folder = isolated_dirs / "xdg_config_home" / "ddconsole" / "profiles"
    folder.mkdir(parents=True)
    return folder


SGLANG_DEFAULT_PORT = 30000
"""SGLang's HTTP port when argv names none (sglang 0.5.23 srt/arg_groups/fields/serving.py:66)."""

_SERVER_PORT = re.compile(r"(?m)^(port\s*=\s*)\d+[ \t]*$")


def shipped_profile_names() -> list[str]:
    return sorted(path.stem for path in (REPO / "profiles").glob("*.toml"))


def fixed_ports() -> set[int]:
    """The ports a launch takes when nothing overrides them: the shipped profiles' own and
    SGLang's default. Tests never launch on these (a real SGLang host or CI may hold them)."""
    ports = {SGLANG_DEFAULT_PORT}
    for name in shipped_profile_names():
        raw = tomllib.loads((REPO / "profiles" / f"{name}.toml").read_text(encoding="utf-8"))
        ports.add(int(raw["server"]["port"]))
    return ports


def shipped_profile_on_port(name: str, port: int | None = None) -> str:
    """The shipped profile `name` as TOML text, listening on `port` (a free one by default):
    what a user writes to `$XDG_CONFIG_HOME/ddconsole/profiles/NAME.toml` to move a profile
    off a port that another server holds."""
    text = (REPO / "profiles" / f"{name}.toml").read_text(encoding="utf-8")
    chosen = free_port() if port is None else port
    moved, count = _SERVER_PORT.subn(rf"\g<1>{chosen}", text)
    if count != 1 or tomllib.loads(moved)["server"]["port"] != chosen:
        raise AssertionError(f"profiles/{name}.toml: expected one `port = N` line in [server]")
    return moved


@pytest.fixture
def free_port_profiles(user_profiles: Path) -> dict[str, int]:
    """User overrides of every shipped profile, identical but for a free port each; returns
    profile name -> port. A test launching a shipped profile without `--port` (a campaign,
    the TUI's launch dialog, `up` as an operator types it) uses this fixture."""
    ports: dict[str, int] = {}
    for name in shipped_profile_names():
        text = shipped_profile_on_port(name)
        ports[name] = int(tomllib.loads(text)["server"]["port"])
        (user_profiles / f"{name}.toml").write_text(text, encoding="utf-8")
    return ports


@pytest.fixture(scope="session", autouse=True)
def hold_fixed_ports() -> Iterator[list[int]]:
    """Listen on the fixed ports for the whole session, as a real SGLang server on this host
    would, so a test that launches on one fails here and not only on a busy machine. A port
    another process (or another xdist worker) already holds is left as it is."""
    held: list[socket.socket] = []
    for port in sorted(fixed_ports()):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            sock.close()
            continue
        held.append(sock)
    yield [sock.getsockname()[1] for sock in held]
    for sock in held:
        sock.close()


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run `ddconsole ARGS...` in-process; returns exit code, stdout and stderr."""
    from console.cli import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def run_cli_subprocess(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or os.environ.copy(),
        cwd=REPO,
        check=False,
    )


def _nvml_available() -> str | None:
    from console.hw.backend import GpuUnavailable
    from console.hw.nvml import NvmlBackend

    backend = NvmlBackend()
    try:
        backend.open()
        count = backend.device_count()
    except GpuUnavailable as exc:
        return exc.reason
    finally:
        backend.close()
    return None if count > 0 else "NVML reports no GPU"


@pytest.hookimpl(trylast=True)  # after `-m`/`-k` deselection: the order is of what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items:
        reason = _nvml_available()
        if reason is not None:
            for item in gpu_items:
                item.add_marker(pytest.mark.skip(reason=f"no GPU here: {reason}"))
    if os.environ.get("DDCONSOLE_SKIP_SGLANG") == "1":
        for item in items:
            if item.get_closest_marker("sglang"):
                item.add_marker(pytest.mark.skip(reason="DDCONSOLE_SKIP_SGLANG=1 was set"))
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = scheduled(items, workers)


def _length_rank(item: pytest.Item) -> int:
    """0: starts a real SGLang (torch's import alone is ~20 s of CPU); 1: marked slow; 2: the
    rest."""
    if item.get_closest_marker("sglang"):
        return 0
    return 1 if item.get_closest_marker("slow") else 2


def scheduled(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The long tests first, spread over the workers (modules keep their order otherwise).

    xdist's `load` scheduler first hands each worker a chunk of consecutive items, a quarter
    of its share (xdist/scheduler/load.py, `schedule`), then feeds the rest in order to
    whichever worker runs low. Long tests in one block would all land in the first chunk and
    run one after another on one worker while the others finish; so the real-SGLang tests
    fill the first worker's chunk (only that worker waits while scripts/sglang-venv builds the
    venv), the slow tests are dealt to the other workers' chunks, and short ones fill in.
    """
    ranked: list[list[pytest.Item]] = [[], [], []]
    for item in items:
        ranked[_length_rank(item)].append(item)
    sglang, slow, rest = ranked
    if workers < 2:
        return [*sglang, *slow, *rest]
    size = max(len(items) // workers // 4, 2)
    chunks: list[list[pytest.Item]] = [[] for _ in range(workers)]
    late: list[pytest.Item] = []
    for item in sglang:
        (chunks[0] if len(chunks[0]) < size else late).append(item)
    for index, item in enumerate(slow):
        # Round the other workers first; the first worker's chunk only once theirs are full.
        others = [c for c in range(1, workers) if len(chunks[c]) < size]
        if others:
            chunks[others[index % len(others)]].append(item)
        elif len(chunks[0]) < size:
            chunks[0].append(item)
        else:
            late.append(item)
    fill = iter(rest)
    for chunk in chunks:
        chunk.extend(islice(fill, size - len(chunk)))
    return [item for chunk in chunks for item in chunk] + late + list(fill)


@pytest.fixture(scope="session")
def sglang_python() -> str:
    """The interpreter of a venv with the real sglang==0.5.23 (built once, cached)."""
    env = os.environ.copy()
    env.setdefault("DDCONSOLE_SGLANG_VENV", str(REAL_CACHE_HOME / "ddconsole" / "sglang-0.5.23"))
    completed = subprocess.run(
        [str(REPO / "scripts" / "sglang-venv")],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    if completed.returncode != 0:
        pytest.fail(f"building the sglang venv failed:\n{completed.stderr[-3000:]}")
    return completed.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def sglang_fork(
    sglang_python: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SglangForkServer]:
    """Runs `sglang_python ARGV` as forks of one interpreter that imported SGLang (and torch)
    once in this worker; the real-SGLang tests run their scripts through it."""
    server = SglangForkServer(sglang_python, tmp_path_factory.mktemp("sglang-fork"))
    yield server
    server.close()


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    """A `prometheus` server binary (scripts/prometheus-setup: on PATH, or Debian's package
    installed as root); the test is skipped with the reason where none can be had, or when
    DDCONSOLE_SKIP_PROMETHEUS=1."""
    from tests.promproc import prometheus_binary as find

    found, reason = find()
    if found is None:
        pytest.skip(reason)
    return found
