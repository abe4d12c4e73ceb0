"""Secrets never leave: API keys and tokens in argv, env, JSON and log text become `***`.

Two nets: the known secret values themselves (read from the env vars profiles name, any
variable whose name says it is a secret, and the values after secret flags in an argv), and
shapes of flags, headers, `name=value`, JSON fields and well-known token formats that carry
one, so a key we were not told about is still caught. One vocabulary decides what a secret
name is, for env variables, JSON fields and command-line flags alike.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
MIN_SECRET_LEN = 4

# A name is secret when one of its `_`-separated parts says so: api_key, admin_api_key,
# ssl_keyfile_password, watermark_key, watermark_key_b, hf_token, OPENAI_API_KEY,
# AWS_SECRET_ACCESS_KEY. `tokens`, `tokenizer` and `keyfile` are other words.
_SECRET_PART = re.compile(
    r"(?:^|_)(?:api_?key|apikey|key|token|secret|password|passwd|authorization|credentials?)"
    r"(?:_|$)",
    re.IGNORECASE,
)
# Holds the watermark key pair inline (sglang 0.5.23 srt/arg_groups/fields/exec_.py:78-83).
_SECRET_NAMES = frozenset({"watermark_config"})
# Where a secret lives is not a secret: tokenizer_path, speculative_token_map, HF_TOKEN_PATH.
_NOT_SECRET_SUFFIX = ("_path", "_map", "_file", "_dir")

# The real parser's flags that carry a secret (sglang 0.5.23
# srt/arg_groups/fields/serving.py:148,160,164 and exec_.py:78). Its parser abbreviates
# (argparse allow_abbrev, srt/server_args.py:679): `--ap`, `--admin-api-k` and
# `--ssl-keyfile-p` reach them too.
SECRET_FLAGS = ("--api-key", "--admin-api-key", "--ssl-keyfile-password", "--watermark-config")
# Real flags that are themselves a prefix of a secret flag: an exact match wins in argparse,
# so `--ssl-keyfile PATH` is a path (srt/arg_groups/fields/serving.py:144).
_PREFIX_FLAGS = frozenset({"--ssl-keyfile"})

# Values that are settings, not secrets, even under a secret-looking name.
_TRIVIAL = re.compile(r"[+-]?\d+(?:\.\d+)?%?|true|false|none|null|yes|no|on|off", re.IGNORECASE)

# --api-key VALUE, --admin-api-key=VALUE, --hf-token 'VALUE', --admin-api-k VALUE, and an
# argv printed as a list: '--api-key', 'VALUE'.
_FLAG_VALUE = re.compile(
    r"(--[A-Za-z0-9][A-Za-z0-9-]*)(=|[ \t]+|['\"],[ \t]*['\"])(?!\*\*\*|--)"
    r"('[^'\n]*'|\"[^\"\n]*\"|['\"]?[^\s'\",\]\)}]+)"
)
# Authorization: Bearer VALUE / Basic VALUE, and a Bearer token anywhere (a curl line).
_AUTH_HEADER = re.compile(
    r"((?:Authorization|authorization|AUTHORIZATION)['\"]?\s*[:=]\s*['\"]?(?:Bearer|Basic)\s+)"
    r"(?!\*\*\*)([^\s'\",]+)"
)
_BEARER = re.compile(r"(\bBearer\s+)(?!\*\*\*)([A-Za-z0-9._~+/=-]{8,})")
# api_key='VALUE', 'ssl_keyfile_password': 'VALUE', "access_token": "VALUE", HF_TOKEN=VALUE.
# A count (`#token: 700`), None, a placeholder (`token=<your_token>`, '<redacted>') and a
# mask already there stay.
_NAMED_VALUE = re.compile(
    r"(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)(['\"]?\s*[:=]\s*['\"]?)"
    r"(?!\*\*\*|<|(?:None|null|True|False|true|false|Bearer|Basic)\b)"
    r"([^\s'\",}\)\]`]+)"
)
# Well-known token formats: OpenAI/Anthropic `sk-`, Hugging Face `hf_`, GitHub, GitLab,
# Slack, AWS access key ids and JWTs.
_KEY_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_-]{16,}|\bhf_[A-Za-z0-9]{30,}|\bgh[pousr]_[A-Za-z0-9]{30,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{30,}|\bglpat-[A-Za-z0-9_-]{20,}|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\bAKIA[0-9A-Z]{16}\b|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
)
# A password inside a URL: scheme://user:PASSWORD@host (RFC 3986 userinfo). The user name
# stays, so `https://me:***@host` still says whose credentials the URL carries.
_URL_PASSWORD = re.compile(
    r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:'\"]*:)(?!\*\*\*@)([^\s/?#@'\"]+)(@)"
)


def secret_name(name: str) -> bool:
    """Whether a field, variable or flag name (dashes or underscores) marks a secret."""
    name = name.lstrip("-").replace("-", "_").lower()
    if name in _SECRET_NAMES:
        return True
    return bool(_SECRET_PART.search(name)) and not name.endswith(_NOT_SECRET_SUFFIX)


def secret_flag(token: str) -> bool:
    """Whether a `--flag` (or `--flag=value`) carries a secret: a secret name, or an
    abbreviation of one of SGLang's secret flags the way its parser accepts it."""
    flag = token.split("=", 1)[0]
    if not flag.startswith("--") or len(flag) < 3:
        return False
    if secret_name(flag):
        return True
    return flag not in _PREFIX_FLAGS and any(s.startswith(flag) for s in SECRET_FLAGS)


def _keeps(flag: str, value: str) -> bool:
    """A number or yes/no after a flag that is secret only by its name stays: that flag is a
    setting (`--bucket-time-to-first-token 0.005`). SGLang's own secret flags always mask."""
    own = flag not in _PREFIX_FLAGS and any(s.startswith(flag) for s in SECRET_FLAGS)
    return not own and bool(_TRIVIAL.fullmatch(value))


def plausible_secret(value: str) -> bool:
    """Long enough to replace everywhere safely, and not a number or a yes/no setting."""
    return len(value) >= MIN_SECRET_LEN and not _TRIVIAL.fullmatch(value)


def secret_values(environ: Mapping[str, str] | None = None, names: Iterable[str] = ()) -> set[str]:
    """Values of the named variables and of every variable whose name marks a secret, and
    the passwords inside URLs in any variable (`PROXY=http://me:PASS@host`)."""
    env = os.environ if environ is None else environ
    wanted = set(names) | {k for k in env if secret_name(k)}
    found = {env[k] for k in wanted if k in env and plausible_secret(env[k])}
    for value in env.values():
        found |= url_passwords(value)
    return found


def url_passwords(text: str) -> set[str]:
    """The passwords inside the URLs of `text` (`https://user:PASS@host` gives PASS)."""
    return {m.group(2) for m in _URL_PASSWORD.finditer(text) if plausible_secret(m.group(2))}


def redact_env(env: Mapping[str, str], secrets: Iterable[str] = ()) -> dict[str, str]:
    """Environment additions as they may be shown or written: the value of a secret-named
    variable is `***` (only a yes/no word or a number under four digits stays: a setting),
    and every other value goes through `redact_text` (URL passwords, token shapes, known
    values)."""
    secrets = set(secrets)
    out: dict[str, str] = {}
    for name, value in env.items():
        setting = _TRIVIAL.fullmatch(value) and not (value.isdigit() and len(value) >= 4)
        if secret_name(name) and value and not setting:
            out[name] = MASK
        else:
            out[name] = redact_text(value, secrets)
    return out


def argv_secrets(argv: Iterable[str]) -> set[str]:
    """The values an argv passes to secret flags, and the keys inside a JSON watermark
    config (`--watermark-config '{"key": ...}'`)."""
    found: set[str] = set()
    parts = list(argv)
    for index, part in enumerate(parts):
        if not secret_flag(part):
            continue
        if "=" in part:
            value: str | None = part.split("=", 1)[1]
        else:
            value = parts[index + 1] if index + 1 < len(parts) else None
        if not value:
            continue
        found.add(value)
        found |= _inline_keys(value)
    return {v for v in found if plausible_secret(v)}


def _inline_keys(value: str) -> set[str]:
    if not value.lstrip().startswith("{"):
        return set()
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        return set()
    if not isinstance(data, dict):
        return set()
    return {v for k, v in data.items() if isinstance(v, str) and secret_name(str(k))}


def field_secrets(value: Any) -> set[str]:
    """The text values of secret-named fields anywhere in JSON-like data."""
    found: set[str] = set()
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and secret_name(key) and isinstance(item, str):
                if plausible_secret(item):
                    found.add(item)
            else:
                found |= field_secrets(item)
    elif isinstance(value, list | tuple):
        for item in value:
            found |= field_secrets(item)
    return found


def _mask_flag(match: re.Match[str]) -> str:
    flag, sep, value = match.groups()
    metavar = flag.lstrip("-").replace("-", "_").upper()
    if not secret_flag(flag) or value == metavar or _keeps(flag, value.strip("'\"")):
        return match.group(0)
    quote = value[0] if value[:1] in ("'", '"') else ""
    closing = quote if len(value) > 1 and value.endswith(quote) else ""
    return f"{flag}{sep}{quote}{MASK}{closing}"


def _mask_named(match: re.Match[str]) -> str:
    name, sep, value = match.groups()
    if not secret_name(name) or _TRIVIAL.fullmatch(value):
        return match.group(0)
    return f"{name}{sep}{MASK}"


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_SECRET_LEN:
            text = text.replace(secret, MASK)
    text = _FLAG_VALUE.sub(_mask_flag, text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + MASK, text)
    text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + m.group(3), text)
    text = _NAMED_VALUE.sub(_mask_named, text)
    return _KEY_SHAPES.sub(MASK, text)


def redact_argv(argv: Iterable[str], secrets: Iterable[str] = ()) -> list[str]:
    """An argv with the value after (or in) a secret-bearing flag masked."""
    out: list[str] = []
    hide = False
    secrets = set(secrets)
    flag = ""
    for part in argv:
        if hide:
            hide = False
            if not _keeps(flag, part):
                out.append(MASK)
                continue
        elif secret_flag(part):
            flag = part.split("=", 1)[0]
            if "=" in part and _keeps(flag, part.split("=", 1)[1]):
                out.append(part)
            elif "=" in part:
                out.append(f"{part.split('=', 1)[0]}={MASK}")
            else:
                out.append(part)
                hide = True
            continue
        out.append(redact_text(part, secrets))
    return out


def redact_json(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of JSON-like data with secret fields and secret-looking text masked. A number
    under a secret-looking name is a count (`bos_token_id`), not a secret."""
    secrets = set(secrets)
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and secret_name(key) and isinstance(item, str) and item:
                out[key] = MASK
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


class StreamMasker:
    """Replaces known secret values in a byte stream read in chunks. A value split across
    two chunks is still caught: a chunk's tail that could begin a secret is held back until
    the next chunk (or the end) shows whether it does."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = {s.encode() for s in secrets if len(s) >= MIN_SECRET_LEN}
        self._secrets = sorted(values, key=len, reverse=True)
        self._mask = MASK.encode()
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """The masked bytes that can be written now."""
        if not self._secrets:
            return chunk
        data = self._pending + chunk
        for secret in self._secrets:
            if secret in data:
                data = data.replace(secret, self._mask)
        hold = self._partial(data)
        self._pending = data[len(data) - hold :] if hold else b""
        return data[: len(data) - hold] if hold else data

    def flush(self) -> bytes:
        """What is still held back, at the end of the stream."""
        data, self._pending = self._pending, b""
        return data

    def _partial(self, data: bytes) -> int:
        """Length of the longest tail of `data` that is a proper prefix of a secret."""
        best = 0
        for secret in self._secrets:
            for size in range(min(len(secret) - 1, len(data)), best, -1):
                if data.endswith(secret[:size]):
                    best = size
                    break
        return best
