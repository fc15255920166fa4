"""An S3-compatible server on loopback for the tests: moto's server (a test dependency), on a free port, in a process
of its own whose pid is kept in a folder of its own.

    python scripts/s3_server.py start HOME   # prints the server's endpoint, http://127.0.0.1:PORT
    python scripts/s3_server.py stop HOME    # stops it and removes HOME
    python scripts/s3_server.py serve PORT   # what start runs: the server itself, in the foreground

moto 5.2's server answers a request that expects ``100 Continue`` with two of them (Python's ``http.server`` sends
one, werkzeug's handler another), and the AWS SDK's asynchronous client, which S3A's multipart uploads and renames
use, takes the second for the response ("Status Code: 100"). ``serve`` lets werkzeug's answer alone.
"""

from __future__ import annotations

import http.server
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from loopback_servers import free_port, stop_server

#: How long a start may take.
START_SECONDS = 60


def serve(port: int) -> None:
    http.server.BaseHTTPRequestHandler.handle_expect_100 = lambda self: True  # werkzeug's handler sends the one
    from moto.server import main as moto_server

    moto_server(["-H", "127.0.0.1", "-p", str(port)])


def start(home: Path) -> str:
    if (home / "server.pid").exists():
        raise SystemExit(f"error: an S3 server of {home} is running (or was not stopped): run 'stop {home}' first")
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with open(home / "server.log", "wb") as log:
        server = subprocess.Popen(
            [sys.executable, __file__, "serve", str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    (home / "server.pid").write_text(str(server.pid))
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and server.poll() is None:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
            return endpoint
        except OSError:
            time.sleep(0.1)  # the server says nothing but by answering
    tail = (home / "server.log").read_text(errors="replace")[-1500:]
    stop(home)
    raise SystemExit(f"error: the S3 server did not start within {START_SECONDS} s; its log ends:\n{tail}")


def stop(home: Path) -> None:
    stop_server(home, "server.pid")


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "start":
        print(start(Path(argv[1]).absolute()))
    elif len(argv) == 2 and argv[0] == "stop":
        stop(Path(argv[1]).absolute())
    elif len(argv) == 2 and argv[0] == "serve":
        serve(int(argv[1]))
    else:
        raise SystemExit("usage: s3_server.py start HOME | stop HOME | serve PORT")


if __name__ == "__main__":
    main(sys.argv[1:])
