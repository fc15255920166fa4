"""Two DAGs whose tasks return what this provider's operators return (shapes as the example DAGs' runs store
them), for the monitoring API tests: the pages read them from the real metadata DB through the real API server.
Besides results: a failed try's report, a reload sensor's next due time, and a mapped task with the provider's
extra links. ``secret_monitored`` is the DAG the tests' auth manager denies to bob: a cached table b and a lookup
table customers of its own (of other definitions than monitored's), and a Spark job task whose connection does not
exist, which fails before Spark starts."""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

from spark_tables.core.job_result import RESULT_VERSION
from spark_tables.core.xcom_keys import FAILED_TRY, RELOAD_DUE
from spark_tables.operators.links import SparkApplicationLink, SparkJobTabLink
from spark_tables.operators.sql import SparkSqlJobOperator

JOB = {"application_id": "local-1795626744057", "spark_version": "4.2.0", "session_seconds": 1.4, "work_seconds": 1.8}


def of(kind: str) -> dict[str, Any]:
    """The kind and version a job's result names in its XCom (``JobResult.output_fields``)."""
    return {"kind": kind, "version": RESULT_VERSION}


COPY = "file:///cache/monitored/run/b-f32b7e440af5ed59/make_b__-1__1"
DEFINITION = "SELECT k, max(h) AS h FROM a GROUP BY k"
SECRET_COPY = "file:///cache/secret_monitored/run/b-0123456789abcdef/make_b__-1__1"


def _miss(location: str, written: int, seconds: float, definition: str, fingerprint: str) -> dict[str, Any]:
    """A cached table's use by the task that computed it and wrote a copy, as its result says."""
    counts = {"hits": 0, "misses": 1, "fallbacks": 0, "bytes_read": 0, "bytes_written": written}
    where = {"location": location, "definition": definition, "fingerprint": fingerprint}
    return {"status": "miss", **counts, "seconds": seconds, **where}


RESULTS = {
    "snapshot_orders": {
        **of("ctas"),
        "table": "order_snapshot_20261125",
        "atomicity": "table",
        "swept": [],
        "undone_before": [],
        "location": "file:/warehouse/order_snapshot_20261125",
        "format": "parquet",
        "rows": 100000,
        "bytes": 450138,
        "created": True,
        "replaced": False,
        **JOB,
    },
    "make_b": {
        **of("sql"),
        "statements_run": 1,
        "rows": [[20000]],
        "columns": ["keys"],
        **JOB,
        "caches": {"b": _miss(COPY, 1368855, 6.5, DEFINITION, "f32b7e440af5ed59")},
    },
    "read_b": {
        **of("sql"),
        "statements_run": 1,
        "rows": [[2000000]],
        "columns": ["rows"],
        **JOB,
        "caches": {
            "b": {
                "status": "hit",
                "hits": 1,
                "misses": 0,
                "fallbacks": 0,
                "bytes_read": 1368855,
                "bytes_written": 0,
                "seconds": 1.1,
                "location": COPY,
            }
        },
    },
    "enrich_partial": {
        **of("lookup_join"),
        "lookup": "customers",
        "cache": "PARTIAL",
        "rows": 20000,
        "output": "orders_enriched",
        "metrics": {"hitCount": 17800, "missCount": 2200, "loadCount": 2200, "hitRate": 0.89, "latestLoadTime": 8.1},
        **JOB,
    },
    "reload": {
        **of("lookup_reload"),
        "lookup": "customers",
        "snapshot": {
            "version": "v-20261125T171238366365-0b1f79af",
            "rows": 1000,
            "bytes": 11628,
            "started": "2026-11-25T17:12:38+00:00",
            "finished": "2026-11-25T17:12:39+00:00",
            "load_milliseconds": 1414,
            "location": "file:///lookup/customers/v-1",
            "scheduled_for": None,
        },
        "loads": 1,
        "load_failures": 0,
        "loaded": True,
        "attempts": 1,
        "dropped": [],
        "metrics": {"loadCount": 1, "numLoadFailure": 0, "latestLoadTime": 1414},
        **JOB,
    },
    "release_caches": {
        "released": {"b": [COPY]},
        "removed_copies": [
            {
                "name": "b",
                "location": COPY,
                "rows": 20000,
                "bytes": 1368855,
                "partitions": 4,
                "written_by": "make_b",
                "written_at": "2026-11-25T17:11:50+00:00",
            }
        ],
        "swept_runs": [],
        "usage": {},
    },
}
RESULTS["explain"] = {
    **of("plan"),
    "action": "explain",
    "plan_uri": "file:///plans/shop_counts.json",
    "explain": {
        "nodes": [
            {"id": 1, "type": "stream-exec-table-source-scan", "inputs": [], "description": "TableSourceScan(orders)"},
            {
                "id": 2,
                "type": "stream-exec-group-aggregate",
                "inputs": [1],
                "description": "GroupAggregate(shop)",
                "state": [{"index": 0, "name": "groupAggregateState", "ttl": "604800000 ms", "ttl_ms": 604800000}],
            },
            {"id": 3, "type": "stream-exec-sink", "inputs": [2], "description": "Sink(table=[shop_counts])"},
        ],
    },
    **JOB,
}
#: What a CTAS task's failed try leaves (``SparkJobOperator.report_failed_try``): the job's output, the error.
FAILED_CTAS = {
    **of("ctas"),
    "table": "order_totals",
    "atomicity": "table",
    "swept": [],
    "undone_before": [],
    "undone": ["dropped the unfinished order_totals of try 1"],
    "cleaned_up": True,
    **JOB,
    "try_number": 1,
    "error": "[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor being 0",
    "cleanup": None,
}
RELOAD = {"lookup": "customers", "due": "2026-11-25T18:12:38+00:00", "failing": 1}
#: The results of a mapped lookup join's two task instances.
MAPPED = [
    {
        **of("lookup_join"),
        "lookup": "customers",
        "cache": "PARTIAL",
        "rows": 10,
        "metrics": {"hitRate": 0.5},
        **JOB,
        "application_id": "a-0",
    },
    {
        **of("lookup_join"),
        "lookup": "customers",
        "cache": "PARTIAL",
        "rows": 20,
        "metrics": {"hitRate": 0.75},
        **JOB,
        "application_id": "a-1",
        "application_url": "http://history.example:18080/history/a-1/jobs/",
    },
]
SECRET_RESULTS = {
    "enrich_secret": {
        **of("lookup_join"),
        "lookup": "secret_customers",
        "cache": "FULL",
        "rows": 5,
        "metrics": {"hitRate": 1.0},
        **JOB,
    },
    # a cached table b and a lookup table customers of this DAG's own, defined otherwise than monitored's
    "enrich_customers": {
        **of("lookup_join"),
        "lookup": "customers",
        "cache": "FULL",
        "rows": 7,
        "metrics": {"hitRate": 0.25},
        "lookup_definition": "secret.customers on connection secret_crm, key id",
        **JOB,
    },
    "make_b": {
        **of("sql"),
        **JOB,
        "caches": {"b": _miss(SECRET_COPY, 1000, 2.5, "SELECT 1 AS k", "0123456789abcdef")},
    },
}
#: The Spark connection a task of ``secret_monitored`` names, which does not exist: it fails before Spark starts.
MISSING_CONNECTION = "no_such_spark"


class LinkedPython(PythonOperator):
    """A Python task with the provider's extra links, as its Spark job operators have them."""

    operator_extra_links = (SparkJobTabLink(), SparkApplicationLink())

    def execute(self, context: Any) -> Any:
        value = super().execute(context)
        self.application_url = value.get("application_url") if isinstance(value, dict) else None
        return value


def push(key: str, value: dict[str, Any]) -> Any:
    def leave(ti: Any) -> None:
        ti.xcom_push(key=key, value=value)

    return leave


for dag_id, results in (("monitored", RESULTS), ("secret_monitored", SECRET_RESULTS)):
    with DAG(dag_id=dag_id, schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC"), catchup=False):
        previous = None
        for task_id, value in results.items():
            task = PythonOperator(task_id=task_id, python_callable=lambda value=value: value)
            if previous is not None:
                previous >> task
            previous = task
        if dag_id == "monitored":
            failed = PythonOperator(task_id="failed_ctas", python_callable=push(FAILED_TRY, FAILED_CTAS))
            due = PythonOperator(task_id="wait_for_reload", python_callable=push(RELOAD_DUE, RELOAD))
            mapped = LinkedPython.partial(task_id="enrich_mapped", python_callable=lambda value: value).expand(
                op_args=[[value] for value in MAPPED]
            )
            previous >> [failed, due, mapped]
        else:
            SparkSqlJobOperator(task_id="no_connection", sql="SELECT 1", conn_id=MISSING_CONNECTION)
