"""HTTP calls with a total deadline and a body size cap.

`httpx` timeouts are per read: a peer that trickles one byte every half second, or sends a
chunked body that never ends, keeps a plain `client.get` waiting for ever, and a 1 GiB body
sits whole in memory. Every call ddconsole makes to a server that is not a benchmark stream
goes through `request_capped`: the body is read by streaming, the whole exchange races one
deadline, and reading stops (the connection is dropped) as soon as the body passes its cap.
Both failures are `httpx.HTTPError`s, so existing `except httpx.HTTPError` clauses hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx

from console.core.jsonio import load_json_text

MiB = 1024 * 1024
METRICS_MAX_BYTES = 16 * MiB
"""A `/metrics` page: SGLang's, with every histogram, is tens of kilobytes per DP rank."""
JSON_MAX_BYTES = 4 * MiB
"""`/server_info`, `/get_model_info`, `/flush_cache` and the like: a few kilobytes."""


def size_text(n: int) -> str:
    """16777216 -> '16 MiB'; 1500 -> '1500 bytes'."""
    if n >= MiB and n % MiB == 0:
        return f"{n // MiB} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


class BodyTooLarge(httpx.HTTPError):
    """The answer's body passed its cap; reading stopped there."""


class DeadlineExceeded(httpx.TimeoutException):
    """No complete answer within the call's total deadline."""


@dataclass(frozen=True)
class CappedResponse:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON (`ValueError` when it is not, or is nested too deeply)."""
        return load_json_text(self.content.decode("utf-8", errors="replace"))


def _path(url: str) -> str:
    try:
        return httpx.URL(url).path or url
    except (httpx.InvalidURL, TypeError):
        return url


async def request_capped(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    deadline_s: float,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
) -> CappedResponse:
    """The status and the whole body, read within `deadline_s` in total and at most
    `max_bytes` long. Raises `DeadlineExceeded` (an `httpx.TimeoutException`), `BodyTooLarge`
    (an `httpx.HTTPError`) naming the path and the cap, or any other `httpx.HTTPError`."""
    path = _path(url)
    try:
        async with asyncio.timeout(deadline_s):
            async with client.stream(
                method,
                url,
                headers=dict(headers) if headers else None,
                params=dict(params) if params else None,
                timeout=deadline_s,
            ) as response:
                parts: list[bytes] = []
                size = 0
                async for chunk in response.aiter_raw():
                    size += len(chunk)
                    if size > max_bytes:
                        raise BodyTooLarge(f"{path} body over {size_text(max_bytes)}")
                    parts.append(chunk)
                return CappedResponse(response.status_code, b"".join(parts))
    except TimeoutError:
        raise DeadlineExceeded(f"{path}: no complete answer within {deadline_s:g} s") from None


async def get_capped(
    client: httpx.AsyncClient,
    url: str,
    *,
    deadline_s: float,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
) -> CappedResponse:
    return await request_capped(
        client,
        "GET",
        url,
        deadline_s=deadline_s,
        max_bytes=max_bytes,
        headers=headers,
        params=params,
    )


def connection_refused(exc: BaseException) -> bool:
    """True when nothing listens there. httpx-aiohttp maps aiohttp's connector errors onto
    `httpx.ConnectTimeout` (a connection error is also a timeout in its table), so the cause
    is looked at too."""
    if isinstance(exc, httpx.ConnectError):
        return True
    cause = exc.__cause__
    if isinstance(cause, aiohttp.ClientConnectorError):
        return True
    return isinstance(cause, ConnectionRefusedError)
