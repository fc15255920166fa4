"""The closing summary of scripts/demo.sh, a block per capability: what ran, the key figures it found (from the
tasks' XComs in the last run of each example DAG, and the tables' files: parquet, and for a Delta table its log and
the data files its commits left current), and where to look.

Usage: python scripts/demo_summary.py DS LOOKUP_LEFT_OUT LOOKUP_DATABASE CTAS_DAYS, with AIRFLOW_HOME set
(scripts/setup.sh); LOOKUP_LEFT_OUT is empty when example_spark_lookup, example_spark_plan and
example_spark_buffered_output (which need PostgreSQL) ran, else why they did not; CTAS_DAYS are the days the CTAS
example ran for, oldest first.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pandas as pd
import psycopg
from confluent_kafka import Consumer, TopicPartition

from spark_tables.core.table_format.delta_log import LOG, parse_commit

HOME = os.environ["AIRFLOW_HOME"]
#: How example_spark_buffered_output writes its three tables.
WAYS = ("unbuffered", "buffered", "memory_buffered")
WAREHOUSE = f"{HOME}/spark_tables/warehouse"
#: The compacted topic example_spark_buffered_output's fifth task sends to.
TOPIC = "spark_tables_demo.page_views_per_slot"


def xcoms(dag_id: str, mode: str | None = None) -> dict[str, Any]:
    """The return values of the DAG's last run (in ``mode``, ``per-job`` or ``session``, if given), by task."""
    with sqlite3.connect(f"{HOME}/airflow.db") as db:
        for (run_id,) in db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC", (dag_id,)):
            rows = db.execute(
                "SELECT task_id, value FROM xcom WHERE dag_id = ? AND run_id = ? AND key = 'return_value'",
                (dag_id, run_id),
            ).fetchall()
            found = {task: json.loads(value) for task, value in rows}
            if mode is None or any(isinstance(v, dict) and v.get("mode") == mode for v in found.values()):
                return found
    raise SystemExit(f"error: no run of {dag_id} in {mode} mode")


def task_seconds(dag_id: str, mode: str) -> dict[str, float]:
    """How long each task of the DAG's last run in ``mode`` took, start to end."""
    with sqlite3.connect(f"{HOME}/airflow.db") as db:
        for (run_id,) in db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC", (dag_id,)):
            modes = {
                json.loads(value).get("mode")
                for (value,) in db.execute(
                    "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND key = 'return_value'", (dag_id, run_id)
                )
                if value.startswith("{")
            }
            if mode in modes:
                rows = db.execute(
                    "SELECT task_id, (julianday(end_date) - julianday(start_date)) * 86400 FROM task_instance "
                    "WHERE dag_id = ? AND run_id = ?",
                    (dag_id, run_id),
                ).fetchall()
                return {task: seconds for task, seconds in rows}
    raise SystemExit(f"error: no run of {dag_id} in {mode} mode")


def delta_log(location: str) -> list[tuple[int, list[dict[str, Any]]]]:
    """A Delta table's commits as its log holds them, oldest first: each one's version and actions (Delta's protocol:
    ``_delta_log/<version>.json``, a JSON action a line)."""
    commits = sorted(Path(location.removeprefix("file:"), LOG).glob("[0-9]" * 20 + ".json"))
    return [
        (int(path.stem), [json.loads(line) for line in path.read_text().splitlines() if line.strip()])
        for path in commits
    ]


def delta_rows(location: str) -> pd.DataFrame:
    """A Delta table's current rows (unpartitioned): the data files its commits added and did not remove since."""
    current: dict[str, None] = {}
    for _, actions in delta_log(location):
        for action in actions:
            if "add" in action:
                current[action["add"]["path"]] = None
            elif "remove" in action:
                current.pop(action["remove"]["path"], None)
    folder = Path(location.removeprefix("file:"))
    frames = [pd.read_parquet(folder / unquote(path)) for path in current]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def delta_history(location: str) -> list[str]:
    """A Delta table's versions, newest first: the operation and the rows each wrote (its commit's metrics)."""
    lines = []
    for version, actions in reversed(delta_log(location)):
        made = parse_commit(version, "\n".join(json.dumps(action) for action in actions))
        rows = made.count("numOutputRows")
        lines.append(f"      version {version}  {made.operation}" + (f", {rows:,} rows" if rows is not None else ""))
    return lines


def created(ctas: dict[str, Any]) -> str:
    """What a CTAS task did: created its table, or found it there (IF NOT EXISTS on a rerun: no job ran)."""
    if ctas["created"]:
        return f"created {ctas['table']} ({ctas['rows']:,} rows, {ctas['bytes']:,} bytes)"
    return f"found {ctas['table']} there from an earlier run (IF NOT EXISTS: its job did not run)"


def table(frame: pd.DataFrame) -> list[str]:
    return ["      " + line for line in frame.to_string(index=False).splitlines()]


def sql_jobs(ds: str) -> list[str]:
    x = xcoms("example_spark_sql")
    totals = pd.read_parquet(f"{WAREHOUSE}/demo.db/daily_totals/ds={ds}").sort_values("customer")
    return [
        "SQL jobs (example_spark_sql)",
        f"  ran:   load_orders wrote {x['load_orders']['row_counts']['demo.orders']:,} orders into demo.orders, "
        f"partition ds={ds};",
        f"         summarise totalled them per customer into demo.daily_totals ({len(totals)} rows, read back):",
        *table(totals),
        f"  look:  {WAREHOUSE}/demo.db/orders/ and .../daily_totals/ (parquet, a folder per ds);",
        "         summarise's XCom 'rows' (the same totals)",
    ]


def ctas(days: list[str]) -> list[str]:
    x = xcoms("example_spark_ctas")
    snapshot, published = x["snapshot_orders"], x["publish_customer_totals"]
    customers = delta_rows(published["location"]).sort_values("customer")
    return [
        f"CTAS (example_spark_ctas, for {' and '.join(days)})",
        f"  ran:   snapshot_orders {created(snapshot)} (parquet);",
        "         partitioned by region; atomicity table: a failed job would have dropped it with its files;",
        f"         publish_customer_totals {'replaced' if published['replaced'] else 'created'} the Delta table "
        f"customer_totals ({published['rows']:,} rows, {published['files']} file(s))",
        f"         in one commit, version {published['version']} (atomicity commit: readers see the version before "
        "until then); its history,",
        "         each day's totals a version of its own (SELECT ... VERSION AS OF n reads an old one):",
        *delta_history(published["location"]),
        "         the current version, read back:",
        *table(customers),
        f"  look:  {WAREHOUSE}/{snapshot['table']}/ and .../customer_totals/ (its _delta_log/);",
        "         who owns them: their spark_tables.ctas.* table properties;",
        "         each task's XCom (rows, bytes; the Delta table's committed_version)",
    ]


def cached_tables() -> list[str]:
    x = xcoms("example_spark_cache", "per-job")
    uses = {task: x[task]["caches"]["b"] for task in ("max_b", "min_b", "normalise_b", "count_b")}
    computed = ", ".join(task for task, b in uses.items() if b["status"] == "miss") or "no task"
    read = ", ".join(task for task, b in uses.items() if b["status"] == "hit") or "no task"
    usage = x["release_caches"]["usage"]["b"]
    released = len(x["release_caches"]["released"].get("b", []))
    keys, rows = x["count_b"]["rows"][0]
    return [
        "Cached tables (example_spark_cache)",
        f"  ran:   make_a {created(x['make_a'])};",
        f"         cached table b ({rows:,} rows hashed, grouped to {keys:,} keys): computed by {computed},",
        f"         read from its copy by {read} (count_b declares b in SQL: the same cache);",
        f"         release_caches deleted {released} copy of b at the run's end. Spark work per task, and b in it:",
        *(
            f"      {task:12} {b['status']:5} work {x[task]['work_seconds']:5.1f} s  "
            f"read {b['bytes_read']:>10,} B  written {b['bytes_written']:>10,} B"
            for task, b in uses.items()
        ),
        f"      the run's usage of b: hits {usage['hits']}, misses {usage['misses']}, fallbacks {usage['fallbacks']}",
        *in_both_modes(),
        "  look:  each task's XCom 'caches' and release_caches' XCom 'usage';",
        f"         the copy lived under {HOME}/spark_tables/cache/ until release_caches",
    ]


CONSUMERS = ("max_b", "min_b", "normalise_b", "count_b")


def in_both_modes() -> list[str]:
    """The cache example's run in session mode, against its run through spark-submit: whole tasks."""
    session, per_job = task_seconds("example_spark_cache", "session"), task_seconds("example_spark_cache", "per-job")
    uses = [x["caches"]["b"] for task, x in xcoms("example_spark_cache", "session").items() if task in CONSUMERS]
    [kept] = [b["location"] for b in uses if b["status"] == "miss"]
    totals = [sum(seconds[task] for task in CONSUMERS) for seconds in (per_job, session)]
    return [
        "         again in session mode, on a Spark Connect server started for the demo, b kept in its memory",
        f"         ({kept.split('/', 1)[1]}); each task start to end, per-job against session mode:",
        *(f"      {task:12} {per_job[task]:6.1f} s  {session[task]:6.1f} s" for task in CONSUMERS),
        f"      {'the four':12} {totals[0]:6.1f} s  {totals[1]:6.1f} s (docs/session-mode.md)",
    ]


def lookup_joins(left_out: str, database: str) -> list[str]:
    if left_out:
        return ["Lookup joins (example_spark_lookup)", f"  not run: {left_out}"]
    x = xcoms("example_spark_lookup")
    loaded = x["reload"]["snapshot"]
    enriched = {
        cache: pd.read_parquet(f"{WAREHOUSE}/orders_enriched_{cache}").sort_values("order_id", ignore_index=True)
        for cache in ("none", "partial", "full")
    }
    same = all(enriched["none"].equals(frame) for frame in enriched.values())
    unmatched = int(enriched["none"]["name"].isna().sum())
    none, partial, full = (x[f"enrich_{cache}"]["metrics"] for cache in ("none", "partial", "full"))
    return [
        "Lookup joins (example_spark_lookup)",
        "  ran:   seed_customers filled the dimension table spark_tables_demo.customers in PostgreSQL",
        f"         ({database}); wait_for_reload found its full cache's reload due;",
        f"         reload loaded the table into snapshot {loaded['version']} ({loaded['rows']:,} rows, "
        f"{loaded['bytes']:,} bytes, {loaded['load_milliseconds']:,} ms);",
        f"         enrich_none, enrich_partial and enrich_full joined the same {x['enrich_none']['rows']:,} orders "
        "with it:",
        f"      NONE     {none['loadCount']:>6,} queries, one per order",
        f"      PARTIAL  {partial['loadCount']:>6,} queries (misses), "
        f"{partial['hitCount']:,} hits in the workers' caches",
        f"      FULL     {full['loadCount']:>6,} load (the snapshot, {full['numCachedRecords']:,} rows), "
        f"{full['hitCount']:,} hits ({full['unmatchedCount']:,} of keys it lacks), no query per order",
        f"      the three tables are {'identical' if same else 'NOT identical'}: {len(enriched['none']):,} rows, "
        f"{unmatched:,} of them of customers the table lacks (left join)",
        *delta_lookup(x),
        "  look:  each enrich_* task's XCom 'metrics' (the FLIP-221 metrics);",
        f"         {WAREHOUSE}/orders_enriched_none/, _partial/, _full/, orders_discounted/;",
        f"         the full caches' snapshots: {HOME}/spark_tables/lookup/demo_customers-*/, demo_segments-*/",
    ]


def delta_lookup(x: dict[str, Any]) -> list[str]:
    """The lookup of the Delta dimension table: the version its snapshot holds, the join, the unchanged reload."""
    loaded, checked, joined = x["reload_segments"], x["check_segments"], x["enrich_segments"]
    held = loaded["snapshot"]["table_version"]
    discounted = pd.read_parquet(f"{WAREHOUSE}/orders_discounted")
    return [
        "         a Delta dimension table, lookup_demo.segments (each segment's discount), through its full cache:",
        f"      review_segments merged the discounts anew: version {held['number']} of the table;",
        f"      reload_segments {'copied' if loaded['loaded'] else 'kept'} version {held['number']} into snapshot "
        f"{loaded['snapshot']['version']} ({loaded['snapshot']['rows']} rows), which records it;",
        f"      enrich_segments joined {joined['rows']:,} enriched orders with the snapshot of version "
        f"{joined['table_version']['number']} ({int(discounted['discount'].notna().sum()):,} with a discount);",
        f"      check_segments found the table still at version {checked['snapshot']['table_version']['number']}: "
        f"{'nothing to load, no Spark job' if checked['unchanged'] else 'it loaded again'}",
    ]


def compiled_plans(left_out: str, database: str) -> list[str]:
    if left_out:
        return ["Compiled plans (example_spark_plan)", f"  not run: {left_out}"]
    x = xcoms("example_spark_plan")
    compiled, explained = x["compile"]["compile"], x["explain"]["explain"]
    queries = x["execute"]["execute"]["queries"]
    order_customers = len(delta_rows(f"{WAREHOUSE}/plan_demo.db/order_customers"))
    width = max(len(query["sink"]) for query in queries)
    return [
        "Compiled plans (example_spark_plan)",
        "  ran:   add_orders added 200 orders (20 of them sent twice) and 30 customers to the stream tables;",
        f"         compile {'wrote' if compiled['written'] else 'kept (IF NOT EXISTS)'} the plan "
        f"{x['explain']['plan_uri']};",
        "         shorten_deduplication edited the deduplication's TTL in it, as a person would;",
        "         explain checked it against the catalog; its operators, what runs each, and their state TTLs:",
        *(
            f"      [{node['id']}] {node['type']:<28} on {node['implementation']:<21} "
            + ", ".join(f"{state['name']} {state['ttl']}" for state in node["state"])
            for node in explained["nodes"]
            if "state" in node
        ),
        *(f"      warning: {warning}" for warning in explained["warnings"]),
        "         execute ran each sink's query over what the tables got since the last run:",
        *(
            f"      {query['sink']:<{width}} {query['input_rows']:>5,} rows in, {query['rows_upserted']:>4,} upserted, "
            f"{query['rows_deleted']:>3,} deleted, in {query['write_calls']} write call(s)"
            for query in queries
        ),
        "         (the left join on Spark's join sends an order without a customer once its 1 h TTL has passed)",
        f"      plan_demo.order_customers, the Delta table its orders are merged into: {order_customers:,} rows",
        "  look:  the plan file (JSON, edit its TTLs); explain's XCom 'explain' (the graph, for the UI);",
        f"         spark_tables_demo.shop_counts in PostgreSQL ({database});",
        f"         {WAREHOUSE}/plan_demo.db/order_customers/ (Delta);",
        f"         the checkpoints under {HOME}/spark_tables/checkpoints/",
    ]


def postgres_rows(query: str) -> list[tuple]:
    """Rows of ``query`` in the buffered output example's database (its connection, set by demo.sh)."""
    uri = os.environ["AIRFLOW_CONN_SPARK_TABLES_BUFFERED_DEMO"].replace("postgres://", "postgresql://", 1)
    with psycopg.connect(uri) as connection:
        return connection.execute(query).fetchall()


def local_time(text: str) -> datetime:
    """An ISO time with its offset (as Spark's JSON writes one) as the machine's local time, as the JDBC writer
    stores a TIMESTAMP in PostgreSQL's ``timestamp``: both from the driver's time zone, the machine's."""
    return datetime.fromisoformat(text).astimezone().replace(tzinfo=None)


def latest_messages(topic: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The latest value of each key ``topic`` holds, by (page, window start): read on the broker of the buffered
    output example's Kafka connection (set by demo.sh)."""
    extra = json.loads(os.environ["AIRFLOW_CONN_SPARK_TABLES_BUFFERED_KAFKA"])["extra"]
    consumer = Consumer({**extra, "group.id": f"demo-summary-{os.getpid()}", "enable.auto.commit": False})
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        for partition in consumer.list_topics(topic, timeout=30).topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            consumer.assign([TopicPartition(topic, partition, low)])
            offset = low
            while offset < high:
                message = consumer.poll(30)
                if message is None or message.error():
                    problem = message.error() if message else "no message"
                    raise SystemExit(f"error: reading {topic}[{partition}] at offset {offset}: {problem}")
                key = json.loads(message.key())
                latest[(key["page"], key["slot_start"])] = json.loads(message.value())
                offset = message.offset() + 1
    finally:
        consumer.close()
    return latest


def buffered_output(left_out: str, database: str) -> list[str]:
    if left_out:
        return ["Buffered output (example_spark_buffered_output)", f"  not run: {left_out}"]
    x = xcoms("example_spark_buffered_output")
    lines = [
        "Buffered output (example_spark_buffered_output)",
        "  ran:   add_page_views added 2,000 page views in 8 files; the same aggregation (views per page and",
        "         2-minute window) read them one file a micro-batch into four tables, three in PostgreSQL:",
    ]
    for way in WAYS:
        task_id = f"views_{way}"
        query = x[task_id]["query"]
        buffer = query.get("buffer")
        flushes = ", ".join(f"{cause} {count}" for cause, count in buffer["flushes"].items() if count) if buffer else ""
        lines.append(
            f"      {task_id:<22} {(buffer or query)['records_in' if buffer else 'input_rows']:>5,} views in, "
            f"{query['batches']} batches, "
            f"{query['rows_upserted']:>4,} rows upserted in {query['write_calls']} write call(s)"
            + (f"; flushes: {flushes}" if buffer else "")
        )
    delta = x["views_buffered_delta"]["query"]
    lines += [
        "         and one a Delta table, buffered: what the buffer saves there is commits and files",
        f"      views_buffered_delta   {delta['batches']} batches, {delta['rows_upserted']:>4,} rows merged in "
        f"{delta['write_calls']} commit(s), {delta['files_written']} file(s) written (unbuffered: a commit a batch)",
    ]
    kafka = x["views_buffered_kafka"]["query"]
    lines += [
        "         and a compacted Kafka topic, buffered: a flush sends one message a key (unbuffered: one a change)",
        f"      views_buffered_kafka   {kafka['batches']} batches, {kafka['messages_sent']:>4,} messages sent in "
        f"{kafka['write_calls']} write call(s) to {TOPIC}",
    ]
    tables = [postgres_rows(f"SELECT * FROM spark_tables_demo.page_views_{way} ORDER BY 1, 2") for way in WAYS]
    in_delta = delta_rows(f"{WAREHOUSE}/buffered_demo.db/page_views_per_slot")
    counted = sorted(in_delta[["page", "views", "visitors"]].itertuples(index=False, name=None))
    same = all(table == tables[0] for table in tables) and counted == sorted((r[0], r[3], r[4]) for r in tables[0])
    lines.append(f"      the four tables are {'identical' if same else 'NOT identical'}: {len(tables[0]):,} rows")
    in_topic = latest_messages(TOPIC)
    by_key = {(page, start): (views, visitors) for page, start, _end, views, visitors in tables[0]}
    agree = all(
        by_key.get((page, local_time(start))) == (sent["views"], sent["visitors"])
        for (page, start), sent in in_topic.items()
    )
    lines.append(
        f"      the topic's latest message of each of its {len(in_topic):,} keys "
        + ("equals the tables' row" if agree else "does NOT equal the tables' row")
    )
    return [
        *lines,
        "  look:  each views_* task's XCom 'query' (and its log line 'sink ...: ... record(s) in');",
        f"         spark_tables_demo.page_views_unbuffered, _buffered, _memory_buffered in PostgreSQL ({database});",
        f"         {WAREHOUSE}/buffered_demo.db/page_views_per_slot/ (Delta);",
        f"         the topic {TOPIC} (on the broker the demo starts, and stops at its end);",
        f"         the checkpoints under {HOME}/spark_tables/checkpoints/aggregations/example_spark_buffered_output__*",
    ]


def main(ds: str, lookup_left_out: str, lookup_database: str, ctas_days: str) -> None:
    blocks = [
        sql_jobs(ds),
        ctas(ctas_days.split()),
        cached_tables(),
        lookup_joins(lookup_left_out, lookup_database),
        compiled_plans(lookup_left_out, lookup_database),
        buffered_output(lookup_left_out, lookup_database),
    ]
    blocks.append(
        [
            "Everything",
            f"  the embedded Derby metastore:  {HOME}/spark_tables/metastore_db",
            f"  each DAG's whole run log:      {HOME}/demo-<dag_id>.log (its tasks' logs and the Spark drivers')",
            "  the Airflow UI (runs, XComs):  bash scripts/airflow.sh standalone  # http://localhost:8080, user admin,",
            "    password in .airflow/simple_auth_manager_passwords.json.generated; Ctrl-C stops it (docs/running.md)",
            "    each run's tab 'Spark tables', each task's 'Spark job', the page 'Spark tables' (docs/monitoring.md)",
        ]
    )
    print(f"\nSummary for {ds}, capability by capability (tables: {WAREHOUSE}/)")
    for block in blocks:
        print("\n" + "\n".join(block))


if __name__ == "__main__":
    main(*sys.argv[1:5])
