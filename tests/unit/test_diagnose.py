"""`ddconsole diagnose LOGFILE`: phases with the log's own timestamps and the classified failure,
for every failure text of the SGLang 0.5.23 corpus, run as the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.server import diagnose as diagnose_module
from console.server.classify import classify
from console.server.diagnose import diagnose_file, diagnose_lines, log_failure
from tests.conftest import REPO, run_cli_subprocess
from tests.sglang_corpus import (
    CORPUS_API_KEY,
    CORPUS_SSL_PASSWORD,
    Entry,
    entries,
    failure_log,
)


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("entry", entries("failure"), ids=lambda entry: entry.id)
def test_every_corpus_failure_through_the_cli(entry: Entry, tmp_path: Path) -> None:
    lines, _ = failure_log(entry)
    log = _write(tmp_path / "server.log", lines)
    result = run_cli_subprocess("diagnose", log, "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    failure = report["failure"]
    assert failure["kind"] == entry.kind
    assert entry.reason in failure["reason"]
    # The line number points at the line the reason comes from, counted from 1.
    assert lines[failure["line_number"] - 1] == failure["line"]
    assert report["lines"] == len(lines)
    # A framed log after argument parsing holds SGLang's server_args line, keys in clear.
    assert (CORPUS_API_KEY in "\n".join(lines)) == (entry.context != "argparse")
    assert CORPUS_API_KEY not in result.stdout


def test_phases_with_their_timestamps_and_the_cuda_graph_phase(tmp_path: Path) -> None:
    milestones = {entry.id: entry for entry in entries("milestone")}
    order = [
        "init-parallel",
        "load-weight-begin",
        "load-weight-end",
        "memory-pool-end",
        "cg-target-verify-begin",
        "cg-target-verify-end",
        "cg-draft-extend-begin",
    ]
    lines = ["[2026-12-01 10:00:00] server_args=ServerArgs(tp_size=4)"]
    lines += [milestones[name].example for name in order]
    log = _write(tmp_path / "server.log", lines)
    result = run_cli_subprocess("diagnose", log, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["failure"] is None
    assert [p["label"] for p in report["phases"]] == [milestones[n].label for n in order]
    assert [p["timestamp"] for p in report["phases"]] == [
        milestones[n].example[1:20] for n in order
    ]
    assert [p["line_number"] for p in report["phases"]] == list(range(2, len(order) + 2))
    assert report["reached"] == "capturing CUDA graph: draft extend"
    text = run_cli_subprocess("diagnose", log)
    assert text.returncode == 0
    assert "no failure found; reached: capturing CUDA graph: draft extend" in text.stdout
    assert "2026-12-01 10:01:16  capturing CUDA graph: target verify  (line 6)" in text.stdout


def test_human_output_names_the_failure_line(tmp_path: Path) -> None:
    (entry,) = [e for e in entries("failure") if e.id == "kv-pool-oom"]
    lines, _ = failure_log(entry)
    log = _write(tmp_path / "colleague.log", lines)
    result = run_cli_subprocess("diagnose", log)
    assert result.returncode == 1
    number = lines.index(entry.example) + 1
    assert "FAILED [kv-oom]: not enough GPU memory for the KV cache" in result.stdout
    assert f"line {number}: {entry.example}" in result.stdout
    assert "reached" not in result.stderr


def test_an_exit_status_the_log_does_not_explain(tmp_path: Path) -> None:
    log = _write(tmp_path / "server.log", ["[2026-12-01 10:00:02] Init parallel begin."])
    assert diagnose_file(log).failure is None
    result = run_cli_subprocess("diagnose", log, "--exit-status", "-9", "--json")
    assert json.loads(result.stdout)["failure"]["reason"] == "killed by SIGKILL"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: tmp / "missing.log", "missing.log: no such file"),
        (lambda tmp: tmp, "is a directory, not a log file"),
        (
            lambda tmp: _bytes(tmp / "core.bin", b"\x7fELF\x02\x01\x01\x00\x00\x00" * 100),
            "core.bin is not a text log (it holds binary data)",
        ),
    ],
    ids=["missing", "directory", "binary"],
)
def test_files_that_cannot_be_diagnosed(tmp_path: Path, make, message: str) -> None:
    path = make(tmp_path)
    result = run_cli_subprocess("diagnose", str(path))
    assert result.returncode == 2
    assert message in result.stderr
    assert str(path) in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "secret.log"
    path.write_text("x\n")
    path.chmod(0)
    result = run_cli_subprocess("diagnose", str(path))
    assert result.returncode == 2
    assert f"{path}: permission denied" in result.stderr


def _bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# VmHWM: this process's peak resident memory in KiB (ru_maxrss can carry the forking parent's).
_MEASURE = """
import re, sys
from console.server.diagnose import diagnose_file
d = diagnose_file(sys.argv[1])
peak = re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)
print(peak, d.line_count, d.failure.kind if d.failure else None,
      d.reached.label if d.reached else None)
"""


def _peak_kib(log: Path) -> tuple[int, list[str]]:
    completed = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(log)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=True,
    )
    peak, *rest = completed.stdout.split()
    return int(peak), rest


def test_a_huge_log_is_streamed_in_bounded_memory(tmp_path: Path) -> None:
    """64 MiB: a 40 MiB line without a newline, then 24 MiB of serving lines, then a
    failure. Peak memory grows by far less than the file."""
    small = tmp_path / "small.log"
    small.write_text("[2026-12-01 10:00:02] Init parallel begin.\n")
    baseline, _ = _peak_kib(small)
    (entry,) = [e for e in entries("failure") if e.id == "decode-oom"]
    lines, _ = failure_log(entry)
    big = tmp_path / "big.log"
    serving = (
        b"[2026-12-01 10:03:00] Decode batch, #running-req: 32, #token: 41210, token usage: "
        b"0.97, cuda graph: True, gen throughput (token/s): 812.40, #queue-req: 12\n"
    )
    with big.open("wb") as handle:
        handle.write(b"[2026-12-01 10:00:02] Init parallel begin.\n")
        for _ in range(40):
            handle.write(b"x" * (1 << 20))
        handle.write(b"\n")
        block = serving * 1000
        for _ in range((24 << 20) // len(block)):
            handle.write(block)
        handle.write(("\n".join(lines) + "\n").encode())
    peak, (count, kind, reached) = _peak_kib(big)
    assert (kind, reached) == ("runtime-oom", "ready")
    assert int(count) > 150_000
    assert peak - baseline < 24 * 1024, f"peak grew by {(peak - baseline) // 1024} MiB"


def test_status_and_diagnose_read_the_same_failure(tmp_path: Path) -> None:
    """`up`, `ps` and the TUI (log_failure) and `diagnose` share one classification."""
    for entry in entries("failure"):
        lines, code = failure_log(entry)
        log = _write(tmp_path / f"{entry.id}.log", lines)
        status = log_failure(log, code, stop_requested=False)
        diagnosed = diagnose_file(log, returncode=code).failure
        assert status == diagnosed, entry.id
        assert diagnose_lines(lines, returncode=code).failure == status


def test_a_requested_stop_is_no_failure(tmp_path: Path) -> None:
    (entry,) = [e for e in entries("line") if e.id == "sigterm"]
    log = _write(tmp_path / "server.log", [entry.example])
    assert log_failure(log, 0, stop_requested=True) is None
    assert diagnose_file(log, returncode=0, stop_requested=True).failure is None


# Other secrets a colleague's log may hold near its failure: an argv in SGLang's port-waiting
# message (sglang 0.5.23 srt/utils/network.py:98 prints the holder's process.cmdline()), a
# Bearer token, and a key echoed by argparse after a mistyped flag.
_ADMIN_KEY = "adm-0a1b2c3d4e"
_BEARER = "tok-9f8e7d6c5b4a"


def _secret_logs() -> list[tuple[list[str], int]]:
    (port,) = [e for e in entries("failure") if e.id == "dp-port-in-use"]
    port_lines, port_code = failure_log(port)
    waiting = (
        "[2026-12-01 10:00:15] port 30241 is in use. Waiting for 15 seconds for "
        "scheduler_input_port to be available. process.cmdline()=['python3', '-m', "
        f"'sglang.launch_server', '--api-key', '{CORPUS_API_KEY}', '--admin-api-k', "
        f"'{_ADMIN_KEY}', '--ssl-keyfile-password={CORPUS_SSL_PASSWORD}'] pid=4242"
    )
    at = next(i for i, line in enumerate(port_lines) if "Port is already in use" in line)
    port_lines[at:at] = [waiting, f"[2026-12-01 10:00:16] Authorization: Bearer {_BEARER}"]
    typo = [
        "usage: sglang serve [-h] [--model-path MODEL_PATH]",
        f"sglang serve: error: unrecognized arguments: --api-kee {CORPUS_API_KEY}",
    ]
    return [(port_lines, port_code), (typo, 2)]


@pytest.mark.parametrize("case", [0, 1], ids=["port-waiting-argv", "argparse-typo"])
def test_diagnose_never_prints_a_secret(case: int, tmp_path: Path) -> None:
    lines, code = _secret_logs()[case]
    secrets = (CORPUS_API_KEY, _ADMIN_KEY, CORPUS_SSL_PASSWORD, _BEARER)
    # The classifier's own excerpt holds them: the masking is diagnose's.
    raw = classify(code, lines, stop_requested=False)
    assert raw is not None
    assert any(s in "\n".join((*raw.excerpt, raw.reason, raw.line or "")) for s in secrets)
    log = _write(tmp_path / "server.log", lines)
    for extra in ((), ("--json",)):
        result = run_cli_subprocess("diagnose", log, "--exit-status", str(code), *extra)
        assert result.returncode == 1, result.stderr
        assert "***" in result.stdout
        leaked = [s for s in secrets if s in result.stdout + result.stderr]
        assert leaked == [], (extra, result.stdout)
    failure = log_failure(log, code, stop_requested=False)
    assert failure is not None
    shown = "\n".join((*failure.excerpt, failure.reason, failure.line or ""))
    assert not [s for s in secrets if s in shown]


def test_the_failure_cache_is_bounded_and_thread_safe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The poller's threads and the UI ask at once, for more logs than the cache keeps."""
    import threading

    monkeypatch.setattr(diagnose_module, "_failures", type(diagnose_module._failures)())
    logs = [
        _write(tmp_path / f"{n}.log", ["[2026-12-01 10:00:02] Init parallel begin."])
        for n in range(3 * diagnose_module._FAILURES_KEPT)
    ]
    errors: list[BaseException] = []

    def ask(offset: int) -> None:
        try:
            for round_ in range(3):
                for n in range(len(logs)):
                    log_failure(logs[(n + offset) % len(logs)], round_, stop_requested=False)
        except BaseException as exc:  # any failure of a thread is the finding
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=ask, args=(k * 7,)) for k in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert len(diagnose_module._failures) <= diagnose_module._FAILURES_KEPT
