"""The hosts file: `$XDG_CONFIG_HOME/ddconsole/hosts.toml`, the GPU hosts one console drives.

    [[host]]
    name = "gpu2"                        # what --host and the fleet view call it
    target = "ops@gpu2.lan:22"           # "local", user@host:port, or a ~/.ssh/config alias
    ddconsole = "/opt/dd/bin/ddconsole"  # the command on that host (default "ddconsole")
    prometheus = "http://prom:9090"      # optional: read its servers and GPUs through this
    prometheus_match = '{instance=~"gpu2(:[0-9]+)?"}'  # optional: only these series, targets

`local` (this machine, no SSH) is always there, first, whether the file names it or not. A
damaged file is a UsageError naming the file, the host and the field. Two hosts reading one
Prometheus must each name a different `prometheus_match`, or both would count its figures
(a loopback URL is each host's own Prometheus, so it is never shared).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from console.core.errors import UsageError
from console.core.paths import config_dir
from console.telemetry.prom_match import is_loopback, parse_matchers

LOCAL = "local"
"""The name and the target of this machine."""
DEFAULT_DDCONSOLE = "ddconsole"
MAX_HOSTS_BYTES = 1 << 20
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_FIELDS = ("name", "target", "ddconsole", "prometheus", "prometheus_match")


@dataclass(frozen=True)
class Host:
    """One host of the fleet. `target` is "local" or what `ssh` would be given."""

    name: str
    target: str = LOCAL
    ddconsole: str = DEFAULT_DDCONSOLE
    """The remote command line that runs ddconsole there (a shell word list: a path, or a
    path with options such as `--demo`)."""
    prometheus: str | None = None
    """The Prometheus the host's telemetry is read through (its URL as seen from the host),
    None to read the host itself."""
    prometheus_match: str | None = None
    """A PromQL matcher set (`{instance=~"gpu2.*"}`, normalised) ANDed into every query, so
    one Prometheus serving several hosts is split between them."""

    @property
    def is_local(self) -> bool:
        return self.target == LOCAL

    def metrics_args(self) -> list[str]:
        """The options `metrics` takes on that host to read through its Prometheus."""
        if self.prometheus is None:
            return []
        args = ["--prometheus", self.prometheus]
        if self.prometheus_match is not None:
            args += ["--prometheus-match", self.prometheus_match]
        return args


LOCAL_HOST = Host(LOCAL)


@dataclass(frozen=True)
class SshTarget:
    """An SSH target split for asyncssh: an alias keeps `user` and `port` None, so
    ~/.ssh/config decides them."""

    host: str
    user: str | None = None
    port: int | None = None


def parse_target(target: str) -> SshTarget:
    """`user@host:port`, `host:port`, `user@host`, `host`, `[v6addr]:port` (ValueError)."""
    user, at, rest = target.rpartition("@")
    if at and not user:
        raise ValueError("nothing before '@'")
    port: int | None = None
    if rest.startswith("["):
        addr, bracket, tail = rest[1:].partition("]")
        if not bracket or (tail and not tail.startswith(":")):
            raise ValueError("write an IPv6 address as [addr]:port")
        rest, port_text = addr, tail[1:]
    elif rest.count(":") == 1:
        rest, _, port_text = rest.partition(":")
    else:
        port_text = ""
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"port {port_text!r} is not a number from 1 to 65535")
        port = int(port_text)
    if not rest or any(ch.isspace() for ch in target):
        raise ValueError("no host name (write user@host:port or a ~/.ssh/config alias)")
    return SshTarget(rest, user or None, port)


def hosts_path() -> Path:
    return config_dir() / "hosts.toml"


def load_hosts(path: Path | None = None) -> list[Host]:
    """`local` first, then the file's hosts in its order. A missing file gives `[local]`."""
    path = hosts_path() if path is None else path
    try:
        raw = path.read_bytes()[: MAX_HOSTS_BYTES + 1]
    except FileNotFoundError:
        return [LOCAL_HOST]
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if len(raw) > MAX_HOSTS_BYTES:
        raise UsageError(f"{path}: larger than {MAX_HOSTS_BYTES} bytes; is it the right file?")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from exc
    unknown = sorted(set(data) - {"host"})
    if unknown:
        raise UsageError(
            f"{path}: {unknown[0]}: unknown key", hint="hosts are [[host]] tables only"
        )
    entries = data.get("host", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{path}: host: must be [[host]] tables", hint=_EXAMPLE)
    hosts = [LOCAL_HOST]
    for index, entry in enumerate(entries):
        host = _host(path, index, entry)
        if host.name == LOCAL:
            if not host.is_local:
                raise UsageError(
                    f"{path}: host {LOCAL!r}: target: `local` is this machine and cannot be "
                    f"{host.target!r}",
                    hint="give the remote host another name",
                )
            hosts[0] = host
            continue
        if any(known.name == host.name for known in hosts):
            raise UsageError(
                f"{path}: host {host.name!r}: name: given twice", hint="host names are unique"
            )
        hosts.append(host)
    _refuse_shared_prometheus(path, hosts)
    return hosts


def _refuse_shared_prometheus(path: Path, hosts: list[Host]) -> None:
    """Two hosts reading one Prometheus with no matcher (or the same one) would both list
    every server it scrapes: their figures would be counted twice. A loopback URL is read
    on each host itself, so two hosts naming one are two Prometheus servers."""
    seen: dict[str, Host] = {}
    for host in hosts:
        if host.prometheus is None or _on_its_own_host(host.prometheus):
            continue
        key = host.prometheus.rstrip("/").lower()
        other = seen.get(key)
        if other is not None and (
            other.prometheus_match is None
            or host.prometheus_match is None
            or other.prometheus_match == host.prometheus_match
        ):
            raise UsageError(
                f"{path}: host {host.name!r}: prometheus: {host.prometheus} is host "
                f"{other.name!r}'s too, and {_split_by(other, host)}: every figure would be "
                "counted twice",
                hint="give each a prometheus_match selecting its own targets, e.g. "
                f"prometheus_match = '{{instance=~\"{host.name}(:[0-9]+)?\"}}'",
            )
        seen.setdefault(key, host)


def _on_its_own_host(url: str) -> bool:
    try:
        hostname = urlsplit(url).hostname
    except ValueError:
        return False
    return hostname is not None and is_loopback(hostname)


def _split_by(a: Host, b: Host) -> str:
    if a.prometheus_match is None and b.prometheus_match is None:
        return "neither names a prometheus_match"
    if a.prometheus_match == b.prometheus_match:
        return f"both name prometheus_match {a.prometheus_match}"
    alone = a if a.prometheus_match is None else b
    return f"{alone.name!r} names no prometheus_match"


_EXAMPLE = '[[host]]\n  name = "gpu2"\n  target = "user@gpu2:22"'


def _host(path: Path, index: int, entry: dict[str, object]) -> Host:
    where = f"{path}: host #{index + 1}"
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsageError(
            f"{where}: name: must be a word of letters, digits, '.', '_' or '-' (got {name!r})",
            hint=_EXAMPLE,
        )
    where = f"{path}: host {name!r}"
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise UsageError(
            f"{where}: {unknown[0]}: unknown field", hint=f"fields: {', '.join(_FIELDS)}"
        )
    target = entry.get("target")
    if not isinstance(target, str) or not target.strip():
        problem = "missing" if target is None else f"must be a string (got {target!r})"
        raise UsageError(
            f"{where}: target: {problem}; give `local` or an SSH target",
            hint="user@host:port, host, or a Host alias from ~/.ssh/config",
        )
    target = target.strip()
    if target != LOCAL:
        try:
            parse_target(target)
        except ValueError as exc:
            raise UsageError(f"{where}: target: {target!r}: {exc}") from exc
    command = entry.get("ddconsole", DEFAULT_DDCONSOLE)
    if not isinstance(command, str) or not command.strip():
        raise UsageError(
            f"{where}: ddconsole: must be the command that runs ddconsole there "
            '(e.g. "/opt/ddconsole/.venv/bin/ddconsole")'
        )
    raw_url = entry.get("prometheus")
    prometheus: str | None = None
    if raw_url is not None:
        url_problem = prometheus_url_problem(raw_url)
        if url_problem is not None:
            raise UsageError(f"{where}: prometheus: {url_problem}")
        prometheus = str(raw_url).strip()
    raw_match = entry.get("prometheus_match")
    match: str | None = None
    if raw_match is not None:
        if prometheus is None:
            raise UsageError(
                f"{where}: prometheus_match: given without prometheus",
                hint='name the Prometheus server it selects from: prometheus = "http://..."',
            )
        if not isinstance(raw_match, str):
            raise UsageError(
                f"{where}: prometheus_match: must be a string such as "
                f"'{{instance=~\"{name}(:[0-9]+)?\"}}' (got {raw_match!r})"
            )
        try:
            match = parse_matchers(raw_match).text
        except ValueError as exc:
            raise UsageError(f"{where}: prometheus_match: {raw_match!r}: {exc}") from exc
    return Host(name, target, command.strip(), prometheus, match)


def prometheus_url_problem(url: object) -> str | None:
    """Why `url` is not a Prometheus server's http(s) URL; None when it is one."""
    if not isinstance(url, str):
        return f'must be a string such as "http://prom:9090" (got {url!r})'
    text = url.strip()
    try:
        parts = urlsplit(text)
        _ = parts.port  # a port out of range raises ValueError
    except ValueError as exc:
        return f"{text!r}: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{text!r}: give a full URL such as http://prom:9090"
    if any(ch.isspace() for ch in text) or parts.query or parts.fragment:
        return f"{text!r}: give the server's base URL (no spaces, query or fragment)"
    return None


def find_host(hosts: list[Host], name: str, path: Path | None = None) -> Host:
    """The host called `name`; UsageError listing the known ones otherwise."""
    for host in hosts:
        if host.name == name:
            return host
    where = path or hosts_path()
    known = ", ".join(host.name for host in hosts)
    raise UsageError(
        f"--host {name}: no such host (known: {known})",
        hint=f"add it to {where} as a [[host]] table with name and target",
    )
