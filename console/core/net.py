"""Port checks on this host."""

from __future__ import annotations

import socket


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a server could bind `host:port` now (SO_REUSEADDR, as uvicorn binds)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel says is free right now (for tests and `--port 0`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
