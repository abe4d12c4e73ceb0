"""A port nothing answers on, held so for the whole test."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 bound for the whole test and never listened on: a connection to
    it is refused, and no other test's server can take it meanwhile (no SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
