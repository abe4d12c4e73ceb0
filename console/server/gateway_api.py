"""SGLang's model gateway's worker API (`smg` 1.13.0): list, register and remove workers.

`POST /workers` answers 202 and registers in the background; `DELETE /workers/{id}` takes
the gateway's own worker id (listed by `GET /workers`). A worker registered here carries
`health.drain_settle_secs = 0`, so a removal takes it out at once rather than after smg's
5 s drain window (smg model_gateway/src/workflow/steps/local/drain_workers.rs): ddconsole
removes a worker only when its process is gone or is about to be stopped, and the stop
itself lets requests in flight finish.
"""

from __future__ import annotations

import contextlib
import http.client
import json
from typing import Any
from urllib.parse import quote, urlsplit

from console.core.errors import ConsoleError


class GatewayError(ConsoleError):
    """The gateway did not answer, or refused a worker request."""


class GatewayClient:
    """Blocking calls to one gateway, each on a fresh connection with `timeout`."""

    def __init__(self, url: str, timeout: float = 2.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        parts = urlsplit(self.url)
        connection = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port, timeout=self.timeout
        )
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        try:
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise GatewayError(f"gateway {self.url}: {method} {path} failed ({exc})") from None
        finally:
            connection.close()
        data: Any = None
        with contextlib.suppress(ValueError):
            data = json.loads(raw) if raw else None
        return response.status, data

    def workers(self) -> list[dict[str, Any]]:
        """The gateway's workers as `GET /workers` lists them (url, id, status, ...)."""
        status, data = self._call("GET", "/workers")
        if status != 200 or not isinstance(data, dict) or not isinstance(data.get("workers"), list):
            raise GatewayError(f"gateway {self.url}: GET /workers answered {status}")
        return [w for w in data["workers"] if isinstance(w, dict)]

    def worker_urls(self) -> list[str]:
        return [str(w.get("url")) for w in self.workers()]

    def add(self, worker_url: str) -> None:
        """Register `worker_url`; one already registered is left as it is."""
        body = {"url": worker_url, "health": {"drain_settle_secs": 0}}
        status, data = self._call("POST", "/workers", body)
        if status in (200, 201, 202, 409):
            return
        detail = data.get("error") if isinstance(data, dict) else None
        raise GatewayError(
            f"gateway {self.url}: registering {worker_url} answered {status}"
            + (f" ({detail})" if detail else "")
        )

    def remove(self, worker_url: str) -> bool:
        """Take `worker_url` out of the gateway; False when it was not registered."""
        ids = [str(w.get("id")) for w in self.workers() if w.get("url") == worker_url]
        for worker_id in ids:
            status, _ = self._call("DELETE", f"/workers/{quote(worker_id, safe='')}")
            if status not in (200, 202, 204, 404):
                raise GatewayError(f"gateway {self.url}: removing {worker_url} answered {status}")
        return bool(ids)
