"""`ddconsole snapshot` without a terminal: every format, the documented schema, the exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import REPO

SCHEMA = json.loads((REPO / "docs" / "snapshot.schema.json").read_text())


def snapshot(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The CLI as cron runs it: no TTY on stdin or stdout."""
    return subprocess.run(
        [sys.executable, "-m", "console", "snapshot", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ.copy(),
        cwd=REPO,
        check=False,
    )


def test_demo_snapshot_writes_every_format_and_validates(tmp_path: Path):
    out = tmp_path / "snap"
    started = time.monotonic()
    result = snapshot("--demo", "--out", str(out), "--json")
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    written = json.loads(result.stdout)["written"]
    names = sorted(Path(p).name for p in written)
    assert names == ["dashboard.png", "dashboard.svg", "snapshot.json", "snapshot.md"]
    document = json.loads((out / "snapshot.json").read_text())
    jsonschema.validate(document, SCHEMA)
    assert document["demo"] is True
    assert len(document["topology"]["gpus"]) == 8
    assert {g["index"] for g in document["reading"]["gpus"]} == set(range(8))
    assert any(key.startswith("gpu.0.") for key in document["history"]["series"])
    svg = (out / "dashboard.svg").read_text()
    assert "Dashboard" in svg
    assert "NUMA&#160;0" in svg.replace(" ", "&#160;")
    assert (out / "dashboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "# ddconsole snapshot" in (out / "snapshot.md").read_text()
    print(f"snapshot --demo took {elapsed:.2f} s")


def test_the_schema_rejects_what_it_documents_as_wrong(tmp_path: Path):
    result = snapshot("--demo", "--out", str(tmp_path), "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "snapshot.json").read_text())
    broken = dict(document, schema_version=1)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)
    document["reading"]["sources"][0]["state"] = "fine"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, SCHEMA)


def test_nothing_to_snapshot_exits_non_zero_with_a_reason(tmp_path: Path):
    from console.hw.backend import GpuUnavailable
    from console.hw.nvml import NvmlBackend

    backend = NvmlBackend()
    try:
        backend.open()
    except GpuUnavailable:
        pass  # no GPUs: the case this test is about
    else:
        backend.close()
        pytest.skip(
            "NVML finds GPUs on this host, so a real snapshot always has something to report; "
            "the empty case is only reachable without GPUs"
        )
    result = snapshot("--out", str(tmp_path / "none"))
    assert result.returncode == 1
    assert "nothing to snapshot: no GPUs" in result.stderr
    assert "no managed servers and no runs" in result.stderr
    assert not (tmp_path / "none").exists()


def test_bad_format_is_named(tmp_path: Path):
    result = snapshot("--demo", "--out", str(tmp_path), "--format", "json,pdf")
    assert result.returncode == 2
    assert "--format: unknown pdf" in result.stderr
