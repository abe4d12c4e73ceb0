"""Hostile or broken HTTP peers (issue 17, F3/F18): ddconsole never hangs, never holds a huge
body in memory, never crashes on a malformed stream, and stops a benchmark on a signal
whatever the server does.

Each peer is a real asyncio server on a free loopback port, run on its own thread; ddconsole
runs as a child process (`python -m console ...`), as a user runs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from console.core.net import free_port
from tests.conftest import REPO

Handler = Callable[[str, str, asyncio.StreamWriter], Awaitable[None]]


@contextmanager
def hostile(handler: Handler) -> Iterator[str]:
    """A server on 127.0.0.1 whose every request (method, path) is answered by `handler`."""
    port = free_port()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    tasks: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length = 0
                for line in lines[1:]:
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                if length:
                    await reader.readexactly(length)
                await handler(method, path.split("?")[0], writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def main() -> asyncio.Server:
        return await asyncio.start_server(serve, "127.0.0.1", port)

    def run() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(main())
        started.set()
        loop.run_forever()
        server.close()
        for task in list(tasks):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


async def not_found(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
    await writer.drain()


async def trickle(method: str, path: str, writer: asyncio.StreamWriter) -> None:
    """Promises a body, then sends one byte every half second."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n")
    while True:
        writer.write(b"#")
        await writer.drain()
        await asyncio.sleep(0.5)


async def endless(method: str, path: str, writer: asyncio.StreamWriter) -> None:
    """A chunked body that never ends (a comment line every 50 ms)."""
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    line = b"# more\n"
    while True:
        writer.write(b"%x\r\n%s\r\n" % (len(line), line))
        await writer.drain()
        await asyncio.sleep(0.05)


GIB = 1 << 30


async def huge(method: str, path: str, writer: asyncio.StreamWriter) -> None:
    """A 1 GiB body of 4 KiB comment lines, generated as it is sent."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % GIB)
    line = b"#" + b"a" * 4094 + b"\n"
    block = line * 256  # 1 MiB
    for _ in range(GIB // len(block)):
        writer.write(block)
        await writer.drain()


async def never_answers(method: str, path: str, writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(3600)


def malformed(chunk: bytes) -> Handler:
    """/generate streams `chunk` (and nothing valid); every other path is 404."""

    async def handle(method: str, path: str, writer: asyncio.StreamWriter) -> None:
        if path != "/generate":
            await not_found(writer)
            return
        body = b"data: " + chunk + b"\n\ndata: [DONE]\n\n"
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
        )
        await writer.drain()

    return handle


def ddconsole(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "console", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=os.environ.copy(),
    )


def metrics_once(url: str, timeout: float = 60) -> tuple[int, str, str, float]:
    start = time.monotonic()
    proc = ddconsole("metrics", "--once", "--no-managed", "--json", "--url", url)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"metrics --once against {url} still running after {timeout} s")
    return proc.returncode, out, err, time.monotonic() - start


def server_state(out: str) -> tuple[str, str]:
    document = json.loads(out)
    (server,) = [s for s in document["sources"] if s["name"].startswith("server")]
    return server["state"], server.get("reason") or ""


@pytest.mark.parametrize("peer", [trickle, endless], ids=["trickle", "endless-chunked"])
def test_metrics_once_returns_within_its_deadline_from_a_slow_body(peer: Handler) -> None:
    with hostile(peer) as url:
        code, out, err, took = metrics_once(url)
    assert code == 0, err
    state, reason = server_state(out)
    assert state == "stale", (state, reason)
    assert "no answer within" in reason
    # By design (interval 1 s): two readings, each at most 2 s of /server_info and 0.8 s of
    # /metrics (sglang_source.py), 1.1 s apart; the rest is interpreter start-up and a busy
    # machine's slack. The probe saw a hang.
    designed_s = 2 * (2.0 + 0.8) + 1.1
    assert took < designed_s + 10, took
    print(f"metrics --once against a {peer.__name__} peer: {took:.1f} s")


PEAK_WRAPPER = """
import resource, subprocess, sys
code = subprocess.call([sys.executable, "-m", "console", *sys.argv[1:]])
print(f"PEAK_KIB={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}", file=sys.stderr)
raise SystemExit(code)
"""


def test_a_1_gib_metrics_body_is_refused_at_its_cap_with_flat_memory() -> None:
    """The wrapper's only child is ddconsole, so RUSAGE_CHILDREN is that child's peak."""
    with hostile(huge) as url:
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", PEAK_WRAPPER, "metrics", "--once", "--no-managed", "--json",
             "--url", url],
            capture_output=True, text=True, cwd=REPO, env=os.environ.copy(), timeout=120,
        )  # fmt: skip
        took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    peak_kib = int(proc.stderr.rsplit("PEAK_KIB=", 1)[1])
    state, reason = server_state(proc.stdout)
    assert (state, reason) == ("unavailable", "/metrics body over 16 MiB")
    print(f"1 GiB /metrics: {took:.1f} s, peak RSS {peak_kib / 1024:.0f} MiB")
    assert peak_kib < 100 * 1024, peak_kib


def test_metrics_once_on_a_closed_port_says_connection_refused() -> None:
    code, out, err, _ = metrics_once(f"http://127.0.0.1:{free_port()}")
    assert code == 0, err
    assert server_state(out) == ("unavailable", "connection refused")


@pytest.mark.parametrize(
    "chunk",
    [
        b'{"text":"a","meta_info":{"completion_tokens":"abc"}}',
        b'{"error" oops not json',
        b'{"text":"a","meta_info":{"finish_reason":{"type":"length"},"completion_tokens":1,}}',
        b'{"text":"a","meta_info":{"finish_reason":{"type":"length"},"completion_tokens":1,'
        + b'"x":'
        + b"[" * 5000
        + b"]" * 5000
        + b"}}",
    ],
    ids=["count-not-a-number", "error-not-json", "final-not-json", "nested-too-deep"],
)
def test_a_malformed_stream_is_a_request_error_not_a_crash(chunk: bytes, tmp_path: Path) -> None:
    with hostile(malformed(chunk)) as url:
        proc = ddconsole(
            "bench", "--url", url, "--requests", "2", "--input-len", "8", "--output-len", "4",
            "--warmup", "0", "--out", str(tmp_path),
        )  # fmt: skip
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, (out, err)
    assert "internal error" not in err
    assert "Traceback" not in err
    assert "malformed stream chunk" in out + err
    (run,) = [p for p in tmp_path.iterdir() if (p / "run.json").is_file()]
    status = json.loads((run / "run.json").read_text())["status"]
    assert status != "running"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_a_bench_against_a_server_that_never_answers(
    sig: signal.Signals, tmp_path: Path
) -> None:
    """The stuck call is the warm-up request; the acceptance is 1 s, asserted with slack
    for a busy 2-core machine (the measured figure is printed)."""
    with hostile(never_answers) as url:
        proc = ddconsole(
            "bench", "--url", url, "--requests", "2", "--input-len", "8", "--output-len", "4",
            "--out", str(tmp_path),
        )  # fmt: skip
        # Wait until the run exists and the warm-up request is under way.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(tmp_path.glob("*/run.json")):
            time.sleep(0.1)
        time.sleep(1.0)
        assert proc.poll() is None, proc.communicate()
        sent = time.monotonic()
        proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"bench ignored {sig.name} for 30 s")
        took = time.monotonic() - sent
    print(f"bench stopped {took:.2f} s after {sig.name}")
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in out + err
    (run,) = [p for p in tmp_path.iterdir() if (p / "run.json").is_file()]
    assert json.loads((run / "run.json").read_text())["status"] == "interrupted"
    assert took < 5, took


def test_the_readiness_probe_has_a_total_deadline_against_a_trickling_peer() -> None:
    """A peer that sends its status line a byte at a time passes every per-read timeout;
    the probe still ends by its own deadline, as a timeout."""
    import socket
    import threading

    from console.server.manager import probe_ready
    from console.server.status import Probe

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            for byte in b"HTTP/1.1 200 OK\r\n" * 100:
                if stop.is_set():
                    return
                try:
                    conn.send(bytes([byte]))
                except OSError:
                    return
                time.sleep(0.1)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        start = time.monotonic()
        result = probe_ready(f"http://127.0.0.1:{port}", 0.5)
        took = time.monotonic() - start
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=5)
    assert result is Probe.TIMEOUT
    assert took < 5, took


def stalls_at(stage: str) -> Handler:
    """A peer that answers like a server until `stage`, then never finishes it:
    `warmup` (the warm-up /generate gets no answer), `stream` (every /generate streams
    tokens forever, one event each 50 ms, never a final one) or `flush` (/flush_cache gets
    no answer). /server_info answers `{}` and /metrics 404 (both optional to a benchmark)."""

    async def handle(method: str, path: str, writer: asyncio.StreamWriter) -> None:
        if path == "/server_info":
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            )
            await writer.drain()
        elif path == "/generate" and stage == "stream":
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            count = 0
            while True:
                count += 1
                event = b'data: {"text":"a","meta_info":{"completion_tokens":%d}}\n\n' % count
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
                await asyncio.sleep(0.05)
        elif (path == "/generate" and stage == "warmup") or (
            path == "/flush_cache" and stage == "flush"
        ):
            await asyncio.sleep(3600)
        else:
            await not_found(writer)

    return handle


@pytest.mark.parametrize(
    ("stage", "extra"),
    [("warmup", ("--warmup", "1")), ("stream", ("--warmup", "0")), ("flush", ("--flush-cache",))],
)
def test_sigint_stops_a_bench_stuck_at_any_stage(
    stage: str, extra: tuple[str, ...], tmp_path: Path
) -> None:
    """SIGINT while the warm-up request, an endless token stream or /flush_cache is pending:
    the bench ends `interrupted` (status 130) about a second later. The peer logs what it
    was asked, so the test knows the stuck call was under way when the signal went in."""
    seen: list[str] = []
    peer = stalls_at(stage)

    async def logging(method: str, path: str, writer: asyncio.StreamWriter) -> None:
        seen.append(path)
        await peer(method, path, writer)

    stuck_path = "/flush_cache" if stage == "flush" else "/generate"
    with hostile(logging) as url:
        proc = ddconsole(
            "bench", "--url", url, "--requests", "2", "--concurrency", "1", "--input-len", "8",
            "--output-len", "4", "--out", str(tmp_path), *extra,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and stuck_path not in seen:
            time.sleep(0.05)
        assert stuck_path in seen, (seen, proc.poll())
        time.sleep(0.5)  # well inside the stuck call
        assert proc.poll() is None, proc.communicate()
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"bench stuck at {stage} ignored SIGINT for 30 s")
        took = time.monotonic() - sent
    print(f"bench stuck at {stage}: stopped {took:.2f} s after SIGINT")
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    (run,) = [p for p in tmp_path.iterdir() if (p / "run.json").is_file()]
    assert json.loads((run / "run.json").read_text())["status"] == "interrupted"
    # The acceptance is 1 s; measured well under it on an idle machine (printed above),
    # asserted with room for a loaded 2-core CI box.
    assert took < 5, took
