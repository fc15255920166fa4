"""The standalone Spark master a connection names, reached before anything is submitted to it.

spark-submit does not fail fast on a standalone master it cannot reach: its driver tries to register for a minute
and more (three attempts, 20 s apart) before it gives up with "All masters are unresponsive". Whether the master's
port takes a connection is known in milliseconds.
"""

from __future__ import annotations

import socket

#: The standalone master's port when its URL names none.
STANDALONE_PORT = 7077
#: Seconds each of the master's addresses has to take a connection.
CONNECT_SECONDS = 5.0


def is_standalone(master: str) -> bool:
    """Whether ``master`` is a standalone master's URL (``spark://``)."""
    return master.startswith("spark://")


def standalone_addresses(master: str) -> list[tuple[str, int]]:
    """Host and port of each master a ``spark://`` URL names: one, or several with ZooKeeper standby masters
    (``spark://h1:7077,h2:7077``); a user and password before ``@`` are not part of them."""
    hosts = master.removeprefix("spark://").split("/", 1)[0].rpartition("@")[2]
    addresses = []
    for part in hosts.split(","):
        if part.startswith("["):  # an IPv6 address: [::1]:7077
            host, _, port = part[1:].partition("]")
            port = port.removeprefix(":")
        else:
            host, _, port = part.partition(":")
        addresses.append((host, int(port) if port else STANDALONE_PORT))
    return addresses


def unreachable(master: str, timeout: float = CONNECT_SECONDS) -> str | None:
    """Why none of the standalone master's addresses takes a connection, address by address; None when one does."""
    problems = []
    for host, port in standalone_addresses(master):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return None
        except OSError as err:
            problems.append(f"{host}:{port}: {err.strerror or err}")
    return "; ".join(problems)
