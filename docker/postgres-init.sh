#!/usr/bin/env bash
# Run once, when the PostgreSQL volume is first made (the postgres image runs /docker-entrypoint-initdb.d/*.sh): beside
# Airflow's metadata database, the Hive metastore of the spark_tables catalog, owned by a role of its own (not the
# superuser that owns Airflow's database), and the example DAGs' tables. The role's password is read from the
# environment by psql itself (\getenv), so it is on no command line.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
\getenv metastore_password METASTORE_PASSWORD
CREATE ROLE metastore LOGIN PASSWORD :'metastore_password';
CREATE DATABASE metastore OWNER metastore;
CREATE DATABASE demo;
SQL
