# Sourced by scripts/setup.sh: the services part of the setup. postgres_ready, which scripts/test.sh and
# scripts/demo.sh call (the test command stops when it fails, the demo leaves out its lookup example), and
# redis_ready, which scripts/test.sh calls (the Celery executor's broker in the tests of Airflow as deployed).
#
#   postgres_ready CHOOSER HOST PORT USER PASSWORD DATABASE...
#
# makes sure that
#   - the PostgreSQL JDBC driver is at /usr/share/java/postgresql.jar (where Spark's JDBC reads and the PostgreSQL
#     metastore load it from): as root, installs Debian's libpostgresql-jdbc-java when it is missing;
#   - PostgreSQL lets USER log in at HOST:PORT (PASSWORD may be empty: trust auth): as root, starts the local
#     cluster of that port when it is installed but down;
#   - every DATABASE exists: creates the missing ones.
# Returns 0 when all of it is there; otherwise 1, with POSTGRES_PROBLEM set to one line saying what is missing
# and the command that fixes it. CHOOSER names the setting that points the caller at another server.

JDBC_DRIVER_JAR=/usr/share/java/postgresql.jar
JDBC_DRIVER_FIX="run 'apt-get install libpostgresql-jdbc-java' as root"

# debian_install PACKAGE WHAT: as root where apt-get is, installs Debian's PACKAGE (WHAT says what it is for, in the
# line that announces it), its output in $AIRFLOW_HOME/apt-get-PACKAGE.log; the package lists are updated once a
# run. Returns 1 when it cannot (not root, no apt-get); the caller checks for what the package provides.
DEBIAN_LISTS_UPDATED=""
debian_install() {
  local package=$1 what=$2
  { [ "$(id -u)" -eq 0 ] && command -v apt-get > /dev/null; } || return 1
  echo "installing $what (apt-get install $package) ..."
  {
    { [ -n "$DEBIAN_LISTS_UPDATED" ] || apt-get update -qq; } && DEBIAN_LISTS_UPDATED=1 \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package"
  } < /dev/null > "$AIRFLOW_HOME/apt-get-$package.log" 2>&1 || true
}

postgres_ready() {
  POSTGRES_PROBLEM=""
  _jdbc_driver_installed && _postgres_databases "$@"
}

_jdbc_driver_installed() {
  [ -f "$JDBC_DRIVER_JAR" ] && return 0
  if ! debian_install libpostgresql-jdbc-java "the PostgreSQL JDBC driver"; then
    POSTGRES_PROBLEM="the PostgreSQL JDBC driver is missing ($JDBC_DRIVER_JAR): $JDBC_DRIVER_FIX"
    return 1
  fi
  [ -f "$JDBC_DRIVER_JAR" ] && return 0
  POSTGRES_PROBLEM="installing the PostgreSQL JDBC driver failed (log: $AIRFLOW_HOME/apt-get-libpostgresql-jdbc-java.log): $JDBC_DRIVER_FIX"
  return 1
}

_postgres_databases() {
  local chooser=$1 host=$2 port=$3 cluster
  shift
  _create_databases "$@" && return 0
  # No login at all: start the local cluster of that port if it is installed but down. A cluster that is up
  # is left alone.
  cluster=$(pg_lsclusters --no-header 2> /dev/null | awk -v port="$port" '$3 == port && $4 == "down" { print $1, $2 }')
  if [ "$_POSTGRES_STATUS" -eq 2 ] && [[ "$host" =~ ^(127\.0\.0\.1|localhost)$ ]] && [ -n "$cluster" ]; then
    if [ "$(id -u)" -ne 0 ]; then
      POSTGRES_PROBLEM="PostgreSQL $cluster is installed but down: run 'pg_ctlcluster $cluster start' as root"
      return 1
    fi
    echo "starting PostgreSQL (pg_ctlcluster $cluster start) ..."
    # shellcheck disable=SC2086  # $cluster is "VERSION NAME"
    pg_ctlcluster --skip-systemctl-redirect $cluster start < /dev/null > /dev/null 2>&1 || true
    for _ in $(seq 1 30); do pg_isready -h "$host" -p "$port" -q && break; sleep 1; done
    _create_databases "$@" && return 0
  fi
  if [ "$_POSTGRES_STATUS" -eq 2 ]; then
    POSTGRES_PROBLEM+=": start it there (or let that user in), or set $chooser to a server that does"
  fi
  return 1
}

# With the venv's psycopg, so that the psql client is not needed. Says which databases it creates; on failure
# sets POSTGRES_PROBLEM and _POSTGRES_STATUS (2: no login at all, 1: logged in but could not create).
_create_databases() {
  local host=$1 port=$2 user=$3 password=$4
  shift 4
  _POSTGRES_STATUS=0
  # The password goes through libpq's PGPASSWORD: an argument would be on every user's process list.
  POSTGRES_PROBLEM=$([ -z "$password" ] || export PGPASSWORD="$password"
    PGCONNECT_TIMEOUT=5 python - "$host" "$port" "$user" "$@" <<'PY'
import sys

import psycopg
from psycopg import sql

host, port, user, *databases = sys.argv[1:]
try:
    conn = psycopg.connect(host=host, port=port, user=user, dbname="postgres", autocommit=True)
except psycopg.Error as err:
    reason = " ".join(str(err).splitlines()[0].split())  # the first line has the cause
    print(f"PostgreSQL does not let user {user} log in at {host}:{port} ({reason})")
    sys.exit(2)
with conn:
    for name in databases:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            continue
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.Error as err:
            print(f"creating the PostgreSQL database {name} failed: {' '.join(str(err).split())}")
            sys.exit(1)
        print(f"created the PostgreSQL database {name}", file=sys.stderr)
PY
  ) || _POSTGRES_STATUS=$?
  [ "$_POSTGRES_STATUS" -eq 0 ] && return 0
  POSTGRES_PROBLEM=${POSTGRES_PROBLEM:-checking PostgreSQL at $host:$port failed (the error is above)}
  return 1
}

#   redis_ready CHOOSER HOST:PORT
#
# makes sure that Redis answers at HOST:PORT: as root, on loopback, starts a redis-server there when none answers
# (keeping nothing on disk: the tests' broker queues need not outlive it), installing Debian's redis-server first
# when it is missing. Returns 0 when Redis answers; otherwise 1, with REDIS_PROBLEM set to one line saying what is
# missing and the command that fixes it.
redis_ready() {
  local chooser=$1 address=$2 host port
  host=${address%:*} port=${address##*:}
  REDIS_PROBLEM=""
  _redis_answers "$host" "$port" && return 0
  if [[ ! "$host" =~ ^(127\.0\.0\.1|localhost)$ ]] || [ "$(id -u)" -ne 0 ]; then
    REDIS_PROBLEM="Redis does not answer at $address: start it there ('redis-server --port $port --daemonize yes'), or set $chooser to host:port of one that does"
    return 1
  fi
  if ! command -v redis-server > /dev/null; then
    debian_install redis-server Redis
    if ! command -v redis-server > /dev/null; then
      REDIS_PROBLEM="installing Redis failed (log: $AIRFLOW_HOME/apt-get-redis-server.log): run 'apt-get install redis-server' as root"
      return 1
    fi
    _redis_answers "$host" "$port" && return 0  # the package's own service, where it starts one
  fi
  echo "starting Redis (redis-server on $address) ..."
  redis-server --bind "$host" --port "$port" --daemonize yes --save '' --appendonly no \
    --logfile "$AIRFLOW_HOME/redis.log" < /dev/null > /dev/null 2>&1 || true
  for _ in $(seq 1 30); do _redis_answers "$host" "$port" && return 0; sleep 1; done
  REDIS_PROBLEM="starting Redis on $address failed (log: $AIRFLOW_HOME/redis.log): start it there, or set $chooser to host:port of one that does"
  return 1
}

# With the venv's redis client, so that redis-cli is not needed.
_redis_answers() {
  python - "$1" "$2" <<'PY' 2> /dev/null
import sys

import redis

host, port = sys.argv[1], int(sys.argv[2])
sys.exit(0 if redis.Redis(host=host, port=port, socket_connect_timeout=2).ping() else 1)
PY
}
