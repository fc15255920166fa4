# Sourced by scripts/setup.sh: the services part of the setup. postgres_ready, which scripts/test.sh and
# scripts/demo.sh call (the test command stops when it fails, the demo leaves out its PostgreSQL examples), and
# redis_ready, which scripts/test.sh calls (the Celery executor's broker in the tests of Airflow as deployed).
#
#   postgres_ready CHOOSER HOST PORT USER PASSWORD DATABASE...
#
# makes sure that USER logs in at HOST:PORT (PASSWORD may be empty: libpq's password file, ~/.pgpass, then has it)
# and that every DATABASE exists (scripts/postgres_ready.py). As root, with HOST on loopback, it first installs
# Debian's postgresql when it is missing, and lets scripts/postgres_ready.py make a cluster on PORT, start it, and set
# up USER's login with a password kept in the password file. Returns 0 when all of it is there; otherwise 1, with
# POSTGRES_PROBLEM set to one line saying what is missing and what to do. CHOOSER names the setting that points the
# caller at another server.

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
  local chooser=$1 host=$2 port=$3 user=$4 password=$5
  shift 5
  POSTGRES_PROBLEM=$(_postgres_ready "$chooser" "$host" "$port" "$user" "$password" "$@") && return 0
  [ "$?" -eq 2 ] && [[ "$host" =~ ^(127\.0\.0\.1|localhost)$ ]] && [ "$(id -u)" -eq 0 ] || return 1
  # No login at all, on loopback, as root: the server made here.
  if ! _postgres_server_installed; then
    debian_install postgresql PostgreSQL
    if ! _postgres_server_installed; then
      POSTGRES_PROBLEM="installing PostgreSQL failed (log: $AIRFLOW_HOME/apt-get-postgresql.log): run 'apt-get install postgresql' as root"
      return 1
    fi
  fi
  POSTGRES_PROBLEM=$(_postgres_ready --manage "$chooser" "$host" "$port" "$user" "$password" "$@")
}

# With the venv's psycopg, so that the psql client is not needed. The password goes through libpq's PGPASSWORD: an
# argument would be on every user's process list.
_postgres_ready() {
  local manage=()
  [ "$1" != --manage ] || { manage=(--manage); shift; }
  local chooser=$1 host=$2 port=$3 user=$4 password=$5
  shift 5
  ([ -z "$password" ] || export PGPASSWORD="$password"
    python "$ROOT/scripts/postgres_ready.py" "${manage[@]}" "$chooser" "$host" "$port" "$user" "$@")
}

_postgres_server_installed() {
  command -v pg_createcluster > /dev/null && compgen -G "/usr/lib/postgresql/*/bin/postgres" > /dev/null
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
