"""FLIP-365 buffered output: FLIP-365's page-view example, the views of each page per 2-minute window kept current in
a PostgreSQL table, written three ways side by side, and in a Delta table and a compacted Kafka topic.

Each run adds 2,000 page views to a stream table, in 8 files that the aggregation reads one per micro-batch (as a
stream that stays current with short micro-batches would); each file has views of most pages in every window.
Three tasks run the same Spark SQL aggregation over it, each into its own table, each resuming from its own
checkpoint:

- ``views_unbuffered``: every micro-batch upserts every result it changed (as without this capability): most of
  the run's 100 (page, window) results, 8 times over;
- ``views_buffered``: ``flush_max_interval``: each window's latest result is written at most once per interval,
  the buffer durable: in the driver, logged in the checkpoint (in session mode, in the state store); nothing
  buffered is lost across a restart;
- ``views_memory_buffered``: the same, the buffer in the driver's memory (``flush_memory_buffer_only``), bounded by
  ``cache_max_entries`` results (a full buffer would flush early).

A fourth, ``views_buffered_delta``, keeps the same results in a Delta Lake table of the catalog (``TableUpsertSink``,
one ``MERGE`` a write; the catalog loads Delta), buffered the same way: on Delta, what the buffer saves is commits
and small files, one commit a flush where unbuffered each micro-batch would make one (its XCom's ``write_calls``
counts the commits, ``files_written`` the data files they added). A fifth, ``views_buffered_kafka``, sends them to a
compacted Kafka topic by key (``KafkaUpsertSink``, as Flink's upsert-kafka connector does), buffered the same way:
a flush sends one message a key, its latest result, where unbuffered each micro-batch would send one a change.

The four tables and the topic's latest message of each key end identical; the XCom ``query`` of each task (and its
log) says how many rows it wrote in how many write calls (messages sent, for the topic), and for the buffered ones
the flushes by cause. The interval is the DAG's param ``flush_max_interval`` (2 min). The connection
``spark_tables_buffered_demo`` (type postgres) names the database, ``spark_tables_buffered_kafka`` (type kafka) the
brokers.
"""

from __future__ import annotations

import pendulum
from airflow.providers.apache.kafka.hooks.client import KafkaAdminClientHook
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG, Param, task
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from spark_tables.core.streaming.sinks import KafkaUpsertSink, PostgresUpsertSink, TableUpsertSink
from spark_tables.operators.aggregation import SparkStreamingAggregationOperator
from spark_tables.operators.sql import SparkSqlJobOperator

CONN_ID = "spark_tables_buffered_demo"
KAFKA_CONN_ID = "spark_tables_buffered_kafka"
#: The topic views_buffered_kafka sends to: compacted, so that Kafka keeps each key's latest message.
TOPIC = "spark_tables_demo.page_views_per_slot"
WRITTEN_THREE_WAYS = ("unbuffered", "buffered", "memory_buffered")
SEED_SINKS = [
    # The examples share this schema: run at once (as from the UI), their seeds take turns, one transaction each,
    # since two CREATE ... IF NOT EXISTS of one name at once can fail on a duplicate key.
    "SELECT pg_advisory_xact_lock(hashtext('spark_tables_demo'))",
    "CREATE SCHEMA IF NOT EXISTS spark_tables_demo",
    *(
        f"CREATE TABLE IF NOT EXISTS spark_tables_demo.page_views_{way} (page text, slot_start timestamp, "
        "slot_end timestamp, views bigint, visitors bigint, PRIMARY KEY (page, slot_start))"
        for way in WRITTEN_THREE_WAYS
    ),
]
#: The stream table: each INSERT adds 8 files, read one a micro-batch, the views dealt round-robin among them. Views
#: fall in the 10 minutes after the run's logical date, on 20 pages (page_0 the most viewed), by 300 visitors.
ADD_PAGE_VIEWS = [
    "CREATE DATABASE IF NOT EXISTS buffered_demo",
    "CREATE TABLE IF NOT EXISTS buffered_demo.page_views (page STRING, visitor INT, ts TIMESTAMP) USING json "
    "OPTIONS (maxFilesPerTrigger 1)",
    "CREATE TABLE IF NOT EXISTS buffered_demo.page_views_per_slot "
    "(page STRING, slot_start TIMESTAMP, slot_end TIMESTAMP, views BIGINT, visitors INT) USING delta",
    """INSERT INTO buffered_demo.page_views
       SELECT /*+ REPARTITION(8) */ page, visitor, ts
       FROM (SELECT concat('page_', CAST(floor(pow(id % 400, 2) / 8000) AS STRING)) AS page,
                    CAST(id * 7 % 300 AS INT) AS visitor,
                    timestamp_seconds({{ (dag_run.logical_date or dag_run.run_after).timestamp() | int }}
                                      + id * 600 DIV 2000) AS ts
             FROM range(2000))""",
]
#: FLIP-365's example: views per page and 2-minute window (its times scaled down). The watermark lets Spark drop
#: the state of windows 10 minutes behind the latest view; no view of a run is that late.
VIEWS_PER_SLOT = """
    SELECT page, window(ts, '2 minutes') AS slot, count(*) AS views, size(collect_set(visitor)) AS visitors
    FROM STREAM(buffered_demo.page_views) WATERMARK ts DELAY OF INTERVAL 10 MINUTES
    GROUP BY page, window(ts, '2 minutes')
"""


def _sink(way: str) -> PostgresUpsertSink:
    return PostgresUpsertSink(
        name=f"page_views_{way}",
        conn_id=CONN_ID,
        table=f"spark_tables_demo.page_views_{way}",
        key=("page", "slot_start"),
    )


@task
def create_topic() -> None:
    """The sink's topic, compacted, made on the first run (one partition, one replica: the demo's one broker)."""
    admin = KafkaAdminClientHook(kafka_config_id=KAFKA_CONN_ID).get_conn
    made = admin.create_topics([NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact"})])[TOPIC]
    try:
        made.result(30)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


with DAG(
    dag_id="example_spark_buffered_output",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["spark_tables", "flip-365"],
    params={
        "flush_max_interval": Param(
            "2 min", type="string", description="execution.flush.max-interval of the buffered tasks (2 min, 1 h)"
        )
    },
) as dag:
    seed_sinks = SQLExecuteQueryOperator(task_id="seed_sinks", conn_id=CONN_ID, sql=SEED_SINKS)
    add_page_views = SparkSqlJobOperator(task_id="add_page_views", sql=ADD_PAGE_VIEWS)
    unbuffered = SparkStreamingAggregationOperator(
        task_id="views_unbuffered", sql=VIEWS_PER_SLOT, sink=_sink("unbuffered")
    )
    buffered = SparkStreamingAggregationOperator(
        task_id="views_buffered",
        sql=VIEWS_PER_SLOT,
        sink=_sink("buffered"),
        flush_max_interval="{{ params.flush_max_interval }}",
    )
    memory_buffered = SparkStreamingAggregationOperator(
        task_id="views_memory_buffered",
        sql=VIEWS_PER_SLOT,
        sink=_sink("memory_buffered"),
        flush_max_interval="{{ params.flush_max_interval }}",
        flush_memory_buffer_only=True,
        cache_max_entries=1000,
    )
    buffered_delta = SparkStreamingAggregationOperator(
        task_id="views_buffered_delta",
        sql=VIEWS_PER_SLOT,
        sink=TableUpsertSink(name="buffered_demo.page_views_per_slot", key=("page", "slot_start")),
        flush_max_interval="{{ params.flush_max_interval }}",
    )
    buffered_kafka = SparkStreamingAggregationOperator(
        task_id="views_buffered_kafka",
        sql=VIEWS_PER_SLOT,
        sink=KafkaUpsertSink(name="page_views_topic", topic=TOPIC, key=("page", "slot_start"), conn_id=KAFKA_CONN_ID),
        flush_max_interval="{{ params.flush_max_interval }}",
    )
    [seed_sinks, add_page_views] >> unbuffered >> buffered >> memory_buffered >> buffered_delta
    [create_topic(), buffered_delta] >> buffered_kafka
