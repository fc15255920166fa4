"""A compiled plan reading a Kafka topic, a streaming aggregation writing one, a lookup join enriching one
(tests/integration/test_kafka_plans.py): orders over 5 from the topic the test names in
``SPARK_TABLES_TEST_KAFKA_TOPIC``, upserted by order id into PostgreSQL, compiled on the first run and executed on
every run from the plan's checkpoint; the orders counted by shop, buffered (FLIP-365) and upserted into the compacted
topic ``SPARK_TABLES_TEST_KAFKA_COUNTS`` (upsert-kafka); each order enriched with its shop's region from PostgreSQL
into a catalog table."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG

from spark_tables.core.lookup.table import LookupTable
from spark_tables.core.streaming.sinks import KafkaUpsertSink, PostgresUpsertSink
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.operators.aggregation import SparkStreamingAggregationOperator
from spark_tables.operators.lookup import SparkLookupJoinOperator
from spark_tables.operators.plan import SparkCompilePlanOperator

ORDERS = KafkaTopicSource(
    "orders", os.environ.get("SPARK_TABLES_TEST_KAFKA_TOPIC", "orders"), "order_id BIGINT, shop STRING, amount INT"
)

with DAG(
    dag_id="kafka_plan_scenario", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False
):
    SparkCompilePlanOperator(
        task_id="big_orders",
        plan_uri=os.environ.get("SPARK_TABLES_TEST_KAFKA_PLAN", "/nonexistent/kafka_plan.json"),
        sql="INSERT INTO big_orders SELECT order_id, shop, amount FROM orders WHERE amount > 5",
        sources=ORDERS,
        postgres_sinks=[
            PostgresUpsertSink(
                name="big_orders",
                conn_id="spark_tables_kafka_demo",
                table="kafka_scenario.big_orders",
                key=("order_id",),
            )
        ],
        execute=True,
    )
    SparkStreamingAggregationOperator(
        task_id="shop_counts",
        sql="SELECT shop, count(*) AS orders, sum(amount) AS total FROM orders GROUP BY shop",
        sources=ORDERS,
        sink=KafkaUpsertSink(
            name="shop_counts", topic=os.environ.get("SPARK_TABLES_TEST_KAFKA_COUNTS", "shop-counts"), key=("shop",)
        ),
        flush_max_interval="1 h",
        checkpoint=os.environ.get("SPARK_TABLES_TEST_KAFKA_CHECKPOINT"),
    )
    SparkLookupJoinOperator(
        task_id="order_regions",
        lookup=LookupTable(
            name="shops",
            conn_id="spark_tables_kafka_demo",
            table="kafka_scenario.shops",
            key=("shop",),
            options={"lookup.cache": "NONE"},
        ),
        probe_stream=ORDERS,
        on="shop",
        output_table="kafka_scenario_order_regions",
        checkpoint=os.environ.get("SPARK_TABLES_TEST_KAFKA_LOOKUP_CHECKPOINT"),
    )
