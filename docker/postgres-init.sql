-- Run once, when the PostgreSQL volume is first made (the postgres image runs /docker-entrypoint-initdb.d/*.sql):
-- beside Airflow's metadata database, the Hive metastore of the spark_tables catalog and the example DAGs' tables.
CREATE DATABASE metastore;
CREATE DATABASE demo;
