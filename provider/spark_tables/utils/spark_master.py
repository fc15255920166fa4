"""The standalone Spark master a connection names: reached before anything is submitted to it, and asked
whether an application still runs.

spark-submit does not fail fast on a standalone master it cannot reach: its driver tries to register for a minute
and more (three attempts, 20 s apart) before it gives up with "All masters are unresponsive". Whether the master's
port takes a connection is known in milliseconds.

The master's web UI lists its running applications (``activeapps``) and the ones that ended (``completedapps``) in
its JSON API (``/json/``): a later try of a task asks it about the application a lost try's driver started
(``core/durable_job.py``).
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

from spark_tables.utils.reachability import connection_problem

log = logging.getLogger(__name__)

#: The standalone master's port when its URL names none.
STANDALONE_PORT = 7077
#: Seconds each of the master's addresses has to take a connection.
CONNECT_SECONDS = 5.0
#: The standalone master's web UI port when the Spark connection does not name its address (Spark's default).
DEFAULT_UI_PORT = 8080
#: The Spark connection's extra giving the standalone master's web UI, e.g. ``http://spark-master:8080``.
MASTER_UI_EXTRA = "master-ui-url"
#: Seconds to wait for the master's web UI to answer.
UI_TIMEOUT_SECONDS = 10


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
        problem = connection_problem(host, port, timeout)
        if problem is None:
            return None
        problems.append(f"{host}:{port}: {problem}")
    return "; ".join(problems)


def master_ui_urls(master: str, configured: str | None = None) -> list[str]:
    """The web UIs of a ``spark://`` master (one per address, for standby masters), or the one the connection
    names."""
    if configured:
        return [configured.rstrip("/")]
    hosts = (f"[{host}]" if ":" in host else host for host, _ in standalone_addresses(master))
    return [f"http://{host}:{DEFAULT_UI_PORT}" for host in hosts]


def application_active(ui_urls: list[str], application_id: str) -> bool | None:
    """Whether the master lists the application as running; False when it lists it as ended, or does not know it
    (the master forgets old applications); None when no master answered."""
    for url in ui_urls:
        try:
            with urllib.request.urlopen(f"{url}/json/", timeout=UI_TIMEOUT_SECONDS) as response:
                state = json.loads(response.read())
        except (OSError, ValueError, urllib.error.URLError) as err:
            log.warning("could not ask the Spark master at %s about %s: %s", url, application_id, err)
            continue
        if state.get("status") not in (None, "ALIVE"):
            continue  # a standby master knows nothing of the applications
        return any(app.get("id") == application_id for app in state.get("activeapps", []))
    return None
