# Sourced by scripts/demo.sh and scripts/test.sh: sets everything up from a fresh clone, quickly when it is.
#   - stops at once with a clear message if Java 17+ or Python 3.11 is missing
#   - creates .venv and installs the provider with its test extras (again only when pyproject.toml changes)
#   - fetches the JVM jars jvm/pom.xml declares from Maven Central into .venv/share/spark-tables/jars, and a Kafka
#     broker's (jvm/kafka-broker/pom.xml) into .venv/share/spark-tables/kafka-broker (each again only when its pom
#     changes), with mvn (as root, Debian's maven is installed first when it is missing)
#   - points Airflow at .airflow/ (SQLite metadata DB) and its DAGs folder at AIRFLOW__CORE__DAGS_FOLDER when that
#     is set (made absolute), else this repo's dags/, and migrates the DB; its catalog (spark_tables_default, the
#     embedded one) loads Delta Lake, unless AIRFLOW_CONN_SPARK_TABLES_DEFAULT names another
#   - defines postgres_ready (scripts/services.sh), which test.sh and demo.sh call for their PostgreSQL: the server
#     installed, started and its login set up, the databases created, where that can be done; and redis_ready, which
#     test.sh calls for the Celery executor's broker: the server started (installed first) where that can be done
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# A DAGs folder of one's own, named relative to where the command was started: absolute before the cd below.
if [ -n "${AIRFLOW__CORE__DAGS_FOLDER:-}" ]; then
  AIRFLOW__CORE__DAGS_FOLDER=$(realpath -m -- "$AIRFLOW__CORE__DAGS_FOLDER")
fi
cd "$ROOT"

if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=$(command -v java || true); fi
if [ -z "$JAVA" ]; then
  echo "error: java not found. Spark 4 needs Java 17 or newer: apt-get install openjdk-17-jre-headless, or set JAVA_HOME." >&2
  exit 1
fi
JAVA_MAJOR=$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
if [ -z "$JAVA_MAJOR" ] || [ "$JAVA_MAJOR" -lt 17 ]; then
  echo "error: $JAVA is Java ${JAVA_MAJOR:-unknown}; Spark 4 needs Java 17 or newer." >&2
  exit 1
fi

PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3 || true)}
if [ -z "$PYTHON" ] || ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "error: Python 3.11 not found: install it, or set PYTHON=/path/to/python3.11." >&2
  exit 1
fi

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
STAMP=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$STAMP" ]; then
  # A venv whose creation was interrupted (Ctrl-C, a killed CI job) has no pip: it is made again.
  .venv/bin/python -m pip --version > /dev/null 2>&1 || { rm -rf .venv && "$PYTHON" -m venv .venv; }
  echo "installing the provider and its dependencies into .venv (about a minute the first time) ..."
  { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -e ".[test]"; } \
    > .venv/pip-install.log 2>&1 || { tail -n 30 .venv/pip-install.log >&2; echo "error: install failed; log: .venv/pip-install.log" >&2; exit 1; }
  rm -f .venv/.installed-*
  touch "$STAMP"
fi

export PATH="$ROOT/.venv/bin:$PATH"
export AIRFLOW_HOME="$ROOT/.airflow"
export AIRFLOW__CORE__DAGS_FOLDER="${AIRFLOW__CORE__DAGS_FOLDER:-$ROOT/dags}"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
# Cached tables are registered in the run's XComs through the provider's backend; other XComs work as before.
export AIRFLOW__CORE__XCOM_BACKEND=spark_tables.xcom.cache_registry.CacheRegistryXComBackend
# The catalog of this setup: the embedded one, loading Delta Lake (whose jars are fetched below), as the examples'
# Delta tables need; a catalog connection of one's own, in this variable, replaces it.
export AIRFLOW_CONN_SPARK_TABLES_DEFAULT=${AIRFLOW_CONN_SPARK_TABLES_DEFAULT:-'{"conn_type": "spark_tables", "extra": {"table-formats": ["delta"]}}'}
mkdir -p "$AIRFLOW_HOME"
source "$ROOT/scripts/services.sh"

# Fetches the jars POM declares (with their dependencies) from Maven Central into FOLDER, when POM has changed since
# the last fetch: into a new folder that replaces the old one whole, so that a fetch cut short leaves nothing
# half-made behind.
fetch_jars() {
  local pom=$1 folder=$2 stamp log
  stamp="$folder/.fetched-$(sha256sum "$pom" | cut -c1-16)"
  [ -f "$stamp" ] && return 0
  command -v mvn > /dev/null || debian_install maven "Maven, which fetches the JVM jars $pom declares" || true
  if ! command -v mvn > /dev/null; then
    echo "error: mvn not found (it fetches the JVM jars $pom declares from Maven Central): run 'apt-get install maven' as root." >&2
    exit 1
  fi
  echo "fetching the JVM jars $pom declares from Maven Central into $folder ..."
  log=".venv/mvn-$(basename "$folder").log"
  rm -rf "$folder.new"
  mvn -B -f "$pom" dependency:copy-dependencies -Djars.dir="$folder.new" < /dev/null > "$log" 2>&1 \
    || { tail -n 30 "$log" >&2; echo "error: fetching the JVM jars failed; log: $log" >&2; exit 1; }
  touch "$folder.new/$(basename "$stamp")"
  rm -rf "$folder"
  mv "$folder.new" "$folder"
}

# The jobs' JVM jars, in the folder where the provider looks for them (spark_tables.core.jvm_jars).
JARS_DIR=$(python -c 'from spark_tables.core.jvm_jars import JARS_FOLDER; print(JARS_FOLDER)')
fetch_jars jvm/pom.xml "$JARS_DIR"
# A Kafka broker's server jars, for the tests and the demo (scripts/kafka_broker.py runs it); not the provider's.
export KAFKA_BROKER_JARS="$ROOT/.venv/share/spark-tables/kafka-broker"
fetch_jars jvm/kafka-broker/pom.xml "$KAFKA_BROKER_JARS"

airflow db migrate > "$AIRFLOW_HOME/db-migrate.log" 2>&1 || { cat "$AIRFLOW_HOME/db-migrate.log" >&2; exit 1; }
