"""A PromQL label matcher set (`{instance=~"gpu2(:[0-9]+)?", job="sglang"}`) that scopes one
Prometheus to part of what it scrapes, and managed servers matched to scrape targets.

A matcher set is ANDed into every selector the console sends and applied to the target list,
so one Prometheus serving several hosts can be read host by host. Parsing is ours, not
Prometheus': a mistake is a ValueError naming what is wrong before any query is sent, and
target labels are matched in Python exactly as Prometheus matches series (regexes anchored at
both ends).

A scrape target is a managed server when its `host:port` is that server's port on this host.
A loopback target (127.0.0.1, localhost, ::1) is on the Prometheus server's own host, so it
names this host only when the Prometheus URL does.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

OPERATORS = ("=~", "!~", "!=", "=")
"""Longest first, so `=~` is not read as `=` followed by a value starting with `~`."""
_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r"}
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


@dataclass(frozen=True, slots=True)
class Matcher:
    label: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        """As Prometheus matches a series: a missing label is the empty string, and a regex
        must match the whole value."""
        have = labels.get(self.label, "")
        if self.op == "=":
            return have == self.value
        if self.op == "!=":
            return have != self.value
        found = re.fullmatch(self.value, have) is not None
        return found if self.op == "=~" else not found

    def promql(self) -> str:
        quoted = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.label}{self.op}"{quoted}"'


@dataclass(frozen=True, slots=True)
class MatcherSet:
    """The parsed matchers and their text as sent (`instance=~"gpu2"`, no braces)."""

    matchers: tuple[Matcher, ...]

    @property
    def body(self) -> str:
        return ", ".join(m.promql() for m in self.matchers)

    @property
    def text(self) -> str:
        return "{" + self.body + "}"

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(m.matches(labels) for m in self.matchers)


def _string(text: str, at: int) -> tuple[str, int]:
    """The quoted string starting at `at` and the index after it."""
    quote = text[at]
    if quote == "`":
        end = text.find("`", at + 1)
        if end < 0:
            raise ValueError("a `-quoted value is not closed")
        return text[at + 1 : end], end + 1
    out: list[str] = []
    i = at + 1
    while i < len(text):
        ch = text[i]
        if ch == quote:
            return "".join(out), i + 1
        if ch == "\\":
            if i + 1 >= len(text) or text[i + 1] not in _ESCAPES:
                raise ValueError(f"unknown escape at character {i + 1}")
            out.append(_ESCAPES[text[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    raise ValueError(f"a {quote}-quoted value is not closed")


def parse_matchers(text: str) -> MatcherSet:
    """`{label op "value", ...}` (braces optional) as PromQL writes a selector's matchers;
    ValueError saying what is wrong. At least one matcher; regexes must compile."""
    body = text.strip()
    if body.startswith("{"):
        if not body.endswith("}"):
            raise ValueError("'{' is not closed by '}'")
        body = body[1:-1]
    matchers: list[Matcher] = []
    i = 0
    while True:
        while i < len(body) and body[i].isspace():
            i += 1
        if i >= len(body):
            break
        name = _LABEL.match(body, i)
        if name is None:
            raise ValueError(f"expected a label name at {body[i:][:20]!r}")
        i = name.end()
        while i < len(body) and body[i].isspace():
            i += 1
        op = next((o for o in OPERATORS if body.startswith(o, i)), None)
        if op is None:
            raise ValueError(f"label {name.group()}: expected one of = != =~ !~")
        i += len(op)
        while i < len(body) and body[i].isspace():
            i += 1
        if i >= len(body) or body[i] not in "\"'`":
            raise ValueError(f'label {name.group()}: the value must be quoted ("...")')
        value, i = _string(body, i)
        if op in ("=~", "!~"):
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"label {name.group()}: bad regex {value!r}: {exc}") from None
        matchers.append(Matcher(name.group(), op, value))
        while i < len(body) and body[i].isspace():
            i += 1
        if i < len(body):
            if body[i] != ",":
                raise ValueError(f"expected ',' between matchers at {body[i:][:20]!r}")
            i += 1
    if not matchers:
        raise ValueError('no matcher (write e.g. {instance=~"gpu2(:[0-9]+)?"})')
    if all(m.matches({}) for m in matchers):
        # Prometheus refuses a selector every matcher of which matches the empty string.
        raise ValueError("every matcher matches an empty label: it would select everything")
    return MatcherSet(tuple(matchers))


def scoped(selector: str, matchers: MatcherSet | None) -> str:
    """`selector` (a metric name, `name{...}` or `{...}`) with the matchers ANDed in."""
    if matchers is None:
        return selector
    if selector.endswith("}"):
        inner = selector[selector.index("{") + 1 : -1].strip()
        joiner = ", " if inner else ""
        return f"{selector[:-1].rstrip()}{joiner}{matchers.body}}}"
    return f"{selector}{{{matchers.body}}}"


# -- managed servers matched to scrape targets


@dataclass(frozen=True, slots=True)
class ManagedEndpoint:
    """A server ddconsole manages on this host: its id and the port it serves on."""

    server_id: str
    port: int
    live: bool = True
    """False for a stopped or failed one: still named for a target on its port, but not
    reported as unscraped."""


def split_hostport(instance: str) -> tuple[str, int] | None:
    """`host:port` or `[v6]:port` of a scrape instance; None without a port."""
    host, sep, port = instance.rpartition(":")
    if not sep or not port.isdigit():
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        return None
    return host.lower(), int(port)


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_on_this_host(url: str, local_names: Iterable[str]) -> bool:
    """Whether the Prometheus at `url` runs on this host (a loopback or local name)."""
    host = (urlsplit(url).hostname or "").lower()
    return is_loopback(host) or host in {n.lower() for n in local_names}


def map_targets(
    instances: Iterable[str],
    managed: Sequence[ManagedEndpoint],
    *,
    prometheus_url: str,
    local_names: Iterable[str] = (),
) -> dict[str, str]:
    """Scrape instance -> the managed server it scrapes. The instance's host must be this
    host: one of `local_names`, or a loopback name when Prometheus itself runs here. A port
    two records share goes to the first one given (callers list live servers first)."""
    names = {n.lower() for n in local_names}
    prometheus_here = url_on_this_host(prometheus_url, names)
    by_port: dict[int, str] = {}
    for endpoint in managed:
        by_port.setdefault(endpoint.port, endpoint.server_id)
    out: dict[str, str] = {}
    for instance in sorted(instances):
        split = split_hostport(instance)
        if split is None or split[1] not in by_port:
            continue
        host = split[0]
        # A loopback name is Prometheus' own host, whatever this host's names include.
        here = prometheus_here if is_loopback(host) else host in names
        # Two names of one target (localhost and 127.0.0.1): the first keeps the server.
        if here and by_port[split[1]] not in out.values():
            out[instance] = by_port[split[1]]
    return out
