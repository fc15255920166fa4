"""The README's commands for one's own DAGs and the UI: ``scripts/airflow.sh`` runs Airflow in the repository's
setup on the DAGs folder the caller names, and ``airflow standalone`` through it keeps its admin password where the
README says and stops, every component of it, on Ctrl-C; and the setup the README's two commands share mends a venv
whose creation was cut short."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import socket
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest

from tests.integration.conftest import PG_HOST, PG_PORT, PG_USER, REPO

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
        stopped = [process for process in started if "triggerer" in _words(process)]
        for process in stopped:
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

    killed = [line.strip() for line in output if "after the stop, killed:" in line]
    assert len(killed) == 1, "".join(output[-60:])
    prefix = "standalone | still running 20s after the stop, killed: "
    assert killed[0].startswith(prefix), killed[0]
    # each process by its component, whatever the checkout's path (a slow one may be named beside the triggerer)
    entries = re.findall(r"([\w-]+) \(pids? ([\d, ]+)\)(?:, |$)", killed[0].removeprefix(prefix))
    assert ", ".join(f"{name} ({'pid' if ', ' not in pids else 'pids'} {pids})" for name, pids in entries) == (
        killed[0].removeprefix(prefix)
    ), killed[0]
    named = {name: {int(pid) for pid in pids.split(", ")} for name, pids in entries}
    assert {process.pid for process in stopped} <= named.get("triggerer", set()), killed[0]
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


def _clone_with_stand_ins(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A clone holding what setup.sh reads, stand-ins for the Python that makes the venv, the venv's own ``python``
    and ``airflow`` (its ``python -c`` answers with the venv's jars folder, as spark_tables.core.jvm_jars does) and
    ``mvn``, each recording what it is asked in the file returned; and the environment to run setup.sh in."""
    root = tmp_path / "clone"
    (root / "scripts").mkdir(parents=True)
    (root / "jvm" / "kafka-broker").mkdir(parents=True)
    for name in (
        "scripts/setup.sh",
        "scripts/services.sh",
        "pyproject.toml",
        "jvm/pom.xml",
        "jvm/kafka-broker/pom.xml",
    ):
        (root / name).write_text((REPO / name).read_text())
    calls = tmp_path / "calls"
    venv_python = (
        "#!/bin/sh\n"
        f'echo "venv python $*" >> {calls}\n'
        '[ "$1" != -c ] || echo "$(cd "$(dirname "$0")/.." && pwd)/share/spark-tables/jars"\n'
    )
    maker = tmp_path / "python3.11"
    maker.write_text(
        "#!/bin/sh\n"
        f'echo "maker $*" >> {calls}\n'
        '[ "$1" = "-m" ] && [ "$2" = venv ] || exit 0\n'
        'mkdir -p "$3/bin"\n'
        f"cat > \"$3/bin/python\" <<'EOF'\n{venv_python}EOF\n"
        "printf '#!/bin/sh\\nexit 0\\n' > \"$3/bin/airflow\"\n"
        'chmod +x "$3/bin/python" "$3/bin/airflow"\n'
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(
        "#!/bin/sh\n"
        f'echo "mvn $*" >> {calls}\n'
        f'[ ! -f {tmp_path}/mvn-fails ] || {{ echo "[ERROR] Could not resolve dependencies"; exit 1; }}\n'
        'for arg; do case "$arg" in -Djars.dir=*) mkdir -p "${arg#-Djars.dir=}" '
        '&& echo jar > "${arg#-Djars.dir=}/postgresql.jar";; esac; done\n'
    )
    for tool in (maker, mvn):
        tool.chmod(0o755)
    return root, calls, _env(PYTHON=str(maker), PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def _set_up(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'source "{root}/scripts/setup.sh" && echo set up'],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_venv_whose_creation_was_interrupted_is_made_again(tmp_path: Path) -> None:
    """A ``.venv`` left without pip (its ``python -m venv`` killed, as a cancelled CI job kills it) once stopped every
    later command at "install failed": setup.sh makes it again and installs."""
    root, calls, env = _clone_with_stand_ins(tmp_path)
    broken = root / ".venv" / "bin" / "python"
    broken.parent.mkdir(parents=True)
    broken.write_text(f'#!/bin/sh\necho "broken python $*" >> {calls}\necho "No module named pip" >&2\nexit 1\n')
    broken.chmod(0o755)

    done = _set_up(root, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "set up"
    assert calls.read_text().splitlines()[:5] == [
        "maker -c import sys; sys.exit(sys.version_info[:2] != (3, 11))",
        "broken python -m pip --version",
        "maker -m venv .venv",
        "venv python -m pip install --upgrade pip",
        "venv python -m pip install -e .[test]",
    ]
    assert list((root / ".venv").glob(".installed-*")), "the install is stamped"


def test_the_jvm_jars_are_fetched_into_the_venv_once_and_again_when_the_pom_changes(tmp_path: Path) -> None:
    """The jars jvm/pom.xml declares, fetched by Maven into the folder the provider names (the venv's
    share/spark-tables/jars), and the Kafka broker's beside them; not again while the poms are the same; again,
    whole, when one changes, that one only; and a failed fetch stops the setup in one line, keeping the jars fetched
    before."""
    root, calls, env = _clone_with_stand_ins(tmp_path)
    jars = root / ".venv" / "share" / "spark-tables" / "jars"
    broker_jars = jars.with_name("kafka-broker")

    def fetches() -> list[str]:
        return [line for line in calls.read_text().splitlines() if line.startswith("mvn ")]

    first = _set_up(root, env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"fetching the JVM jars jvm/pom.xml declares from Maven Central into {jars} ..." in first.stdout
    assert fetches() == [
        f"mvn -B -f jvm/pom.xml dependency:copy-dependencies -Djars.dir={jars}.new",
        f"mvn -B -f jvm/kafka-broker/pom.xml dependency:copy-dependencies -Djars.dir={broker_jars}.new",
    ]
    assert list(broker_jars.glob(".fetched-*"))
    assert {path.name for path in jars.iterdir() if not path.name.startswith(".")} == {"postgresql.jar"}
    [stamp] = jars.glob(".fetched-*")
    assert not jars.with_name("jars.new").exists()

    again = _set_up(root, env)
    assert again.returncode == 0 and "fetching" not in again.stdout
    assert len(fetches()) == 2, "the same poms: nothing fetched"

    pom = root / "jvm" / "pom.xml"
    pom.write_text(pom.read_text() + "<!-- changed -->\n")
    (tmp_path / "mvn-fails").touch()
    failed = _set_up(root, env)
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[-1] == "error: fetching the JVM jars failed; log: .venv/mvn-jars.log"
    assert (jars / "postgresql.jar").exists(), "the jars fetched before are kept"

    (tmp_path / "mvn-fails").unlink()
    changed = _set_up(root, env)
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert len(fetches()) == 4 and fetches()[-1].startswith("mvn -B -f jvm/pom.xml "), "the changed pom's only"
    [new_stamp] = jars.glob(".fetched-*")
    assert new_stamp != stamp, "the folder is the new fetch's, whole"


def _postgres_ready(
    port: int, home: Path, passfile: Path, *databases: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """scripts/services.sh's ``postgres_ready`` for user postgres at 127.0.0.1:``port``, as scripts/test.sh calls it,
    with libpq's password file at ``passfile``."""
    script = (
        f'ROOT="{REPO}"; source "{REPO}/scripts/services.sh"; postgres_ready SPARK_TABLES_TEST_PG_HOST/_PORT/_USER '
        f'127.0.0.1 {port} postgres "" {" ".join(databases)} || {{ echo "error: $POSTGRES_PROBLEM" >&2; exit 1; }}'
    )
    return subprocess.run(
        ["bash", "-c", script],
        env=_env(AIRFLOW_HOME=str(home), PGPASSFILE=str(passfile), **env),
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_commands_stop_in_one_line_when_they_cannot_set_up_postgresql(tmp_path: Path) -> None:
    """Not root (a stand-in ``id``), with no PostgreSQL on the port: nothing is installed or made, and the one line
    names what to run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")
    (bin_dir / "id").chmod(0o755)
    port = _free_port()
    done = _postgres_ready(port, tmp_path, tmp_path / "pgpass", "d", PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"error: PostgreSQL does not let user postgres log in at 127.0.0.1:{port} (")
    assert done.stderr.endswith(
        "): run scripts/test.sh or scripts/demo.sh as root once (they install, start and set up a local PostgreSQL), "
        "or set SPARK_TABLES_TEST_PG_HOST/_PORT/_USER to a server that lets that user in\n"
    )
    assert len(done.stderr.splitlines()) == 1 and _cluster_on(port) is None


def _cluster_on(port: int) -> dict[str, Any] | None:
    listed = subprocess.run(["pg_lsclusters", "--json"], capture_output=True, text=True, check=True).stdout
    return next((cluster for cluster in json.loads(listed or "[]") if str(cluster["port"]) == str(port)), None)


def test_the_commands_make_a_local_postgresql_and_a_login_of_their_own(tmp_path: Path) -> None:
    """As root on loopback, a port where no PostgreSQL runs gets a cluster of Debian's, created and started; user
    postgres, who had no password, a random one kept first in libpq's password file (mode 600, the lines there
    before kept) and asked for by the server; and the database. A second call finds it all and changes nothing; a
    password someone else set is never replaced: the call stops in one line saying where to put it."""
    port = _free_port()
    passfile = tmp_path / "pgpass"
    passfile.write_text("# someone's\n127.0.0.1:5432:*:alice:secret\n")
    passfile.chmod(0o600)
    assert _cluster_on(port) is None
    try:
        done = _postgres_ready(port, tmp_path, passfile, "made_here")
        assert done.returncode == 0, done.stdout + done.stderr
        cluster = _cluster_on(port)
        assert cluster is not None and cluster["running"]
        made = f"{cluster['version']} {cluster['cluster']}"
        assert done.stderr.splitlines() == [
            f"creating a PostgreSQL cluster (pg_createcluster {made} --port {port}) ...",
            f"starting PostgreSQL (pg_ctlcluster {made} start) ...",
            f"setting up PostgreSQL's login for postgres: a password, kept in {passfile} ...",
            "created the PostgreSQL database made_here",
        ]
        first, *kept = passfile.read_text().splitlines()
        assert first.startswith(f"127.0.0.1:{port}:*:postgres:") and kept == [
            "# someone's",
            "127.0.0.1:5432:*:alice:secret",
        ]
        assert stat.S_IMODE(passfile.stat().st_mode) == 0o600
        password = first.rsplit(":", 1)[1]
        assert len(password) >= 32
        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="made_here", password=password):
            pass
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="made_here", passfile="/dev/null")

        again = _postgres_ready(port, tmp_path, passfile, "made_here")
        assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
        assert passfile.read_text().splitlines() == [first, *kept]

        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", password=password) as db:
            db.execute("ALTER ROLE postgres PASSWORD 'set-by-someone'")
        passfile.write_text("")
        refused = _postgres_ready(port, tmp_path, passfile, "made_here")
        assert refused.returncode == 1
        assert refused.stderr == (
            f"error: PostgreSQL's user postgres at 127.0.0.1:{port} has a password the scripts do not know: add the "
            f"line '127.0.0.1:{port}:*:postgres:<its password>' to {passfile} (libpq's password file), or set "
            "PGPASSWORD\n"
        )
        assert passfile.read_text() == ""
    finally:
        made = _cluster_on(port)
        if made is not None:
            subprocess.run(["pg_dropcluster", "--stop", str(made["version"]), made["cluster"]], check=True)


SESSION_MODE = REPO / "docs" / "session-mode.md"


def _server_blocks() -> list[str]:
    """The shell blocks of session-mode.md's section on a server of this repository's setup, as they stand."""
    section = SESSION_MODE.read_text().split("\n### A server of this repository's setup\n", 1)[1].split("\n### ", 1)[0]
    return re.findall(r"^```bash\n(.*?)^```$", section, re.S | re.M)


def test_the_session_mode_pages_server_commands_run_as_written() -> None:
    """Each block of the page, run as written from the repository's root (one shell a block, stopping at the first
    failing command): a server on the embedded default, then on a PostgreSQL metastore in the database ``metastore``
    the page names, made empty first as a reader makes it, with the password the page's ``METASTORE_PASSWORD`` holds.
    The SQL example runs in session mode on each; the second's tables are in that metastore; no derby.log is left in
    the folder the commands ran from, and no server is left running."""
    embedded, postgres = _server_blocks()
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", autocommit=True) as conn:
        password = conn.info.password or ""
        conn.execute("DROP DATABASE IF EXISTS metastore")
        conn.execute("CREATE DATABASE metastore")
    shutil.rmtree(REPO / ".airflow" / "pg-warehouse", ignore_errors=True)  # a warehouse for the new metastore
    for block, env in ((embedded, _env()), (postgres, _env(METASTORE_PASSWORD=password))):
        try:
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", block],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
        finally:
            subprocess.run(["bash", "scripts/connect_server.sh", "stop"], cwd=REPO, env=_env(), capture_output=True)
        said = done.stdout + done.stderr
        assert done.returncode == 0, said[-6000:]
        assert said.count("session mode: the job runs on the Spark Connect server of connection 'spark_default'") == 2
        assert "state=success" in said and not (REPO / "derby.log").exists()
        # the script's server, by the repository's Airflow home in its command (other tests run servers of their own)
        commands = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])]
        servers = [command for command in commands if "SparkConnectServer" in command and f"{REPO}/.airflow" in command]
        assert servers == [], "the script's server left running"
        assert not (REPO / ".airflow" / "spark_tables" / "connect-server.pid").exists()
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="metastore") as conn:
        tables = {name for (name,) in conn.execute('SELECT "TBL_NAME" FROM "TBLS"')}
    assert {"orders", "daily_totals"} <= tables, tables
