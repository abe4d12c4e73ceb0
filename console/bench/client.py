"""One streamed request, timed as DESIGN 4 defines: TTFT, per-request ITL, chunk gaps.

Runs on `httpx.AsyncClient` over the `httpx-aiohttp` transport. The native `/generate` stream
repeats the whole text so far in every chunk; only `completion_tokens` is read from each
chunk (a byte search), and only the final chunk is decoded in full.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import time
from array import array
from collections.abc import AsyncIterator, Awaitable
from enum import StrEnum

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from console.bench.results import JsonDict, histogram_counts

# RequestResult lives with the other run results; the client fills it, so it is named here too.
from console.bench.results import RequestResult as RequestResult
from console.bench.workload import Prompt

_COMPLETION = b'"completion_tokens":'
MAX_EVENT_BYTES = 16 * 1024 * 1024
"""One SSE event longer than this is a broken stream (the native stream repeats the whole text
so far in each event: a few hundred kilobytes at most)."""


class Endpoint(StrEnum):
    GENERATE = "generate"
    CHAT = "chat"
    COMPLETIONS = "completions"

    @property
    def path(self) -> str:
        return {
            "generate": "/generate",
            "chat": "/v1/chat/completions",
            "completions": "/v1/completions",
        }[self.value]


def make_client(
    concurrency: int, timeout_s: float = 600.0, *, verify: bool = False
) -> httpx.AsyncClient:
    """One client per run, its pool sized to the concurrency (httpx caps at 100 otherwise)."""
    size = max(1, concurrency) + 4
    limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
    return httpx.AsyncClient(
        # Servers here speak plain HTTP: skip loading the CA bundle (tens of milliseconds).
        transport=AiohttpTransport(limits=limits, trust_env=False, verify=verify),
        timeout=httpx.Timeout(timeout_s, connect=10.0),
        trust_env=False,
    )


def describe_error(exc: BaseException, chunks: int) -> str:
    """What went wrong, by the underlying aiohttp error: httpx-aiohttp maps several
    connection failures (a server that disconnects, say) onto timeout classes."""
    cause = exc.__cause__ or exc
    kind = type(cause).__name__
    where = f" after {chunks} chunks" if chunks else ""
    if isinstance(cause, aiohttp.ServerDisconnectedError):
        return f"server disconnected{where}"
    if isinstance(cause, aiohttp.ClientConnectorError):
        return "connection refused"
    if isinstance(cause, aiohttp.ClientPayloadError):
        return f"stream broken{where}: {cause}"
    if isinstance(cause, aiohttp.SocketTimeoutError | TimeoutError) or (
        isinstance(exc, httpx.TimeoutException) and cause is exc
    ):
        return f"timed out{where}"
    if isinstance(cause, aiohttp.ClientOSError | ConnectionError):
        return f"connection error{where}: {cause}"
    return f"{kind}{where}: {cause}"


def request_body(endpoint: Endpoint, prompt: Prompt, model: str | None) -> JsonDict:
    if endpoint is Endpoint.GENERATE:
        body: JsonDict = {
            "stream": True,
            "sampling_params": {
                "max_new_tokens": prompt.output_len,
                "ignore_eos": True,
                "temperature": 0.0,
            },
        }
        if prompt.input_ids is not None:
            body["input_ids"] = list(prompt.input_ids)
        else:
            body["text"] = prompt.text
        return body
    common: JsonDict = {
        "model": model or "default",
        "stream": True,
        "max_tokens": prompt.output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream_options": {"include_usage": True},
        "return_spec_tokens_details": True,
    }
    if endpoint is Endpoint.CHAT:
        text = (
            prompt.text
            if prompt.text is not None
            else " ".join(str(i) for i in prompt.input_ids or ())
        )
        return {**common, "messages": [{"role": "user", "content": text}]}
    return {
        **common,
        "prompt": list(prompt.input_ids) if prompt.input_ids is not None else prompt.text,
    }


def ids_sent(endpoint: Endpoint, prompt: Prompt) -> int | None:
    """How many token ids the request carries: None for text, and for the chat endpoint,
    which sends ids as the words of a message."""
    if prompt.input_ids is None or endpoint is Endpoint.CHAT:
        return None
    return len(prompt.input_ids)


def encode_body(endpoint: Endpoint, prompt: Prompt, model: str | None) -> bytes:
    """The request body as sent (JSON bytes)."""
    return json.dumps(request_body(endpoint, prompt, model), separators=(",", ":")).encode()


async def run_request(
    client: httpx.AsyncClient,
    url: str,
    endpoint: Endpoint,
    prompt: Prompt,
    *,
    model: str | None = None,
    headers: dict[str, str] | None = None,
    time_scale: float = 1.0,
    body: bytes | None = None,
) -> RequestResult:
    """Send one streamed request and time it; errors become `result.error`, never raise.
    `body` is `encode_body`'s for the prompt when the caller made it ahead; otherwise it is
    made here."""
    # Serialised and built before the clock starts: only the exchange is timed.
    content = body if body is not None else encode_body(endpoint, prompt, model)
    request = httpx.Request(
        "POST",
        _parsed_url(url + endpoint.path),
        content=content,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    result = RequestResult(send_wall=time.time(), input_len=ids_sent(endpoint, prompt))
    start = time.perf_counter()

    async def exchange() -> None:
        async with _streamed(client, request) as response:
            await read_response(
                endpoint, response.status_code, response.aiter_raw(), result, start, time_scale
            )

    await guarded(exchange(), result)
    return result


async def read_response(
    endpoint: Endpoint,
    status: int,
    reads: AsyncIterator[bytes],
    result: RequestResult,
    start: float,
    scale: float,
) -> None:
    """Time a response from its status and its body as read off the network (`reads`: one
    item per read), the request having been sent at `start` (`perf_counter`)."""
    if status != 200:
        text = (await _head(reads, 300)).decode(errors="replace")
        result.error = f"HTTP {status}: {text.strip()}"
    elif endpoint is Endpoint.GENERATE:
        await _read_native(reads, result, start, scale)
    else:
        await _read_openai(reads, result, start, scale, endpoint)


async def guarded(exchange: Awaitable[None], result: RequestResult) -> None:
    """Run a request's exchange; what goes wrong becomes `result.error`, never raises."""
    try:
        await exchange
    except httpx.HTTPError as exc:
        result.error = describe_error(exc, result.chunks)
    except (aiohttp.ClientError, ConnectionError, TimeoutError) as exc:
        result.error = describe_error(exc, result.chunks)
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError) as exc:
        # A chunk that is not what SGLang sends (invalid JSON after `data:`, a count that is
        # not a number, nesting too deep to parse): this request failed, the benchmark goes on.
        where = f" after {result.chunks} chunks" if result.chunks else ""
        result.error = f"malformed stream chunk{where}: {type(exc).__name__}: {exc}"[:300]
    if result.error is None and result.output_tokens is None:
        result.error = f"stream ended without a final chunk after {result.chunks} chunks"


@functools.lru_cache(maxsize=64)
def _parsed_url(url: str) -> httpx.URL:
    return httpx.URL(url)


@contextlib.asynccontextmanager
async def _streamed(
    client: httpx.AsyncClient, request: httpx.Request
) -> AsyncIterator[httpx.Response]:
    response = await client.send(request, stream=True)
    try:
        yield response
    finally:
        await response.aclose()


def _count(value: object) -> int | None:
    """A token count from a chunk, or None when the server sent something else."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


async def _head(reads: AsyncIterator[bytes], limit: int) -> bytes:
    """The first `limit` bytes of a body, never more read (an error page may be huge)."""
    data = b""
    async for chunk in reads:
        data += chunk
        if len(data) >= limit:
            break
    return data[:limit]


def _events(buffer: bytes) -> tuple[list[bytes], bytes]:
    parts = buffer.split(b"\n\n")
    return parts[:-1], parts[-1]


def _finish(
    result: RequestResult,
    start: float,
    first: float | None,
    last: float | None,
    now: float,
    scale: float,
) -> None:
    result.e2e_s = (now - start) * scale
    if first is not None:
        result.ttft_s = (first - start) * scale
    tokens = result.output_tokens or 0
    if first is not None and last is not None and tokens > 1:
        result.itl_s = (last - first) * scale / (tokens - 1)


async def _read_native(
    reads: AsyncIterator[bytes], result: RequestResult, start: float, scale: float
) -> None:
    """Per network read, not per event: events that arrive in the same read arrived at the
    same instant, so they are counted (in C, `bytes.count`) and only the last one's
    `completion_tokens` is read (searched from the end, where meta_info sits). Only the final
    chunk is decoded as JSON. Raw newlines never occur inside SSE JSON, so `\\n\\n` marks
    event ends exactly."""
    pending = b""
    first: float | None = None
    last: float | None = None
    previous_read: float | None = None
    tokens = 0
    final: bytes | None = None
    gaps = result.chunk_gaps_us
    chunks = 0
    token_chunks = 0
    async for data in reads:
        now = time.perf_counter()
        if pending:
            data = pending + data
        cut = data.rfind(b"\n\n")
        if cut < 0:
            if len(data) > MAX_EVENT_BYTES:
                raise ValueError("stream event over 16 MiB")
            pending = data
            continue
        pending = data[cut + 2 :]
        # Event ends, walked backwards (rfind is memrchr-fast; count is not).
        last_start = data.rfind(b"\n\n", 0, cut) + 2  # 0 when the read holds one event
        events = 1
        boundary = last_start - 2
        while boundary >= 0:
            events += 1
            boundary = data.rfind(b"\n\n", 0, boundary)
        if data.endswith(b"data: [DONE]", 0, cut):
            events -= 1
            if events <= 0:
                continue
            cut = last_start - 2
            last_start = data.rfind(b"\n\n", 0, cut) + 2
        found = data.rfind(_COMPLETION, last_start, cut)
        if found < 0:
            error_at = data.find(b'data: {"error"', 0, cut)
            if error_at >= 0:
                end = data.find(b"\n\n", error_at)
                message = json.loads(data[error_at + 6 : end]).get("error", {})
                result.error = str(message.get("message", message))
                result.chunks = chunks + events
                return
            continue
        begin = found + len(_COMPLETION)
        stop = data.find(b",", begin, cut)
        if stop < 0:
            stop = data.find(b"}", begin, cut)
        count = int(data[begin:stop])
        chunks += events
        if previous_read is not None:
            gaps.append(int((now - previous_read) * scale * 1e6))
        if events > 1:
            gaps.extend(array("q", bytes(8 * (events - 1))))
        previous_read = now
        if count > tokens:
            if first is None:
                first = now
            last = now
            tokens = count
            token_chunks += events
        reason = data.rfind(b'"finish_reason":', last_start, found)
        if reason >= 0 and data[reason + 16 : reason + 17] == b"{":
            final = data[last_start:cut]
    result.chunks = chunks
    result.token_chunks = token_chunks
    now = time.perf_counter()
    result.output_tokens = tokens if final is not None else None
    if final is not None:
        meta = json.loads(final[final.index(b"{") :]).get("meta_info", {})
        result.prompt_tokens = _count(meta.get("prompt_tokens"))
        result.spec_verify_ct = _count(meta.get("spec_verify_ct"))
        result.accept_length = _number(meta.get("spec_accept_length"))
        result.dp_rank = _count(meta.get("dp_rank"))  # null on a dp-1 server
        # Only in a finished request's meta_info (sglang 0.5.23
        # srt/managers/tokenizer_manager.py:2755-2756, 3194-3201).
        result.spec_correct_drafts_histogram = histogram_counts(
            meta.get("spec_correct_drafts_histogram")
        )
        reason_info = meta.get("finish_reason")
        result.finish_reason = reason_info.get("type") if isinstance(reason_info, dict) else None
    _finish(result, start, first, last, now, scale)


async def _read_openai(
    reads: AsyncIterator[bytes],
    result: RequestResult,
    start: float,
    scale: float,
    endpoint: Endpoint,
) -> None:
    buffer = b""
    first: float | None = None
    last: float | None = None
    previous_chunk: float | None = None
    async for data in reads:
        now = time.perf_counter()
        buffer += data
        events, buffer = _events(buffer)
        if len(buffer) > MAX_EVENT_BYTES:
            raise ValueError("stream event over 16 MiB")
        for event in events:
            if not event.startswith(b"data: {"):
                continue
            chunk = json.loads(event[6:])
            if "error" in chunk and "choices" not in chunk:
                result.error = str(chunk["error"])
                return
            result.chunks += 1
            if previous_chunk is not None:
                result.chunk_gaps_us.append(int((now - previous_chunk) * scale * 1e6))
            previous_chunk = now
            for choice in chunk.get("choices") or ():
                if endpoint is Endpoint.CHAT:
                    # Thinking tokens are output too: with a --reasoning-parser they arrive
                    # in delta.reasoning_content (sglang 0.5.23
                    # srt/entrypoints/openai/serving_chat.py:973-1000).
                    delta = choice.get("delta") or {}
                    piece = delta.get("content") or delta.get("reasoning_content")
                else:
                    piece = choice.get("text")
                if piece:
                    if first is None:
                        first = now
                    last = now
                    result.token_chunks += 1
                if choice.get("finish_reason"):
                    result.finish_reason = choice["finish_reason"]
            details = (chunk.get("sglext") or {}).get("spec_tokens_details")
            if isinstance(details, dict):
                result.spec_verify_ct = _count(details.get("spec_verify_ct"))
                result.accept_length = _number(details.get("spec_accept_length"))
                # `[]` when the server had none (sglang 0.5.23
                # srt/entrypoints/openai/protocol.py:456-467).
                result.spec_correct_drafts_histogram = histogram_counts(
                    details.get("spec_correct_drafts_histogram")
                )
            usage = chunk.get("usage")
            if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
                result.output_tokens = int(usage["completion_tokens"])
                result.prompt_tokens = _count(usage.get("prompt_tokens"))
    _finish(result, start, first, last, time.perf_counter(), scale)
