"""The `Authorization: Bearer` header SGLang's `--api-key` and `--admin-api-key` expect.

Profiles name the environment variable that holds a key, never the key; every client that
talks to a server with a key (benchmark levels, the run's metrics recorder, the console's
sources) builds or reads the header here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

_PREFIX = "Bearer "


def env_key(name: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The key held by the variable `name` (None when no variable is named or it is empty)."""
    if not name:
        return None
    return (os.environ if environ is None else environ).get(name) or None


def bearer(key: str | None) -> dict[str, str]:
    """The header that carries `key` (empty without a key)."""
    return {"Authorization": f"{_PREFIX}{key}"} if key else {}


def bearer_from_env(name: str | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The header for the key in variable `name`; empty when unnamed or unset."""
    return bearer(env_key(name, environ))


def bearer_key(headers: Mapping[str, str]) -> str | None:
    """The key `bearer` put in these headers, for clients that take the key itself."""
    value = headers.get("Authorization", "")
    return value[len(_PREFIX) :] or None if value.startswith(_PREFIX) else None
