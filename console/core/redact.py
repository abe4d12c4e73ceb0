"""Secrets never leave: API keys and tokens in argv, env, JSON and log text become `***`.

Two nets: the known secret values themselves (read from the env vars profiles name, and any
variable whose name says it is a secret), and patterns for flags, headers, `key=value` and
JSON fields that carry one, so a key we were not told about is still caught by its shape.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
MIN_SECRET_LEN = 4
SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|AUTHORIZATION|CREDENTIALS?)(?:$|_)",
    re.IGNORECASE,
)
SECRET_FLAG = re.compile(r"(?:api-key|token|secret|password)$")
# JSON fields that hold a secret (not `bos_token_id` or `max_total_tokens`).
SECRET_KEY = re.compile(
    r"(?:^|_)(?:api_?key|access_token|auth_token|hf_token|secret(?:_key)?|password|passwd|"
    r"authorization|credentials?)$|^token$",
    re.IGNORECASE,
)
_PATTERNS = (
    # --api-key VALUE, --admin-api-key=VALUE, --hf-token VALUE
    re.compile(
        r"(--[A-Za-z0-9-]*(?:api-key|token|secret|password)(?:=|\s+))(?!\*\*\*)([^\s'\",]+)"
    ),
    # Authorization: Bearer VALUE
    re.compile(
        r"((?:Authorization|authorization)['\"]?\s*[:=]\s*['\"]?(?:Bearer|Basic)\s+)([^\s'\",]+)"
    ),
    # api_key='VALUE', "access_token": "VALUE" (a log's `#token: 512` is a count, not this)
    re.compile(
        r"(\b[A-Za-z0-9_]*(?:api_?key|apikey|access_token|auth_token|hf_token|secret_key|"
        r"password|passwd)['\"]?\s*[:=]\s*['\"]?)"
        r"(?!\*\*\*)(?!None\b|null\b|true\b|false\b)([^\s'\",}\)]+)",
        re.IGNORECASE,
    ),
    # HF_TOKEN=VALUE, OPENAI_API_KEY=VALUE (environment style)
    re.compile(r"(\b[A-Z0-9_]*(?:TOKEN|API_KEY|SECRET|PASSWORD)(?:_[A-Z0-9_]*)?=)(?!\*\*\*)(\S+)"),
)


def secret_values(environ: Mapping[str, str] | None = None, names: Iterable[str] = ()) -> set[str]:
    """Values of the named variables and of every variable whose name marks a secret."""
    env = os.environ if environ is None else environ
    wanted = set(names) | {k for k in env if SECRET_NAME.search(k)}
    return {env[k] for k in wanted if k in env and len(env[k]) >= MIN_SECRET_LEN}


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_SECRET_LEN:
            text = text.replace(secret, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text


def redact_argv(argv: Iterable[str], secrets: Iterable[str] = ()) -> list[str]:
    """An argv with the value after a secret-bearing flag masked."""
    out: list[str] = []
    hide = False
    secrets = set(secrets)
    for part in argv:
        if hide:
            out.append(MASK)
            hide = False
            continue
        flag = part.split("=", 1)[0]
        if part.startswith("--") and SECRET_FLAG.search(flag):
            if "=" in part:
                out.append(f"{flag}={MASK}")
            else:
                out.append(part)
                hide = True
            continue
        out.append(redact_text(part, secrets))
    return out


def redact_json(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of JSON-like data with secret fields and secret-looking text masked."""
    secrets = set(secrets)
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if isinstance(key, str) and SECRET_KEY.search(key.replace("-", "_")) and item:
                out[key] = (
                    MASK if isinstance(item, str | int | float) else redact_json(item, secrets)
                )
            elif key == "argv" and isinstance(item, list | tuple):
                out[key] = redact_argv([str(a) for a in item], secrets)
            else:
                out[key] = redact_json(item, secrets)
        return out
    if isinstance(value, list | tuple):
        return [redact_json(item, secrets) for item in value]
    if isinstance(value, str):
        return redact_text(value, secrets)
    return value
