"""Asks a Spark standalone master whether an application still runs, through its web UI's JSON API (``/json/``).

The master lists its running applications (``activeapps``) and the ones that ended (``completedapps``). A later
try of a task asks it about the application a lost try's driver started (``core/durable_job.py``).
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from urllib.parse import urlparse

log = logging.getLogger(__name__)

#: The standalone master's web UI port when the Spark connection does not name its address (Spark's default).
DEFAULT_UI_PORT = 8080
#: The Spark connection's extra giving the standalone master's web UI, e.g. ``http://spark-master:8080``.
MASTER_UI_EXTRA = "master-ui-url"
#: Seconds to wait for the master's answer.
TIMEOUT_SECONDS = 10


def master_ui_urls(master: str, configured: str | None = None) -> list[str]:
    """The web UIs of a ``spark://`` master (one per host of a master list, for standby masters), or the one the
    connection names."""
    if configured:
        return [configured.rstrip("/")]
    hosts = master.removeprefix("spark://").split("/")[0].split(",")
    return [f"http://{urlparse(f'spark://{host}').hostname}:{DEFAULT_UI_PORT}" for host in hosts if host]


def application_active(ui_urls: list[str], application_id: str) -> bool | None:
    """Whether the master lists the application as running; False when it lists it as ended, or does not know it
    (the master forgets old applications); None when no master answered."""
    for url in ui_urls:
        try:
            with urllib.request.urlopen(f"{url}/json/", timeout=TIMEOUT_SECONDS) as response:
                state = json.loads(response.read())
        except (OSError, ValueError, urllib.error.URLError) as err:
            log.warning("could not ask the Spark master at %s about %s: %s", url, application_id, err)
            continue
        if state.get("status") not in (None, "ALIVE"):
            continue  # a standby master knows nothing of the applications
        return any(app.get("id") == application_id for app in state.get("activeapps", []))
    return None
