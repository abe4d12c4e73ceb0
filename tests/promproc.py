"""A real Prometheus server for tests: its binary from scripts/prometheus-setup, a temp config
scraping the given targets every SCRAPE_S, its own storage folder, a free loopback port."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from console.core.net import free_port
from tests.conftest import REPO

SCRAPE_S = 1
"""The scrape interval of the test config (seconds)."""


def prometheus_binary() -> tuple[str | None, str]:
    """(path, "") when scripts/prometheus-setup finds or installs one; (None, why) else."""
    if os.environ.get("DDCONSOLE_SKIP_PROMETHEUS") == "1":
        return None, "DDCONSOLE_SKIP_PROMETHEUS=1 was set"
    try:
        done = subprocess.run(
            [str(REPO / "scripts" / "prometheus-setup")],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"scripts/prometheus-setup could not run: {exc}"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return None, f"no prometheus binary: {lines[-1] if lines else 'setup failed'}"
    return done.stdout.strip().splitlines()[-1], ""


@dataclass
class PromProcess:
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def query(self, expr: str) -> list[dict]:
        body = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10).json()
        assert body["status"] == "success", body
        return body["data"]["result"]


def config_text(jobs: Mapping[str, Sequence[str]]) -> str:
    """A config scraping each job's `host:port` targets every SCRAPE_S."""
    text = (
        "global:\n"
        f"  scrape_interval: {SCRAPE_S}s\n"
        f"  scrape_timeout: {SCRAPE_S}s\n"
        f"  evaluation_interval: {SCRAPE_S}s\n"
        "scrape_configs:\n"
    )
    for job, targets in jobs.items():
        listed = ", ".join(f"'{t}'" for t in targets)
        text += f"  - job_name: {job}\n    static_configs:\n      - targets: [{listed}]\n"
    return text


@contextlib.contextmanager
def running_prometheus(
    binary: str, targets: Sequence[str] | Mapping[str, Sequence[str]], tmp_path: Path
) -> Iterator[PromProcess]:
    """Prometheus scraping `targets` (job `sglang`), or each job's targets of a mapping."""
    jobs = targets if isinstance(targets, Mapping) else {"sglang": targets}
    folder = tmp_path / "prometheus"
    (folder / "data").mkdir(parents=True)
    config = folder / "prometheus.yml"
    config.write_text(config_text(jobs), encoding="utf-8")
    port = free_port()
    log_path = folder / "prometheus.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=folder,
            start_new_session=True,
        )
    prom = PromProcess(f"http://127.0.0.1:{port}", proc, log_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"prometheus exited {proc.returncode}:\n{prom.log()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{prom.url}/-/ready", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus not ready after 60 s:\n{prom.log()}")
            time.sleep(0.1)
        yield prom
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
        proc.wait(timeout=10)
