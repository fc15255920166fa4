"""Whether a server's port takes a connection, asked before a client that would retry for minutes is started."""

from __future__ import annotations

import socket


def connection_problem(host: str, port: int, timeout: float) -> str | None:
    """Why ``host:port`` takes no TCP connection within ``timeout`` seconds (the OS's words); None when it does."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as err:
        return str(err.strerror or err)
