"""Who listens on a TCP port, from /proc: the kernel's own answer, cheap enough per scan.

/proc/net/tcp and /proc/net/tcp6 list every socket of this network namespace with its local
port, state (0A = LISTEN) and inode; a process holds a socket when one of its
/proc/PID/fd links reads `socket:[INODE]`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from console.hw.procs import PROC

LISTEN_STATE = "0A"
"""TCP_LISTEN as /proc/net/tcp writes it (include/net/tcp_states.h)."""


def listening_sockets() -> dict[int, set[int]]:
    """Port -> inodes of the sockets listening on it (IPv4 and IPv6)."""
    found: dict[int, set[int]] = {}
    for name in ("tcp", "tcp6"):
        try:
            with open(PROC / "net" / name) as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != LISTEN_STATE:
                continue
            try:
                port = int(fields[1].rpartition(":")[2], 16)
                inode = int(fields[9])
            except ValueError:
                continue
            if inode:
                found.setdefault(port, set()).add(inode)
    return found


def holds_socket(pids: Iterable[int], inodes: set[int]) -> bool | None:
    """True when one of `pids` has one of these sockets open, False when none has, None
    when no process's descriptors could be read (another user's, or gone)."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    readable = False
    for pid in pids:
        folder = PROC / str(pid) / "fd"
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        readable = True
        for name in names:
            try:
                if os.readlink(folder / name) in wanted:
                    return True
            except OSError:
                continue
    return False if readable else None
