"""Damaged or hostile recordings (issue 17, F12 and F4): a bad header is one clear line, a
gzip bomb stops at the line cap with flat memory."""

from __future__ import annotations

import gzip
import json
import os
import time
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest

from console.telemetry.recording import (
    MAX_LINE_BYTES,
    SUFFIX,
    RecordingError,
    header,
    read_recording,
)
from tests.conftest import run_cli_subprocess


def good_header() -> dict[str, Any]:
    return header(
        demo=True,
        topology={"gpus": [{"index": 0, "name": "H100"}], "numa_nodes": [{"id": 0, "cpus": [0]}]},
        interval_s=1.0,
        t0_mono=0.0,
    )


def write_header(path: Path, head: Any) -> None:
    with gzip.open(path, "wt") as handle:
        handle.write((head if isinstance(head, str) else json.dumps(head)) + "\n")
        handle.write(json.dumps({"t": 0.0, "k": "event", "v": "x"}) + "\n")


def damaged(change: str) -> Any:
    head = good_header()
    if change == "topology-list":
        head["topology"] = [1, 2, 3]
    elif change == "gpu-index-text":
        head["topology"]["gpus"][0]["index"] = "zero"
    elif change == "no-t0_mono":
        del head["t0_mono"]
    elif change == "schema-string":
        head["schema_version"] = "1"
    elif change == "fields-not-object":
        head["fields"] = "gpu"
    elif change == "deep":
        text = json.dumps(head)
        return text[:-1] + ', "note": ' + "[" * 100_000 + "]" * 100_000 + "}"
    return head


CHANGES = {
    "topology-list": "topology is list, not an object",
    "gpu-index-text": "topology.gpus[0].index is not an integer",
    "no-t0_mono": "t0_mono is missing or not a number",
    "schema-string": "schema_version '1' is not an integer",
    "fields-not-object": "fields is not an object of name lists",
    "deep": "nested too deeply",
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_damaged_header_is_one_clear_error(tmp_path: Path, change: str) -> None:
    path = tmp_path / f"h{SUFFIX}"
    write_header(path, damaged(change))
    with pytest.raises(RecordingError) as caught:
        read_recording(path)
    message = str(caught.value)
    assert CHANGES[change] in message
    assert "newer" not in message


@pytest.mark.parametrize("change", ["topology-list", "gpu-index-text", "deep"])
def test_snapshot_of_a_damaged_header_is_one_line_not_an_internal_error(
    tmp_path: Path, change: str
) -> None:
    path = tmp_path / f"h{SUFFIX}"
    write_header(path, damaged(change))
    result = run_cli_subprocess(
        "snapshot", "--out", str(tmp_path / "s"), "--from-recording", str(path),
        env=os.environ.copy(),
    )  # fmt: skip
    assert result.returncode == 1, result
    assert "internal error" not in result.stderr
    assert "Traceback" not in result.stderr
    assert "damaged recording header" in result.stderr


def test_a_good_header_still_reads(tmp_path: Path) -> None:
    path = tmp_path / f"g{SUFFIX}"
    write_header(path, good_header())
    recording = read_recording(path)
    assert recording.damage is None
    assert len(recording.frames) == 1


def test_a_gzip_bomb_stops_at_the_line_cap_with_flat_memory(tmp_path: Path) -> None:
    """A header, then 256 MiB of `a` with no newline (a few hundred KB compressed): reading
    stops at the 16 MiB line cap, fast, without holding the expansion."""
    path = tmp_path / f"bomb{SUFFIX}"
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"a" * (1 << 20)
    parts = [compressor.compress(json.dumps(good_header()).encode() + b"\n")]
    for _ in range(256):
        parts.append(compressor.compress(block))
    parts.append(compressor.flush())
    path.write_bytes(b"".join(parts))
    assert path.stat().st_size < 2 << 20
    tracemalloc.start()
    start = time.monotonic()
    try:
        recording = read_recording(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    took = time.monotonic() - start
    print(f"gzip bomb: {took:.2f} s, peak traced {peak / 2**20:.0f} MiB")
    assert recording.frames == []
    assert recording.damage is not None
    assert "longer than 16 MiB" in recording.damage
    assert peak < 6 * MAX_LINE_BYTES, peak
    assert took < 30, took


def test_snapshot_of_a_damaged_recording_says_so_on_the_cli_and_in_snapshot_md(
    tmp_path: Path,
) -> None:
    """F18: the damage was only in snapshot.json; now a CLI line and snapshot.md say it."""
    from console.telemetry.recording import RecordingWriter

    path = tmp_path / f"cut{SUFFIX}"
    writer = RecordingWriter(
        path, header(demo=True, topology={"gpus": [], "numa_nodes": []}, interval_s=1.0,
                     t0_mono=0.0),
    )  # fmt: skip
    for t in range(5):
        writer.event(float(t), f"event {t}")
    writer.flush()
    writer.close()
    path.write_bytes(path.read_bytes()[:-8])  # the gzip trailer is gone: truncated
    out = tmp_path / "snap"
    result = run_cli_subprocess(
        "snapshot", "--demo", "--format", "md", "--out", str(out), "--from-recording", str(path),
        env=os.environ.copy(),
    )  # fmt: skip
    assert result.returncode == 0, result
    assert "the recording is damaged (the file ends early" in result.stderr
    assert "Recording damaged:** the file ends early" in (out / "snapshot.md").read_text()
    late = run_cli_subprocess(
        "snapshot", "--demo", "--out", str(tmp_path / "late"), "--from-recording", str(path),
        "--at", "100", env=os.environ.copy(),
    )  # fmt: skip
    assert late.returncode == 2
    assert "(damaged: the file ends early" in late.stderr


def test_millions_of_tiny_frames_stop_at_the_frame_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tiny frames pass the line and size caps; the frame count caps what is kept (the real
    cap is a million; a smaller one here keeps the test fast)."""
    import console.telemetry.recording as recording_module

    monkeypatch.setattr(recording_module, "MAX_FRAMES", 1000)
    path = tmp_path / f"tiny{SUFFIX}"
    with gzip.open(path, "wt") as handle:
        handle.write(json.dumps(good_header()) + "\n")
        handle.writelines('{"t":0,"k":"e"}\n' for _ in range(5000))
    recording = read_recording(path)
    assert len(recording.frames) == 1000
    assert recording.damage is not None
    assert "more than 1,000 frames" in recording.damage
