"""Requests sent at exact times (a trace replay): a thread of its own writes each request on
a connection opened ahead, at its send time, while the event loop may be busy reading other
requests' streams; the loop then reads the response.

The event loop wakes late whenever the callbacks of one of its turns (stream chunks, the
next prompt) outlast a send time; a thread asleep in `time.sleep` wakes on time and needs
only the GIL, which the loop's thread hands over within the switch interval (shortened while
the thread runs). Plain HTTP only: the caller keeps the ordinary client for `https`.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from queue import SimpleQueue
from typing import Any
from urllib.parse import urlsplit

import httptools

from console.bench.client import Endpoint, RequestResult, guarded, read_response

SWITCH_INTERVAL_S = 0.0005
"""The GIL switch interval while the send thread runs (CPython's default is 5 ms): how long
the woken thread may wait for the loop's thread to let go."""
CONNECT_TIMEOUT_S = 10.0
READ_BYTES = 1 << 20
"""At most this much is taken per read: the native stream's events repeat the whole text so
far (hundreds of KiB late in a long answer), and an event read in few pieces is cheap."""


def can_send_timed(url: str, headers: dict[str, str] | None = None) -> bool:
    """Whether the send thread speaks to `url` (plain HTTP) with these headers (none that
    would break the request's head; the ordinary client refuses those with its own error)."""
    text = "".join(f"{name}{value}" for name, value in (headers or {}).items())
    return urlsplit(url).scheme == "http" and "\r" not in text and "\n" not in text


_switch_lock = threading.Lock()
_switch_users = 0
_switch_default = sys.getswitchinterval()


def _shorten_switch_interval() -> None:
    """While any send thread runs, the GIL changes hands every `SWITCH_INTERVAL_S`."""
    global _switch_users, _switch_default
    with _switch_lock:
        if _switch_users == 0:
            _switch_default = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        _switch_users += 1


def _restore_switch_interval() -> None:
    global _switch_users
    with _switch_lock:
        _switch_users -= 1
        if _switch_users == 0:
            sys.setswitchinterval(_switch_default)


@dataclass(eq=False)
class _Job:
    sock: socket.socket
    payload: bytes
    due: float
    """`perf_counter` time to send at."""
    loop: asyncio.AbstractEventLoop
    sent: asyncio.Future[tuple[float, float]]
    """Set to (wall time, perf_counter time) once the request is written."""
    withdrawn: bool = False
    sent_wall: float | None = None


def _settle(future: asyncio.Future[tuple[float, float]], outcome: object) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)  # type: ignore[arg-type]


class _SendThread:
    """Writes each job's bytes at its due time, in the order submitted (a trace's order)."""

    def __init__(self, write_timeout_s: float) -> None:
        self._timeout = write_timeout_s
        self._jobs: SimpleQueue[_Job | None] = SimpleQueue()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="timed-send", daemon=True)

    def start(self) -> None:
        _shorten_switch_interval()
        self._thread.start()

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join()
        _restore_switch_interval()

    def submit(self, job: _Job) -> None:
        self._jobs.put(job)

    def withdraw(self, job: _Job) -> float | None:
        """Keep the job from being sent; the wall time it was sent at if too late for that."""
        with self._lock:
            job.withdrawn = True
            return job.sent_wall

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            delay = job.due - time.perf_counter()
            if delay > 0 and not job.withdrawn:
                time.sleep(delay)
            with self._lock:
                if job.withdrawn:
                    continue
                job.sent_wall = time.time()
            outcome: object
            try:
                sent = (job.sent_wall, time.perf_counter())
                job.sock.settimeout(self._timeout)
                job.sock.sendall(job.payload)
                job.sock.setblocking(False)
                outcome = sent
            except OSError as exc:
                outcome = exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                job.loop.call_soon_threadsafe(_settle, job.sent, outcome)


@dataclass
class _Reply:
    """httptools' callbacks: the status once the head is in, body pieces as they come."""

    head_done: bool = False
    complete: bool = False
    body: list[bytes] = field(default_factory=list)

    def on_headers_complete(self) -> None:
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class TimedSender:
    """Sends a level's requests at their due times from a thread (`async with` it around the
    level); each response is read on the event loop like any other."""

    def __init__(
        self,
        url: str,
        endpoint: Endpoint,
        *,
        headers: dict[str, str],
        time_scale: float,
        read_timeout_s: float | None,
    ) -> None:
        parts = urlsplit(url + endpoint.path)
        self.endpoint = endpoint
        self.time_scale = time_scale
        self._read_timeout = read_timeout_s
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        lines = [
            f"POST {parts.path or '/'} HTTP/1.1",
            f"Host: {parts.netloc}",
            "Content-Type: application/json",
            "Connection: close",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        self._head = "\r\n".join(lines).encode()
        self._address: tuple[socket.AddressFamily, tuple[Any, ...]] | None = None
        self._thread = _SendThread(CONNECT_TIMEOUT_S)

    async def __aenter__(self) -> TimedSender:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
        if infos:
            self._address = (infos[0][0], infos[0][4])
        self._thread.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        # The thread ends once the jobs before its stop are due (the lookahead at most).
        await asyncio.to_thread(self._thread.close)

    def payload(self, body: bytes) -> bytes:
        """The whole request as written: head, then the JSON body."""
        return b"%s\r\nContent-Length: %d\r\n\r\n%s" % (self._head, len(body), body)

    async def send(
        self, payload: bytes, due: float, on_sent: Callable[[float], None]
    ) -> RequestResult:
        """Connect now, send `payload` at `due` (`perf_counter`) from the thread, read the
        response here. `on_sent(wall time)` is called once the request is written, so a
        caller cancelled later knows it was (never called: nothing was sent)."""
        loop = asyncio.get_running_loop()
        result = RequestResult(send_wall=time.time())
        if self._address is None:
            result.error = "connection refused: the server's address does not resolve"
            return result
        family, address = self._address
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        with contextlib.ExitStack() as cleanup:
            cleanup.callback(sock.close)
            try:
                await asyncio.wait_for(loop.sock_connect(sock, address), CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                result.error = (
                    "timed out connecting"
                    if isinstance(exc, TimeoutError)
                    else "connection refused"
                )
                return result
            job = _Job(sock, payload, due, loop, loop.create_future())
            self._thread.submit(job)
            try:
                sent_wall, start = await job.sent
            except asyncio.CancelledError:
                wall = self._thread.withdraw(job)
                if wall is not None:
                    on_sent(wall)
                raise
            except OSError as exc:
                result.send_wall = job.sent_wall or result.send_wall
                on_sent(result.send_wall)
                result.error = f"connection error: {exc}"
                return result
            result.send_wall = sent_wall
            result.send_late_s = start - due
            on_sent(sent_wall)
            reader, writer = await asyncio.open_connection(sock=sock, limit=READ_BYTES)
            cleanup.pop_all()
            try:
                await guarded(self._read(reader, result, start), result)
            finally:
                writer.close()
        return result

    async def _read(
        self, reader: asyncio.StreamReader, result: RequestResult, start: float
    ) -> None:
        reply = _Reply()
        parser = httptools.HttpResponseParser(reply)
        while not reply.head_done:
            _feed(parser, await self._next(reader))
        await read_response(
            self.endpoint,
            parser.get_status_code(),
            self._body(reader, parser, reply),
            result,
            start,
            self.time_scale,
        )

    async def _body(
        self, reader: asyncio.StreamReader, parser: httptools.HttpResponseParser, reply: _Reply
    ) -> AsyncIterator[bytes]:
        """The body as it was read: one item per network read, HTTP framing removed."""
        while True:
            if reply.body:
                data = b"".join(reply.body)
                reply.body.clear()
                yield data
            if reply.complete:
                return
            _feed(parser, await self._next(reader))

    async def _next(self, reader: asyncio.StreamReader) -> bytes:
        data = await asyncio.wait_for(reader.read(READ_BYTES), self._read_timeout)
        if not data:
            raise ConnectionError("server disconnected")
        return data


def _feed(parser: httptools.HttpResponseParser, data: bytes) -> None:
    try:
        parser.feed_data(data)
    except httptools.HttpParserError as exc:
        raise ValueError(f"not an HTTP response: {exc}") from exc
