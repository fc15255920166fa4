"""The standalone master's addresses, read from its URL, and whether one takes a connection (real sockets on
loopback)."""

from __future__ import annotations

import socket

import pytest

from spark_tables.utils.spark_master import is_standalone, standalone_addresses, unreachable


@pytest.mark.parametrize(
    ("master", "addresses"),
    [
        ("spark://m.example:7078", [("m.example", 7078)]),
        ("spark://m.example", [("m.example", 7077)]),
        ("spark://admin:s3cret@m.example:7077", [("m.example", 7077)]),
        ("spark://h1:7077,h2:7078", [("h1", 7077), ("h2", 7078)]),
        ("spark://[::1]:7079", [("::1", 7079)]),
    ],
)
def test_the_addresses_of_a_standalone_master_url(master, addresses):
    assert is_standalone(master)
    assert standalone_addresses(master) == addresses


@pytest.mark.parametrize("master", ["local[*]", "yarn", "k8s://https://k8s.example:6443"])
def test_other_masters_are_not_standalone(master):
    assert not is_standalone(master)


@pytest.fixture
def listening() -> int:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


@pytest.fixture
def closed() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_master_whose_port_listens_is_reached(listening):
    assert unreachable(f"spark://127.0.0.1:{listening}") is None


def test_a_master_whose_port_is_closed_is_not_and_says_why(closed):
    assert unreachable(f"spark://127.0.0.1:{closed}") == f"127.0.0.1:{closed}: Connection refused"


def test_one_reachable_master_of_several_is_enough(listening, closed):
    assert unreachable(f"spark://127.0.0.1:{closed},127.0.0.1:{listening}") is None
