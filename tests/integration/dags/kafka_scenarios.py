"""A compiled plan reading a Kafka topic (tests/integration/test_kafka_plans.py): orders over 5 from the topic the
test names in ``SPARK_TABLES_TEST_KAFKA_TOPIC``, upserted by order id into PostgreSQL, compiled on the first run and
executed on every run from the plan's checkpoint."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG

from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.operators.plan import SparkCompilePlanOperator

with DAG(
    dag_id="kafka_plan_scenario", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False
):
    SparkCompilePlanOperator(
        task_id="big_orders",
        plan_uri=os.environ.get("SPARK_TABLES_TEST_KAFKA_PLAN", "/nonexistent/kafka_plan.json"),
        sql="INSERT INTO big_orders SELECT order_id, shop, amount FROM orders WHERE amount > 5",
        sources=KafkaTopicSource(
            "orders",
            os.environ.get("SPARK_TABLES_TEST_KAFKA_TOPIC", "orders"),
            "order_id BIGINT, shop STRING, amount INT",
        ),
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
