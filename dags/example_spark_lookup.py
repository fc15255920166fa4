"""FLIP-221 lookup joins: orders enriched with their customer from PostgreSQL, through each of the three caches.

``customers`` is a lookup table in PostgreSQL (connection ``spark_tables_lookup_demo``, type postgres). Its
full cache is reloaded on a schedule: ``wait_for_reload`` is a deferrable sensor that waits, in the triggerer, until
the next reload is due (every 10 minutes, counted from the start of the last load: FIXED_RATE), and ``reload``
scans the table into a new snapshot with Spark's JDBC reader and publishes it. Then the same orders are enriched
three ways, with identical results: NONE (a query per order), PARTIAL (an LRU cache in each executor worker) and
FULL (a join with the snapshot, no query per order). Each task's XCom ``metrics`` has the FLIP's metrics.

A second lookup table, ``demo_segments``, is a Delta Lake table of the catalog (``LookupTable.in_catalog``; the
catalog loads Delta): each segment's discount, which ``review_segments`` merges anew each run (a new version of the
table). Its full cache follows the table's versions (``ON_CHANGE``): ``wait_for_segments`` finds the version changed
(read from the table's log, no Spark), ``reload_segments`` copies that one version into a snapshot that records it,
``enrich_segments`` joins the enriched orders with it (its XCom ``table_version`` says which version it read), and
``check_segments``, a reload again, finds the table unchanged and ends without a Spark job.

``example_spark_lookup_reload`` is the reload alone, as it runs in production: ``@continuous`` with one active run,
so a new run starts as soon as the last reload is done and its sensor waits for the next one. It reloads the same
table nightly instead (TIMED: at 02:00 in Airflow's ``[core] default_timezone``, every day, right across
daylight-saving changes): the schedule is an option of the table, and each DAG reads the table with its own.
``example_spark_lookup_segments_reload`` reloads the Delta table the same way, whenever its version changes: its
sensor waits in the triggerer, which looks at the table's log every minute.
"""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

from spark_tables.core.lookup.table import LookupTable
from spark_tables.operators.lookup import SparkLookupJoinOperator, SparkLookupReloadOperator
from spark_tables.operators.sql import SparkSqlJobOperator
from spark_tables.sensors.lookup_reload import LookupReloadSensor

CONN_ID = "spark_tables_lookup_demo"
#: The Delta dimension table: a FULL cache of one version at a time, reloaded when the version changes.
segments = LookupTable.in_catalog(name="demo_segments", table="lookup_demo.segments", key=("segment",))
REVIEW_SEGMENTS = [
    "CREATE DATABASE IF NOT EXISTS lookup_demo",
    "CREATE TABLE IF NOT EXISTS lookup_demo.segments (segment STRING, discount DOUBLE, reviewed STRING) USING delta",
    """MERGE INTO lookup_demo.segments t
       USING (SELECT * FROM VALUES ('retail', 0.0), ('wholesale', 0.12), ('online', 0.05) AS s(segment, discount)) s
       ON t.segment = s.segment
       WHEN MATCHED THEN UPDATE SET discount = s.discount, reviewed = '{{ run_id }}'
       WHEN NOT MATCHED THEN INSERT (segment, discount, reviewed) VALUES (s.segment, s.discount, '{{ run_id }}')""",
]
customers = LookupTable(
    name="demo_customers",
    conn_id=CONN_ID,
    table="spark_tables_demo.customers",
    key=("customer_id",),
    options={
        "lookup.cache": "FULL",
        "lookup.full-cache.reload-strategy": "PERIODIC",
        "lookup.full-cache.periodic-reload.interval": "10 min",
        "lookup.full-cache.periodic-reload.schedule-mode": "FIXED_RATE",
        "lookup.partial-cache.max-rows": "2000",  # for the tasks that choose PARTIAL
        "lookup.partial-cache.expire-after-write": "1 h",
    },
)
SEED = [
    # The examples share this schema: run at once (as from the UI), their seeds take turns, one transaction each,
    # since two CREATE ... IF NOT EXISTS of one name at once can fail on a duplicate key.
    "SELECT pg_advisory_xact_lock(hashtext('spark_tables_demo'))",
    "CREATE SCHEMA IF NOT EXISTS spark_tables_demo",
    "CREATE TABLE IF NOT EXISTS spark_tables_demo.customers "
    "(customer_id integer PRIMARY KEY, name text NOT NULL, segment text NOT NULL)",
    "INSERT INTO spark_tables_demo.customers "
    "SELECT i, 'customer ' || i, (ARRAY['retail', 'wholesale', 'online'])[1 + i % 3] FROM generate_series(1, 1000) i "
    "ON CONFLICT (customer_id) DO NOTHING",
]
#: 20,000 orders of customers 1..1100, most of them by few customers (skewed as real orders are); about 3 % are of
#: ids 1001..1100, which the table lacks.
ORDERS = """
    SELECT id AS order_id,
           CAST(1 + floor(1100 * pow(pmod(id * 7919, 20000) / 20000.0, 3)) AS INT) AS customer_id,
           CAST(id % 97 AS DOUBLE) AS amount
    FROM range(20000)
"""

with DAG(
    dag_id="example_spark_lookup",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["spark_tables", "flip-221"],
) as dag:
    seed = SQLExecuteQueryOperator(task_id="seed_customers", conn_id=CONN_ID, sql=SEED)
    wait_for_reload = LookupReloadSensor(task_id="wait_for_reload", lookup=customers, deferrable=True)
    reload = SparkLookupReloadOperator(
        task_id="reload",
        lookup=customers,
        scheduled_for="{{ ti.xcom_pull(task_ids='wait_for_reload') }}",
        num_partitions=2,
    )
    enrich = [
        SparkLookupJoinOperator(
            task_id=f"enrich_{cache.lower()}",
            lookup=customers,
            lookup_options={"lookup.cache": cache},
            probe=ORDERS,
            on="customer_id",
            output_table=f"orders_enriched_{cache.lower()}",
            mode="overwrite",  # each run replaces the last run's enriched orders
        )
        for cache in ("NONE", "PARTIAL", "FULL")
    ]
    seed >> wait_for_reload >> reload >> enrich

    review_segments = SparkSqlJobOperator(task_id="review_segments", sql=REVIEW_SEGMENTS)
    wait_for_segments = LookupReloadSensor(task_id="wait_for_segments", lookup=segments, deferrable=True)
    reload_segments = SparkLookupReloadOperator(task_id="reload_segments", lookup=segments)
    enrich_segments = SparkLookupJoinOperator(
        task_id="enrich_segments",
        lookup=segments,
        probe="SELECT order_id, customer_id, amount, segment FROM orders_enriched_full",
        on="segment",
        output_table="orders_discounted",
        mode="overwrite",
    )
    check_segments = SparkLookupReloadOperator(task_id="check_segments", lookup=segments)
    review_segments >> wait_for_segments >> reload_segments >> enrich_segments >> check_segments
    enrich[-1] >> enrich_segments

nightly_customers = customers.with_options(
    {
        "lookup.full-cache.reload-strategy": "TIMED",
        "lookup.full-cache.timed-reload.iso-time": "02:00",
        "lookup.full-cache.timed-reload.interval-in-days": "1",
    }
)

with DAG(
    dag_id="example_spark_lookup_reload",
    schedule="@continuous",
    max_active_runs=1,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["spark_tables", "flip-221"],
) as reload_dag:
    (
        LookupReloadSensor(task_id="wait_for_reload", lookup=nightly_customers, deferrable=True)
        >> SparkLookupReloadOperator(
            task_id="reload",
            lookup=nightly_customers,
            scheduled_for="{{ ti.xcom_pull(task_ids='wait_for_reload') }}",
            num_partitions=2,
        )
    )

with DAG(
    dag_id="example_spark_lookup_segments_reload",
    schedule="@continuous",
    max_active_runs=1,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["spark_tables", "flip-221", "delta"],
) as segments_reload_dag:
    (
        LookupReloadSensor(task_id="wait_for_segments", lookup=segments, deferrable=True, poke_interval=60)
        >> SparkLookupReloadOperator(task_id="reload_segments", lookup=segments)
    )
