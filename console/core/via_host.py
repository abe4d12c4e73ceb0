"""How a command printed as a hint reaches this ddconsole: `ddconsole`, or `ddconsole --host
NAME` when this process runs on another host for a console that relayed it there (the relay
names the host in `DDCONSOLE_VIA_HOST`), so a hint copied from relayed output works as printed.
"""

from __future__ import annotations

import os
import re

VIA_HOST_ENV = "DDCONSOLE_VIA_HOST"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
"""A hosts.toml host name (console.fleet.hosts): anything else is not shown."""


def ddconsole_command() -> str:
    """`ddconsole`, with `--host NAME` when relayed from another host's console."""
    name = os.environ.get(VIA_HOST_ENV, "")
    return f"ddconsole --host {name}" if _NAME.match(name) else "ddconsole"
