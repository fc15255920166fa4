"""The README's commands for one's own DAGs and the UI: ``scripts/airflow.sh`` runs Airflow in the repository's
setup on the DAGs folder the caller names, and ``airflow standalone`` through it keeps its admin password where the
README says and stops, every component of it, on Ctrl-C; and the setup the README's two commands share mends a venv
whose creation was cut short."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import threading
from pathlib import Path

import psutil
import pytest

from tests.integration.conftest import REPO

pytestmark = pytest.mark.integration

AIRFLOW_SH = REPO / "scripts" / "airflow.sh"
#: Where the README says standalone keeps the admin password: scripts/setup.sh's AIRFLOW_HOME is .airflow/.
PASSWORDS = REPO / ".airflow" / "simple_auth_manager_passwords.json.generated"


def _env(**settings: str) -> dict[str, str]:
    """The caller's environment without Airflow settings of its own (the tests' deployments set theirs)."""
    return {**{key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")}, **settings}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_dags_folder_of_ones_own_is_kept_relative_to_the_caller(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()

    def dags_folder(**settings: str) -> str:
        done = subprocess.run(
            ["bash", str(AIRFLOW_SH), "config", "get-value", "core", "dags_folder"],
            cwd=tmp_path,
            env=_env(**settings),
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout.strip()

    assert dags_folder(AIRFLOW__CORE__DAGS_FOLDER="mine") == str(tmp_path / "mine")
    assert dags_folder() == str(REPO / "dags")


def test_standalone_keeps_the_admin_password_in_airflow_home_and_stops_whole_on_ctrl_c(tmp_path: Path) -> None:
    """Started as a terminal starts a command (a session of its own, SIGINT not ignored), on free ports and an empty
    DAGs folder; Ctrl-C is SIGINT to the terminal's foreground group, here the script's. The triggerer is stopped
    (SIGSTOP) first, as a component that does not end on SIGTERM: the script names it and kills it after its grace,
    and every other component has ended by then on SIGTERM."""
    (tmp_path / "dags").mkdir()
    standalone = subprocess.Popen(
        ["bash", str(AIRFLOW_SH), "standalone"],
        env=_env(
            AIRFLOW__CORE__DAGS_FOLDER=str(tmp_path / "dags"),
            AIRFLOW__API__PORT=str(_free_port()),
            AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(_free_port()),
            AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(_free_port()),
            STANDALONE_STOP_SECONDS="20",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # a terminal's command does not ignore SIGINT (one started in the background of a script, as here, would)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=lambda: [*map(lines.put, standalone.stdout), lines.put(None)], daemon=True).start()
    output: list[str] = []
    started: list[psutil.Process] = []
    try:
        while not output or "Airflow is ready" not in output[-1]:
            line = lines.get(timeout=300)
            assert line is not None, "standalone ended before it was ready:\n" + "".join(output[-60:])
            output.append(line)
        started = psutil.Process(standalone.pid).children(recursive=True)
        components = {word.replace("-", "_") for process in started for word in _words(process)}
        assert {"scheduler", "api_server", "triggerer", "dag_processor"} <= components, components
        for process in started:
            if "triggerer" in _words(process):
                process.suspend()

        os.killpg(standalone.pid, signal.SIGINT)
        try:
            status = standalone.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 120 s after Ctrl-C: {[_words(process) for process in _alive(started)]}")
        output.extend(iter(lines.get, None))
        assert status == 0, "".join(output[-60:])
        assert _alive(started) == [], "left running after Ctrl-C"
    finally:
        for process in [standalone, *_alive(started)]:
            with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
                process.kill()

    killed = [line for line in output if "after the stop, killed:" in line]
    assert len(killed) == 1 and "triggerer" in killed[0], "".join(output[-60:])
    passwords = json.loads(PASSWORDS.read_text())
    said = "".join(output)
    assert f"Password for user 'admin': {passwords['admin']}" in said or f"generated in {PASSWORDS}." in said


def _words(process: psutil.Process) -> list[str]:
    """The words of a process's command line (Airflow's components retitle theirs as one string)."""
    try:
        return " ".join(process.cmdline()).split()
    except psutil.NoSuchProcess:
        return []


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
    return alive


def _redis_ready(address: str, home: Path) -> subprocess.CompletedProcess[str]:
    """scripts/services.sh's ``redis_ready`` on ``address``, as scripts/test.sh calls it."""
    script = (
        f'source "{REPO}/scripts/services.sh"; redis_ready SPARK_TABLES_TEST_REDIS {address}'
        ' || { echo "error: $REDIS_PROBLEM" >&2; exit 1; }'
    )
    return subprocess.run(
        ["bash", "-c", script], env=_env(AIRFLOW_HOME=str(home)), capture_output=True, text=True, check=False
    )


def test_the_test_command_starts_redis_where_none_answers(tmp_path: Path) -> None:
    """As root on loopback, a port where no Redis answers gets one (this test's own port, stopped after); a second
    call finds it and starts nothing."""
    import redis

    port = _free_port()
    done = _redis_ready(f"127.0.0.1:{port}", tmp_path)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout == f"starting Redis (redis-server on 127.0.0.1:{port}) ...\n"
        client = redis.Redis(host="127.0.0.1", port=port)
        assert client.ping() and client.config_get("save") == {"save": ""}, "it keeps nothing on disk"
        again = _redis_ready(f"127.0.0.1:{port}", tmp_path)
        assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    finally:
        with contextlib.suppress(redis.ConnectionError):
            redis.Redis(host="127.0.0.1", port=port).shutdown(nosave=True)


def test_the_test_command_stops_in_one_line_when_a_redis_elsewhere_does_not_answer(tmp_path: Path) -> None:
    """A Redis the tests are pointed at on another host (192.0.2.1: an address for documentation, where nothing
    answers) is not theirs to start."""
    done = _redis_ready("192.0.2.1:6379", tmp_path)
    assert done.returncode == 1
    assert done.stderr == (
        "error: Redis does not answer at 192.0.2.1:6379: start it there ('redis-server --port 6379 "
        "--daemonize yes'), or set SPARK_TABLES_TEST_REDIS to host:port of one that does\n"
    )


def test_packages_installed_in_one_run_update_debian_s_lists_once(tmp_path: Path) -> None:
    """scripts/services.sh's ``debian_install``, as the JDBC driver, Redis, chromium and docker-compose use it on a
    new machine: a stand-in ``apt-get`` (and ``id``: as root) records its calls; each install keeps its own log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> {calls}\necho "apt-get $*"\n')
    (bin_dir / "id").write_text("#!/bin/sh\necho 0\n")
    for tool in ("apt-get", "id"):
        (bin_dir / tool).chmod(0o755)
    script = (
        f'source "{REPO}/scripts/services.sh"; debian_install chromium "a browser"; debian_install redis-server Redis'
    )
    env = _env(AIRFLOW_HOME=str(tmp_path), PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == (
        "installing a browser (apt-get install chromium) ...\ninstalling Redis (apt-get install redis-server) ...\n"
    )
    assert calls.read_text().splitlines() == ["update -qq", "install -y -qq chromium", "install -y -qq redis-server"]
    assert (tmp_path / "apt-get-redis-server.log").read_text() == "apt-get install -y -qq redis-server\n"


def test_a_venv_whose_creation_was_interrupted_is_made_again(tmp_path: Path) -> None:
    """A ``.venv`` left without pip (its ``python -m venv`` killed, as a cancelled CI job kills it) once stopped every
    later command at "install failed": setup.sh makes it again and installs. Stand-ins for the Python that makes the
    venv and for the venv's own ``python`` and ``airflow`` record what they are asked."""
    root = tmp_path / "clone"
    (root / "scripts").mkdir(parents=True)
    for name in ("scripts/setup.sh", "scripts/services.sh", "pyproject.toml"):
        (root / name).write_text((REPO / name).read_text())
    calls = tmp_path / "calls"
    venv_python = f'#!/bin/sh\necho "venv python $*" >> {calls}\n'
    maker = tmp_path / "python3.11"
    maker.write_text(
        "#!/bin/sh\n"
        f'echo "maker $*" >> {calls}\n'
        '[ "$1" = "-m" ] && [ "$2" = venv ] || exit 0\n'
        'mkdir -p "$3/bin"\n'
        f"printf '%s' '{venv_python}' > \"$3/bin/python\"\n"
        "printf '#!/bin/sh\\nexit 0\\n' > \"$3/bin/airflow\"\n"
        'chmod +x "$3/bin/python" "$3/bin/airflow"\n'
    )
    maker.chmod(0o755)
    broken = root / ".venv" / "bin" / "python"
    broken.parent.mkdir(parents=True)
    broken.write_text(f'#!/bin/sh\necho "broken python $*" >> {calls}\necho "No module named pip" >&2\nexit 1\n')
    broken.chmod(0o755)

    done = subprocess.run(
        ["bash", "-c", f'source "{root}/scripts/setup.sh" && echo set up'],
        env=_env(PYTHON=str(maker)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "set up"
    assert calls.read_text().splitlines() == [
        "maker -c import sys; sys.exit(sys.version_info[:2] != (3, 11))",
        "broken python -m pip --version",
        "maker -m venv .venv",
        "venv python -m pip install --upgrade pip",
        "venv python -m pip install -e .[test]",
    ]
    assert list((root / ".venv").glob(".installed-*")), "the install is stamped"
