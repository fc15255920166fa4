"""The ctas job on a real session: what the catalog holds and what lies on disk after success, failure, retry
and cancellation, at both atomicity levels."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.ctas.job import CtasCleanupJob, CtasJob
from spark_tables.core.ctas.ownership import (
    COMPLETE,
    FILLING,
    LOCATION,
    LOCATION_CLAIM,
    PREFIX,
    REPLACED,
    STATE,
    TARGET,
    TableOwner,
    replaced_table,
    staging_table,
)
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.jobs import files as files_module
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.ctas import lifecycle as ctas_jobs
from spark_tables.jobs.ctas.lifecycle import run_ctas_cleanup, undo_unfinished
from spark_tables.jobs.table_format import catalog as catalog_tables
from spark_tables.jobs.table_format import file_tables, location_claims
from spark_tables.tasks.sql_reader import read_ctas
from tests.spark.catalog_checks import (
    FAILING_QUERY,
    SLOW_QUERY,
    data_files,
    db_folder,
    details,
    files,
    local,
    marks,
    no_task_running,
    owner,
    plain_table,
    props,
    rows,
    run,
    sql_properties,
    table_location,
    tables,
    wait_until,
)

pytestmark = pytest.mark.spark

ATOMICITIES = ("table", "staging")


def parse_ctas(statement: str) -> dict[str, Any]:
    """The CTAS job fields the SQL reader reads from a statement, as ``SparkCtasOperator`` takes them."""
    return read_ctas(statement).job_fields()


# --- helpers -------------------------------------------------------------------------------------------------


def ctas(table: str, try_number: int = 1, **fields: Any) -> CtasJob:
    fields.setdefault("query", "SELECT id, CAST(id * 10 AS STRING) AS s FROM range(5)")
    return CtasJob(table=table, owner=owner(try_number), **fields)


# --- success -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_creates_a_partitioned_table_with_its_rows_properties_and_marks(
    spark: SparkSession, db: str, atomicity: str
) -> None:
    table = f"{db}.events"
    query = "SELECT CAST(id % 3 AS INT) AS day, id, concat('e', id) AS name FROM range(12)"
    result = run(
        spark,
        ctas(
            table,
            query=query,
            partitioned_by=["day"],  # the first column of the query: the table puts it last
            properties={"team": "it's \\ data", "purpose": "tests"},
            comment="made by a test",
            atomicity=atomicity,
        ),
    )

    assert result.succeeded, result.error
    output = result.output.to_dict()
    assert output["table"] == table and output["atomicity"] == atomicity
    assert output["created"] is True and output["replaced"] is False
    assert output["undone_before"] == []
    assert output["format"] == "parquet"
    assert output["rows"] == 12 and output["bytes"] > 0
    location = table_location(spark, table)
    assert local(output["location"]) == location == os.path.join(db_folder(spark, db), "events")

    assert spark.table(table).columns == ["id", "name", "day"]
    assert rows(spark, f"SELECT id, name, day FROM {table}") == rows(spark, f"SELECT id, name, day FROM ({query})")
    assert rows(spark, f"SELECT day, count(*) FROM {table} GROUP BY day") == [(0, 4), (1, 4), (2, 4)]
    assert [r[0] for r in spark.sql(f"SHOW PARTITIONS {table}").collect()] == ["day=0", "day=1", "day=2"]

    properties = props(spark, table)
    assert properties["team"] == "it's \\ data" and properties["purpose"] == "tests"
    assert details(spark, table)["Comment"] == "made by a test"
    expected = {**owner(1).properties(COMPLETE)}
    if atomicity == "staging":
        expected[TARGET] = table
    assert marks(spark, table) == expected

    assert tables(spark, db) == ["events"]  # no staging table left
    assert os.listdir(db_folder(spark, db)) == ["events"]
    on_disk = data_files(location)
    assert on_disk and {p.split("/")[0] for p in on_disk} == {"day=0", "day=1", "day=2"}


def test_a_statement_parsed_by_parse_ctas_runs_as_written(spark: SparkSession, db: str) -> None:
    fields = parse_ctas(
        f"CREATE TABLE IF NOT EXISTS {db}.parsed USING parquet PARTITIONED BY (kind) "
        "TBLPROPERTIES ('source' = 'parse_ctas') AS SELECT id % 2 AS kind, id FROM range(6)"
    )
    result = run(spark, CtasJob(owner=owner(), **fields))
    assert result.succeeded, result.error
    assert result.output.rows == 6
    assert spark.table(f"{db}.parsed").columns == ["id", "kind"]
    assert props(spark, f"{db}.parsed")["source"] == "parse_ctas"
    assert marks(spark, f"{db}.parsed")[STATE] == COMPLETE


@pytest.fixture
def producer_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = "ctas_test_producers"
    (tmp_path / f"{name}.py").write_text(
        "def squares(spark):\n"
        "    return spark.range(4).selectExpr('id', 'id * id AS square')\n"
        "\n"
        "def not_a_frame(spark):\n"
        "    return [1, 2, 3]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_a_producer_function_gives_the_rows(spark: SparkSession, db: str, producer_module: str, atomicity: str) -> None:
    result = run(spark, ctas(f"{db}.squares", query=None, producer=f"{producer_module}:squares", atomicity=atomicity))
    assert result.succeeded, result.error
    assert result.output.rows == 4 and result.output.bytes > 0
    assert rows(spark, f"{db}.squares") == [(0, 0), (1, 1), (2, 4), (3, 9)]
    assert tables(spark, db) == ["squares"]


def test_a_delta_table_on_a_session_that_does_not_load_delta_fails_in_one_line_before_anything_is_made(
    spark: SparkSession, db: str
) -> None:
    """As on a Spark Connect server started without Delta: the per-job check is the hook's, before its submit."""
    result = run(spark, ctas(f"{db}.lake", format="delta"))

    assert result.error == (
        "table format delta is not loaded in this Spark session: add delta to the catalog connection's extra "
        '"table-formats", which gives Spark io.delta:delta-spark_4.2_2.13:4.4.0, io.delta:delta-storage:4.4.0 and '
        "Delta's session catalog (docs/table-formats.md)"
    )
    assert tables(spark, db) == []


@pytest.mark.parametrize(
    ("function", "error"),
    [
        ("missing", "producer ctas_test_producers:missing cannot be imported"),
        ("not_a_frame", "producer ctas_test_producers:not_a_frame returned list, not a DataFrame"),
    ],
)
def test_a_producer_that_gives_no_dataframe_fails_with_nothing_created(
    spark: SparkSession, db: str, producer_module: str, function: str, error: str
) -> None:
    result = run(spark, ctas(f"{db}.squares", query=None, producer=f"{producer_module}:{function}"))
    assert not result.succeeded
    assert result.error.startswith(error)
    assert tables(spark, db) == [] and os.listdir(db_folder(spark, db)) == []


@pytest.mark.parametrize(("atomicity", "folder_exists"), [("table", False), ("staging", True)])
def test_an_explicit_empty_location_holds_the_table(
    spark: SparkSession, db: str, tmp_path: Path, atomicity: str, folder_exists: bool
) -> None:
    folder = tmp_path / "external"
    if folder_exists:
        folder.mkdir()
    result = run(spark, ctas(f"{db}.outside", location=str(folder), atomicity=atomicity))
    assert result.succeeded, result.error
    assert local(result.output.location) == table_location(spark, f"{db}.outside") == str(folder)
    assert details(spark, f"{db}.outside")["Type"] == "EXTERNAL"
    assert rows(spark, f"{db}.outside") == [(i, str(i * 10)) for i in range(5)]
    assert data_files(str(folder))
    assert tables(spark, db) == ["outside"]
    assert os.listdir(db_folder(spark, db)) == []  # nothing in the warehouse, staging or otherwise


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_a_non_empty_location_is_refused_before_anything_is_created(
    spark: SparkSession, db: str, tmp_path: Path, atomicity: str
) -> None:
    folder = tmp_path / "taken"
    folder.mkdir()
    (folder / "keep.txt").write_text("someone else's")
    before = files(str(folder))

    result = run(spark, ctas(f"{db}.outside", location=str(folder), atomicity=atomicity))

    assert not result.succeeded
    assert result.error.startswith(f"location {folder} is not empty")
    assert result.output.undone == []
    assert tables(spark, db) == [] and os.listdir(db_folder(spark, db)) == []
    assert files(str(folder)) == before
    assert (folder / "keep.txt").read_text() == "someone else's"


def test_a_location_holding_only_a_hidden_file_is_refused(spark: SparkSession, db: str, tmp_path: Path) -> None:
    """Any file counts, Spark's hidden ones too: another writer's ``_SUCCESS`` says the folder is theirs."""
    folder = tmp_path / "written"
    folder.mkdir()
    (folder / "_SUCCESS").write_text("")
    result = run(spark, ctas(f"{db}.outside", location=str(folder)))
    assert result.error.startswith(f"location {folder} is not empty")
    assert os.listdir(folder) == ["_SUCCESS"] and tables(spark, db) == []


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_a_location_another_task_claimed_is_refused_and_its_claim_kept(
    spark: SparkSession, db: str, tmp_path: Path, atomicity: str
) -> None:
    """Two CTAS into one LOCATION: the one that claims it first writes there; the other fails in one line and
    removes nothing, though the folder still looks empty but for the claim."""
    folder = tmp_path / "contested"
    rival = owner(task_id="other_table")
    location_claims.claim_location(str(folder), TableIdentifier.parse(f"{db}.theirs"), rival)
    claim = (folder / LOCATION_CLAIM).read_text()

    result = run(spark, ctas(f"{db}.mine", location=str(folder), atomicity=atomicity))

    assert result.error == (
        f"location {folder} is claimed by task tables.other_table of run scheduled__2026-11-20: CTAS writes only to "
        "a location no other task holds; choose another (if that task has ended, remove its claim "
        f"{folder}/{LOCATION_CLAIM} to free the location)"
    )
    assert result.output.undone == [] and tables(spark, db) == []
    assert os.listdir(folder) == [LOCATION_CLAIM] and (folder / LOCATION_CLAIM).read_text() == claim


def test_a_claim_made_meanwhile_by_another_task_is_refused(
    spark: SparkSession, db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim file is created exclusively: a rival's claim between this job's look and its own claim wins."""
    folder = tmp_path / "raced"
    rival = owner(task_id="other_table")
    list_names = files_module.list_names

    def rival_claims_after_the_look(location: str) -> list[str]:
        names = list_names(location)
        monkeypatch.setattr(files_module, "list_names", list_names)  # the rival looks unhindered
        location_claims.claim_location(str(folder), TableIdentifier.parse(f"{db}.theirs"), rival)
        return names

    folder.mkdir()
    monkeypatch.setattr(files_module, "list_names", rival_claims_after_the_look)
    result = run(spark, ctas(f"{db}.mine", location=str(folder)))

    assert result.error == (
        f"location {folder} was claimed meanwhile by task tables.other_table of run scheduled__2026-11-20: "
        "choose another"
    )
    assert location_claims.location_claimant(str(folder)) == rival.task() and tables(spark, db) == []


def test_a_claim_an_earlier_try_left_is_taken_over(spark: SparkSession, db: str, tmp_path: Path) -> None:
    folder = tmp_path / "retried"
    location_claims.claim_location(str(folder), TableIdentifier.parse(f"{db}.outside"), owner(1))
    result = run(spark, ctas(f"{db}.outside", try_number=2, location=str(folder)))
    assert result.succeeded, result.error
    assert rows(spark, f"{db}.outside") == [(i, str(i * 10)) for i in range(5)]
    assert marks(spark, f"{db}.outside")[LOCATION] == str(folder)


def test_a_name_taken_at_creation_releases_the_location_claim(
    spark: SparkSession, db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "free_again"
    create = file_tables._create

    def rival_first(spark: SparkSession, name: TableIdentifier, *args: Any) -> None:
        _rival_takes(spark, name.quoted())
        create(spark, name, *args)

    monkeypatch.setattr(file_tables, "_create", rival_first)
    result = run(spark, ctas(f"{db}.contested", atomicity="table", location=str(folder)))

    assert result.error.startswith(f"table {db}.contested was created meanwhile by another task")
    assert not (folder / LOCATION_CLAIM).exists()


def test_a_location_spark_resolves_elsewhere_is_refused_before_the_rows_are_written(
    spark: SparkSession, db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path without a scheme is resolved by Hadoop's default file system (HDFS on many clusters), not where the
    claim went: the table is dropped unfilled, nothing removed there, and the claim released."""
    folder = tmp_path / "elsewhere"
    describe = file_tables.describe

    def on_hdfs(spark: SparkSession, table: TableIdentifier) -> dict[str, Any]:
        return {**describe(spark, table), "location": f"hdfs://namenode:8020{folder}"}

    monkeypatch.setattr(file_tables, "describe", on_hdfs)
    result = run(spark, ctas(f"{db}.outside", location=str(folder)))

    assert result.error.startswith(
        f"location {folder} is hdfs://namenode:8020{folder} to Spark (Hadoop's default file system): give it as that "
        "full URI"
    )
    assert tables(spark, db) == [] and not (folder / LOCATION_CLAIM).exists()


def test_a_replaced_external_table_keeps_its_files(spark: SparkSession, db: str, tmp_path: Path) -> None:
    """REPLACE of a table declared over a folder another system wrote: the entry goes as Spark's DROP TABLE drops
    it, the folder's files stay, and the output says where."""
    folder = tmp_path / "their_lake"
    spark.sql("SELECT id, 'theirs' AS s FROM range(3)").write.parquet(str(folder))
    spark.sql(f"CREATE TABLE {db}.lake USING parquet LOCATION '{folder}'")
    before = files(str(folder))

    result = run(spark, ctas(f"{db}.lake", replace=True))

    assert result.succeeded, result.error
    assert result.output.replaced is True and result.output.kept_files == f"file:{folder}"
    assert rows(spark, f"{db}.lake") == [(i, str(i * 10)) for i in range(5)]
    assert files(str(folder)) == before
    assert tables(spark, db) == ["lake"]


def test_a_retry_drops_the_replaced_external_table_a_finished_swap_left_and_keeps_its_files(
    spark: SparkSession, db: str, tmp_path: Path
) -> None:
    folder = tmp_path / "their_lake"
    spark.sql("SELECT id FROM range(3)").write.parquet(str(folder))
    target = TableIdentifier.parse(f"{db}.lake")
    replaced = replaced_table(target, owner())
    spark.sql(f"CREATE TABLE {replaced.quoted()} USING parquet LOCATION '{folder}'")
    plain_table(spark, str(target), "SELECT 1 AS id", {**owner().properties(COMPLETE), REPLACED: str(replaced)})
    before = files(str(folder))

    assert undo_unfinished(spark, target, owner(2)) == [f"dropped {replaced}, which {target} replaced"]
    assert tables(spark, db) == ["lake"] and files(str(folder)) == before


def test_cleanup_keeps_the_files_of_a_location_the_task_did_not_claim(
    spark: SparkSession, db: str, tmp_path: Path
) -> None:
    """A table with this task's marks whose folder the task never claimed (its LOCATION changed since, or never
    marked): the entry is dropped, the files stay."""
    folder = tmp_path / "someone_elses"
    spark.sql("SELECT id FROM range(3)").write.parquet(str(folder))
    target = TableIdentifier.parse(f"{db}.half")
    marked = sql_properties(owner().properties(FILLING))
    spark.sql(f"CREATE TABLE {target.quoted()} USING parquet LOCATION '{folder}' TBLPROPERTIES ({marked})")
    before = files(str(folder))

    assert undo_unfinished(spark, target, owner(2)) == [f"dropped the unfinished {target} of try 1"]
    assert tables(spark, db) == [] and files(str(folder)) == before


@pytest.mark.parametrize(
    ("partitioned_by", "error"),
    [
        (["nope"], "partition column(s) ['nope'] are not in the query's columns"),
        (["id", "s"], "every column is a partition column"),
    ],
)
def test_impossible_partitioning_fails_with_nothing_created(
    spark: SparkSession, db: str, partitioned_by: list[str], error: str
) -> None:
    result = run(spark, ctas(f"{db}.parts", partitioned_by=partitioned_by))
    assert not result.succeeded
    assert result.error.startswith(error)
    assert tables(spark, db) == [] and os.listdir(db_folder(spark, db)) == []


def test_a_column_name_with_a_backtick_is_written(spark: SparkSession, db: str) -> None:
    result = run(spark, ctas(f"{db}.odd", query="SELECT 1 AS `a``b`, 2 AS c"))
    assert result.succeeded, result.error
    assert spark.table(f"{db}.odd").columns == ["a`b", "c"]


# --- an existing table ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_an_existing_table_is_left_alone_without_if_not_exists(spark: SparkSession, db: str, atomicity: str) -> None:
    plain_table(spark, f"{db}.taken", "SELECT id, 'old' AS s FROM range(3)")
    location = table_location(spark, f"{db}.taken")
    before = files(location)

    result = run(spark, ctas(f"{db}.taken", atomicity=atomicity))

    assert not result.succeeded
    assert result.error.startswith(f"table {db}.taken already exists, and this task did not create it")
    assert result.output.cleaned_up is True and result.output.undone == []
    assert rows(spark, f"{db}.taken") == [(0, "old"), (1, "old"), (2, "old")]
    assert marks(spark, f"{db}.taken") == {}
    assert tables(spark, db) == ["taken"] and files(location) == before


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_an_existing_table_skips_the_job_with_if_not_exists(spark: SparkSession, db: str, atomicity: str) -> None:
    plain_table(spark, f"{db}.taken", "SELECT id, 'old' AS s FROM range(3)")
    before = files(table_location(spark, f"{db}.taken"))

    result = run(spark, ctas(f"{db}.taken", if_not_exists=True, atomicity=atomicity))

    assert result.succeeded, result.error
    assert result.output.created is False and result.output.skipped == "table exists"
    assert rows(spark, f"{db}.taken") == [(0, "old"), (1, "old"), (2, "old")]
    assert tables(spark, db) == ["taken"] and files(table_location(spark, f"{db}.taken")) == before


def _rival_takes(spark: SparkSession, table: str) -> None:
    """Another task's CTAS creates ``table`` (with its own marks) in the instant before this job's catalog call."""
    rival = dataclasses.replace(owner(), task_id="other_task")
    plain_table(spark, table, "SELECT id, 'theirs' AS s FROM range(2)", rival.properties(COMPLETE))


@pytest.mark.parametrize("if_not_exists", [False, True])
def test_a_name_taken_just_before_the_creation_is_left_to_its_creator(
    spark: SparkSession, db: str, monkeypatch: pytest.MonkeyPatch, if_not_exists: bool
) -> None:
    """Spark refuses the creation with TABLE_OR_VIEW_ALREADY_EXISTS; the catalog shows whose table it is."""
    create = file_tables._create

    def rival_first(spark: SparkSession, name: TableIdentifier, *args: Any) -> None:
        _rival_takes(spark, name.quoted())
        create(spark, name, *args)

    monkeypatch.setattr(file_tables, "_create", rival_first)
    result = run(spark, ctas(f"{db}.contested", atomicity="table", if_not_exists=if_not_exists))

    if if_not_exists:
        assert result.succeeded and result.output.skipped == "table created meanwhile by another task"
    else:
        assert (
            result.error == f"table {db}.contested was created meanwhile by another task, whose table is left as it is"
        )
    assert rows(spark, f"{db}.contested") == [(0, "theirs"), (1, "theirs")]
    assert marks(spark, f"{db}.contested")[f"{PREFIX}task_id"] == "other_task"


def test_a_name_taken_just_before_the_staging_rename_is_left_to_its_creator(
    spark: SparkSession, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The metastore itself refuses the rename (Spark's own check passed first): Spark passes it on as
    _LEGACY_ERROR_TEMP_3065, and the catalog shows the name is another task's. The staging table is dropped."""
    external_catalog = spark._jsparkSession.sharedState().externalCatalog()

    def rename_past_spark_s_check(spark: SparkSession, table: TableIdentifier, new_name: TableIdentifier) -> None:
        _rival_takes(spark, new_name.quoted())
        external_catalog.renameTable(table.database, table.table, new_name.table)

    monkeypatch.setattr(catalog_tables, "rename", rename_past_spark_s_check)
    result = run(spark, ctas(f"{db}.contested", atomicity="staging"))

    assert result.error.startswith(f"table {db}.contested was created meanwhile by another task")
    assert rows(spark, f"{db}.contested") == [(0, "theirs"), (1, "theirs")]
    assert tables(spark, db) == ["contested"], "the staging table is dropped"


def test_a_failing_replace_leaves_the_old_table_readable(spark: SparkSession, db: str) -> None:
    plain_table(spark, f"{db}.taken", "SELECT id, 'old' AS s FROM range(3)", {"made_by": "hand"})
    location = table_location(spark, f"{db}.taken")
    before = files(location)

    result = run(spark, ctas(f"{db}.taken", query=FAILING_QUERY, replace=True))

    assert not result.succeeded
    assert result.error.startswith("[USER_RAISED_EXCEPTION]") and "\n" not in result.error
    staging = staging_table(TableIdentifier.parse(f"{db}.taken"), owner())
    assert result.output.undone == [f"dropped the staging table {staging} of try 1"]
    assert rows(spark, f"{db}.taken") == [(0, "old"), (1, "old"), (2, "old")]
    assert props(spark, f"{db}.taken")["made_by"] == "hand" and marks(spark, f"{db}.taken") == {}
    assert tables(spark, db) == ["taken"]
    assert os.listdir(db_folder(spark, db)) == ["taken"] and files(location) == before


def test_replace_swaps_in_the_new_rows_and_schema(spark: SparkSession, db: str) -> None:
    plain_table(spark, f"{db}.taken", "SELECT id, 'old' AS s FROM range(3)")
    old_files = data_files(table_location(spark, f"{db}.taken"))

    result = run(spark, ctas(f"{db}.taken", query="SELECT id * 1.5D AS x, true AS flag FROM range(4)", replace=True))

    assert result.succeeded, result.error
    assert result.output.created is True and result.output.replaced is True
    assert result.output.atomicity == "staging" and result.output.rows == 4
    assert spark.table(f"{db}.taken").dtypes == [("x", "double"), ("flag", "boolean")]
    assert rows(spark, f"{db}.taken") == [(0.0, True), (1.5, True), (3.0, True), (4.5, True)]
    table_marks = marks(spark, f"{db}.taken")
    assert table_marks[STATE] == COMPLETE
    assert table_marks[REPLACED] == str(replaced_table(TableIdentifier.parse(f"{db}.taken"), owner()))
    assert tables(spark, db) == ["taken"]  # no __staging_ or __replaced_ table left
    assert os.listdir(db_folder(spark, db)) == ["taken"]
    new_files = data_files(table_location(spark, f"{db}.taken"))
    assert new_files and not set(new_files) & set(old_files)


def test_replace_of_an_absent_table_creates_it(spark: SparkSession, db: str) -> None:
    result = run(spark, ctas(f"{db}.fresh", replace=True))
    assert result.succeeded, result.error
    assert result.output.created is True and result.output.replaced is False
    assert rows(spark, f"{db}.fresh") == [(i, str(i * 10)) for i in range(5)]
    assert tables(spark, db) == ["fresh"] and os.listdir(db_folder(spark, db)) == ["fresh"]


# --- failure -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_a_runtime_failure_removes_the_table_and_its_files(spark: SparkSession, db: str, atomicity: str) -> None:
    target = TableIdentifier.parse(f"{db}.broken")
    result = run(spark, ctas(str(target), query=FAILING_QUERY, atomicity=atomicity))

    assert not result.succeeded
    assert "\n" not in result.error
    assert result.error.startswith("[USER_RAISED_EXCEPTION] '(id < 3)' is not true!")
    undone = (
        f"dropped the unfinished {target} of try 1"
        if atomicity == "table"
        else f"dropped the staging table {staging_table(target, owner())} of try 1"
    )
    assert result.error.endswith(f"(undone: {undone})")
    assert result.output.cleaned_up is True and result.output.undone == [undone]
    assert tables(spark, db) == []
    assert not os.path.exists(os.path.join(db_folder(spark, db), "broken"))
    assert os.listdir(db_folder(spark, db)) == []


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_a_runtime_failure_at_an_explicit_location_removes_its_files(
    spark: SparkSession, db: str, tmp_path: Path, atomicity: str
) -> None:
    folder = tmp_path / "external"
    result = run(spark, ctas(f"{db}.broken", query=FAILING_QUERY, location=str(folder), atomicity=atomicity))
    assert not result.succeeded and result.output.cleaned_up is True
    assert tables(spark, db) == []
    assert not folder.exists()


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_a_query_that_does_not_analyse_fails_with_nothing_created(spark: SparkSession, db: str, atomicity: str) -> None:
    result = run(spark, ctas(f"{db}.never", query=f"SELECT * FROM {db}.no_such_table", atomicity=atomicity))
    assert not result.succeeded
    assert result.error.startswith("[TABLE_OR_VIEW_NOT_FOUND]") and "\n" not in result.error
    assert "undone" not in result.error
    assert result.output.undone == [] and result.output.cleaned_up is True
    assert tables(spark, db) == [] and os.listdir(db_folder(spark, db)) == []


COMMANDS_IN_DISGUISE = {
    "with-insert": "WITH c AS (SELECT 1 AS a) INSERT INTO {db}.other SELECT * FROM c",
    "from-insert": "FROM (SELECT 1 AS a) s INSERT INTO {db}.other SELECT a",
}


@pytest.mark.parametrize("atomicity", ATOMICITIES)
@pytest.mark.parametrize("command", COMMANDS_IN_DISGUISE.values(), ids=COMMANDS_IN_DISGUISE.keys())
def test_a_command_that_starts_like_a_query_fails_to_parse_before_anything_is_created(
    spark: SparkSession, db: str, command: str, atomicity: str
) -> None:
    # CtasJob lets these through (they start with WITH and FROM); the job reads the query as a subquery,
    # SELECT * FROM (<query>), where a command cannot parse, so it never runs.
    spark.sql(f"CREATE TABLE {db}.other (a INT) USING parquet")
    before = files(db_folder(spark, db))

    result = run(spark, ctas(f"{db}.never", query=command.format(db=db), atomicity=atomicity))

    assert not result.succeeded
    assert result.error.startswith("[PARSE_SYNTAX_ERROR]") and "\n" not in result.error
    assert result.output.undone == [] and result.output.cleaned_up is True
    assert rows(spark, f"{db}.other") == []  # the INSERT never ran
    assert tables(spark, db) == ["other"]
    assert files(db_folder(spark, db)) == before


@pytest.mark.parametrize(
    "query",
    [
        "SELECT id, CAST(id * 10 AS STRING) AS s FROM range(5) -- the last line is a comment",
        "SELECT id, CAST(id * 10 AS STRING) AS s FROM range(5)\n-- a comment\n-- and another",
        "SELECT id, CAST(id * 10 AS STRING) AS s FROM range(5) /* a block comment */",
    ],
    ids=["line-comment", "comment-lines", "block-comment"],
)
def test_a_query_that_ends_in_a_comment_works(spark: SparkSession, db: str, query: str) -> None:
    result = run(spark, ctas(f"{db}.commented", query=query))

    assert result.succeeded, result.error
    assert rows(spark, f"{db}.commented") == [(i, str(i * 10)) for i in range(5)]


def test_a_statement_that_ends_in_a_comment_runs_as_written(spark: SparkSession, db: str) -> None:
    fields = parse_ctas(f"CREATE TABLE {db}.commented AS SELECT id FROM range(3) -- three rows\n")

    result = run(spark, CtasJob(owner=owner(), **fields))

    assert result.succeeded, result.error
    assert rows(spark, f"{db}.commented") == [(0,), (1,), (2,)]


def test_a_statement_whose_semicolon_is_followed_by_a_comment_runs_as_written(spark: SparkSession, db: str) -> None:
    statement = f"CREATE TABLE {db}.commented USING parquet AS SELECT id FROM range(3); -- three rows"

    result = run(spark, CtasJob(owner=owner(), **parse_ctas(statement)))

    assert result.succeeded, result.error
    assert rows(spark, f"{db}.commented") == [(0,), (1,), (2,)]


# --- retries -------------------------------------------------------------------------------------------------


def test_a_retry_drops_the_unfinished_table_of_the_killed_try(spark: SparkSession, db: str) -> None:
    plain_table(spark, f"{db}.half", "SELECT id, 'try 1' AS s FROM range(3)", owner(1).properties(FILLING))
    old_files = data_files(table_location(spark, f"{db}.half"))

    result = run(spark, ctas(f"{db}.half", try_number=2))

    assert result.succeeded, result.error
    assert result.output.undone_before == [f"dropped the unfinished {db}.half of try 1"]
    assert result.output.created is True and result.output.rows == 5
    assert rows(spark, f"{db}.half") == [(i, str(i * 10)) for i in range(5)]
    assert marks(spark, f"{db}.half") == owner(2).properties(COMPLETE)
    new_files = data_files(table_location(spark, f"{db}.half"))
    assert new_files and not set(new_files) & set(old_files)


def test_a_retry_drops_the_staging_table_of_the_killed_try(spark: SparkSession, db: str) -> None:
    staging = staging_table(TableIdentifier.parse(f"{db}.half"), owner(1))
    leftover_marks = {**owner(1).properties(FILLING), TARGET: f"{db}.half"}
    plain_table(spark, staging.quoted(), "SELECT id, 'try 1' AS s FROM range(3)", leftover_marks)

    result = run(spark, ctas(f"{db}.half", try_number=2, atomicity="staging"))

    assert result.succeeded, result.error
    assert result.output.undone_before == [f"dropped the staging table {staging} of try 1"]
    assert rows(spark, f"{db}.half") == [(i, str(i * 10)) for i in range(5)]
    assert marks(spark, f"{db}.half")["spark_tables.ctas.try_number"] == "2"
    assert tables(spark, db) == ["half"] and os.listdir(db_folder(spark, db)) == ["half"]


def _a_replace_cut_short(spark: SparkSession, db: str) -> tuple[TableIdentifier, TableIdentifier, TableIdentifier]:
    """Try 1 of a REPLACE died mid-swap: the old table moved aside, the complete staging table not yet renamed."""
    target = TableIdentifier.parse(f"{db}.swapped")
    staging, replaced = staging_table(target, owner(1)), replaced_table(target, owner(1))
    plain_table(spark, target.quoted(), "SELECT id, 'old' AS s FROM range(3)", {"made_by": "hand"})
    plain_table(
        spark,
        staging.quoted(),
        "SELECT id, 'try 1' AS s FROM range(7)",
        {**owner(1).properties(COMPLETE), TARGET: str(target), REPLACED: str(replaced)},
    )
    spark.sql(f"ALTER TABLE {target.quoted()} RENAME TO {replaced.quoted()}")
    assert tables(spark, db) == sorted([staging.table, replaced.table])
    return target, staging, replaced


def test_cleanup_puts_back_the_table_a_cut_short_replace_moved_aside(spark: SparkSession, db: str) -> None:
    target, staging, _ = _a_replace_cut_short(spark, db)

    result = run(spark, CtasCleanupJob(tables=[str(target)], owner=owner(2)))

    assert result.succeeded, result.error
    assert result.output.to_dict() == {
        "tables": [str(target)],
        "undone": [f"restored the replaced table {target}", f"dropped the staging table {staging} of try 1"],
        "cleaned_up": True,
    }
    assert rows(spark, str(target)) == [(0, "old"), (1, "old"), (2, "old")]
    assert props(spark, str(target))["made_by"] == "hand"
    assert tables(spark, db) == ["swapped"] and os.listdir(db_folder(spark, db)) == ["swapped"]


def test_a_retried_replace_restores_the_old_table_before_replacing_it(spark: SparkSession, db: str) -> None:
    target, staging, _ = _a_replace_cut_short(spark, db)

    result = run(spark, ctas(str(target), try_number=2, replace=True))

    assert result.succeeded, result.error
    assert result.output.undone_before == [
        f"restored the replaced table {target}",
        f"dropped the staging table {staging} of try 1",
    ]
    assert result.output.replaced is True  # the restored table was there to be replaced
    assert rows(spark, str(target)) == [(i, str(i * 10)) for i in range(5)]
    assert marks(spark, str(target))["spark_tables.ctas.try_number"] == "2"
    assert tables(spark, db) == ["swapped"] and os.listdir(db_folder(spark, db)) == ["swapped"]


def test_a_retried_replace_that_fails_leaves_the_restored_old_table(spark: SparkSession, db: str) -> None:
    target, _, _ = _a_replace_cut_short(spark, db)

    result = run(spark, ctas(str(target), try_number=2, replace=True, query=FAILING_QUERY))

    assert not result.succeeded
    assert result.output.undone_before[0] == f"restored the replaced table {target}"
    assert rows(spark, str(target)) == [(0, "old"), (1, "old"), (2, "old")]
    assert tables(spark, db) == ["swapped"] and os.listdir(db_folder(spark, db)) == ["swapped"]


def test_a_retry_drops_the_replaced_table_a_finished_swap_left(spark: SparkSession, db: str) -> None:
    target = TableIdentifier.parse(f"{db}.swapped")
    replaced = replaced_table(target, owner(1))
    plain_table(spark, str(target), "SELECT id, 'old' AS s FROM range(3)")
    assert run(spark, ctas(str(target), replace=True)).succeeded
    plain_table(spark, replaced.quoted(), "SELECT id, 'old' AS s FROM range(3)")  # try 1 died before dropping it

    result = run(spark, ctas(str(target), try_number=2, replace=True))

    assert result.succeeded, result.error
    assert result.output.undone_before == [f"dropped {replaced}, which {target} replaced"]
    assert result.output.reused_from_try == "1" and result.output.created is False
    assert tables(spark, db) == ["swapped"] and os.listdir(db_folder(spark, db)) == ["swapped"]


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_a_table_completed_by_an_earlier_try_is_reused(spark: SparkSession, db: str, atomicity: str) -> None:
    first = run(spark, ctas(f"{db}.done", atomicity=atomicity))
    assert first.succeeded, first.error
    location = table_location(spark, f"{db}.done")
    before = files(location)

    result = run(spark, ctas(f"{db}.done", try_number=2, query="SELECT 99 AS id, 'other' AS s", atomicity=atomicity))

    assert result.succeeded, result.error
    assert result.output.reused_from_try == "1" and result.output.created is False
    assert result.output.undone_before == []
    assert result.output.rows == 5 and result.output.bytes == first.output.bytes
    assert result.output.location == first.output.location
    assert rows(spark, f"{db}.done") == [(i, str(i * 10)) for i in range(5)]
    assert marks(spark, f"{db}.done")["spark_tables.ctas.try_number"] == "1"
    assert files(location) == before  # not rewritten
    assert tables(spark, db) == ["done"]


UNFINISHED_OF_TRY_2 = ("target", "staging", "both")


def _unfinished_tables(spark: SparkSession, db: str, try_number: int, which: str) -> list[TableIdentifier]:
    """What a try of the task left unfinished: the table under the final name, its staging table, or both."""
    target = TableIdentifier.parse(f"{db}.half")
    left = []
    if which in ("target", "both"):
        plain_table(spark, target.quoted(), "SELECT id FROM range(3)", owner(try_number).properties(FILLING))
        left.append(target)
    if which in ("staging", "both"):
        staging = staging_table(target, owner())
        marks_left = {**owner(try_number).properties(FILLING), TARGET: str(target)}
        plain_table(spark, staging.quoted(), "SELECT id FROM range(3)", marks_left)
        left.append(staging)
    return left


@pytest.mark.parametrize("which", UNFINISHED_OF_TRY_2)
def test_undo_up_to_a_try_leaves_alone_what_a_later_try_of_the_task_is_making(
    spark: SparkSession, db: str, which: str
) -> None:
    target = TableIdentifier.parse(f"{db}.half")
    left = _unfinished_tables(spark, db, 2, which)
    before = files(db_folder(spark, db))

    assert undo_unfinished(spark, target, owner(1), up_to_try=1) == []

    assert tables(spark, db) == sorted(t.table for t in left)
    for table in left:
        assert rows(spark, table.quoted()) == [(0,), (1,), (2,)]
        assert marks(spark, table.quoted())[STATE] == FILLING
    assert files(db_folder(spark, db)) == before


@pytest.mark.parametrize("which", UNFINISHED_OF_TRY_2)
def test_undo_up_to_a_try_drops_what_that_try_left(spark: SparkSession, db: str, which: str) -> None:
    target = TableIdentifier.parse(f"{db}.half")
    staging = staging_table(target, owner())
    _unfinished_tables(spark, db, 1, which)

    undone = undo_unfinished(spark, target, owner(1), up_to_try=1)

    expected = {
        "target": [f"dropped the unfinished {target} of try 1"],
        "staging": [f"dropped the staging table {staging} of try 1"],
    }
    expected["both"] = expected["target"] + expected["staging"]
    assert undone == expected[which]
    assert tables(spark, db) == [] and os.listdir(db_folder(spark, db)) == []


def test_undo_up_to_a_try_drops_that_try_s_table_and_leaves_the_later_try_s_staging(
    spark: SparkSession, db: str
) -> None:
    target = TableIdentifier.parse(f"{db}.half")
    _unfinished_tables(spark, db, 1, "target")
    (staging,) = _unfinished_tables(spark, db, 2, "staging")

    assert undo_unfinished(spark, target, owner(1), up_to_try=1) == [f"dropped the unfinished {target} of try 1"]

    assert tables(spark, db) == [staging.table]
    assert marks(spark, staging.quoted())["spark_tables.ctas.try_number"] == "2"


def test_a_cleanup_job_passes_its_claim_s_try_and_leaves_a_later_try_s_tables(spark: SparkSession, db: str) -> None:
    target = TableIdentifier.parse(f"{db}.half")
    left = _unfinished_tables(spark, db, 2, "both")
    before = files(db_folder(spark, db))

    result = run(spark, CtasCleanupJob(tables=[str(target)], owner=owner(1)))

    assert result.succeeded, result.error
    assert result.output.to_dict() == {"tables": [str(target)], "undone": [], "cleaned_up": True}
    assert tables(spark, db) == sorted(t.table for t in left)
    assert files(db_folder(spark, db)) == before

    again = run(spark, CtasCleanupJob(tables=[str(target)], owner=owner(2)))  # the claim of try 2, once it is lost

    assert again.output.undone == [
        f"dropped the unfinished {target} of try 2",
        f"dropped the staging table {left[1]} of try 2",
    ]
    assert tables(spark, db) == [] and os.listdir(db_folder(spark, db)) == []


def test_undo_up_to_a_try_leaves_alone_the_swap_a_later_try_is_making(spark: SparkSession, db: str) -> None:
    target = TableIdentifier.parse(f"{db}.swapped")
    staging, replaced = staging_table(target, owner(2)), replaced_table(target, owner(2))
    plain_table(spark, replaced.quoted(), "SELECT id, 'old' AS s FROM range(3)", {"made_by": "hand"})
    plain_table(
        spark,
        staging.quoted(),
        "SELECT id, 'try 2' AS s FROM range(7)",
        {**owner(2).properties(COMPLETE), TARGET: str(target), REPLACED: str(replaced)},
    )  # try 2 is between its two renames: the old table moved aside, its own not yet given the name

    assert undo_unfinished(spark, target, owner(1), up_to_try=1) == []
    assert tables(spark, db) == sorted([staging.table, replaced.table])


FOREIGN_MARKS = {
    "another run": owner(1, run_id="scheduled__2026-11-19").properties(FILLING),
    "another task": owner(1, task_id="other_table").properties(FILLING),
    "no marks": {},
}


@pytest.mark.parametrize("whose", FOREIGN_MARKS)
def test_tables_of_others_are_never_dropped_by_cleanup(spark: SparkSession, db: str, whose: str) -> None:
    target = TableIdentifier.parse(f"{db}.shared")
    staging = staging_table(target, owner())
    for table in (target, staging):
        plain_table(spark, table.quoted(), "SELECT id FROM range(3)", FOREIGN_MARKS[whose])
    before = files(db_folder(spark, db))

    assert undo_unfinished(spark, target, owner(2)) == []
    assert run_ctas_cleanup(spark, CtasCleanupJob(tables=[str(target)], owner=owner(2)), Cancellation()).undone == []
    retry = run(spark, ctas(str(target), try_number=2))

    assert not retry.succeeded and "already exists" in retry.error
    assert retry.output.undone_before == []
    assert tables(spark, db) == sorted(["shared", staging.table])
    for table in (target, staging):
        assert rows(spark, table.quoted()) == [(0,), (1,), (2,)]
    assert files(db_folder(spark, db)) == before


# --- sweeping what lost tries of other tasks left ---------------------------------------------------------------


OTHER_TASK = owner(1, task_id="other_table")


def test_a_sweep_undoes_another_task_s_unfinished_table_then_the_job_does_its_own_work(
    spark: SparkSession, db: str
) -> None:
    plain_table(spark, f"{db}.other", "SELECT id FROM range(3)", OTHER_TASK.properties(FILLING))

    result = run(spark, ctas(f"{db}.mine", sweep=[CtasCleanupJob(tables=[f"{db}.other"], owner=OTHER_TASK)]))

    assert result.succeeded, result.error
    assert [claim.to_dict() for claim in result.output.swept] == [
        {
            "tables": [f"{db}.other"],
            "owner": dataclasses.asdict(OTHER_TASK),
            "undone": [f"dropped the unfinished {db}.other of try 1"],
        }
    ]
    assert result.output.undone_before == [] and result.output.created is True
    assert rows(spark, f"{db}.mine") == [(i, str(i * 10)) for i in range(5)]
    assert tables(spark, db) == ["mine"] and os.listdir(db_folder(spark, db)) == ["mine"]


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_the_sweep_comes_before_the_job_s_own_work(spark: SparkSession, db: str, atomicity: str) -> None:
    # Another task's lost try left an unfinished table under the very name this job creates: unless it is
    # swept first, the job finds the name taken by a table it did not create.
    plain_table(spark, f"{db}.shared", "SELECT id FROM range(3)", OTHER_TASK.properties(FILLING))
    sweep = [CtasCleanupJob(tables=[f"{db}.shared"], owner=OTHER_TASK)]

    result = run(spark, ctas(f"{db}.shared", sweep=sweep, atomicity=atomicity))

    assert result.succeeded, result.error
    assert result.output.swept[0].undone == [f"dropped the unfinished {db}.shared of try 1"]
    assert rows(spark, f"{db}.shared") == [(i, str(i * 10)) for i in range(5)]
    assert marks(spark, f"{db}.shared")["spark_tables.ctas.task_id"] == "make_table"


def test_a_sweep_leaves_the_other_task_s_later_try_and_complete_tables_alone(spark: SparkSession, db: str) -> None:
    later = owner(2, task_id="other_table")
    plain_table(spark, f"{db}.later", "SELECT id FROM range(3)", later.properties(FILLING))
    plain_table(spark, f"{db}.done", "SELECT id FROM range(3)", OTHER_TASK.properties(COMPLETE))
    sweep = [
        CtasCleanupJob(tables=[f"{db}.later"], owner=OTHER_TASK),
        CtasCleanupJob(tables=[f"{db}.done"], owner=OTHER_TASK),
    ]

    result = run(spark, ctas(f"{db}.mine", sweep=sweep))

    assert result.succeeded, result.error
    assert [swept.undone for swept in result.output.swept] == [[], []]
    assert tables(spark, db) == ["done", "later", "mine"]


def test_a_sweep_entry_that_fails_gives_none_and_the_job_goes_on(spark: SparkSession, db: str) -> None:
    plain_table(spark, f"{db}.other", "SELECT id FROM range(3)", OTHER_TASK.properties(FILLING))
    # Not a catalog: spark_catalog reads nowhere.db as a two-part namespace, and refuses it.
    unreadable = CtasCleanupJob(tables=[f"nowhere.{db}.other"], owner=owner(1, task_id="third_table"))
    sweep = [unreadable, CtasCleanupJob(tables=[f"{db}.other"], owner=OTHER_TASK)]

    result = run(spark, ctas(f"{db}.mine", sweep=sweep))

    assert result.succeeded, result.error
    assert [claim.to_dict() for claim in result.output.swept] == [
        {"tables": [f"nowhere.{db}.other"], "owner": dataclasses.asdict(unreadable.owner), "undone": None},
        {
            "tables": [f"{db}.other"],
            "owner": dataclasses.asdict(OTHER_TASK),
            "undone": [f"dropped the unfinished {db}.other of try 1"],
        },
    ]
    assert rows(spark, f"{db}.mine") == [(i, str(i * 10)) for i in range(5)]
    assert tables(spark, db) == ["mine"]


def test_a_sweep_entry_whose_undo_raises_gives_none_and_the_job_goes_on(
    spark: SparkSession, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = ctas_jobs.undo_unfinished

    def undo(spark: SparkSession, target: TableIdentifier, owner: TableOwner, **kwargs: Any) -> list[str]:
        if owner == OTHER_TASK:
            raise RuntimeError("metastore unreachable")
        return real(spark, target, owner, **kwargs)

    monkeypatch.setattr(ctas_jobs, "undo_unfinished", undo)
    plain_table(spark, f"{db}.other", "SELECT id FROM range(3)", OTHER_TASK.properties(FILLING))

    result = run(spark, ctas(f"{db}.mine", sweep=[CtasCleanupJob(tables=[f"{db}.other"], owner=OTHER_TASK)]))

    assert result.succeeded, result.error
    assert [claim.to_dict() for claim in result.output.swept] == [
        {"tables": [f"{db}.other"], "owner": dataclasses.asdict(OTHER_TASK), "undone": None}
    ]
    assert tables(spark, db) == ["mine", "other"]  # left for the claim's next sweep
    assert marks(spark, f"{db}.other")[STATE] == FILLING


def test_a_job_that_fails_still_reports_what_it_swept(spark: SparkSession, db: str) -> None:
    plain_table(spark, f"{db}.other", "SELECT id FROM range(3)", OTHER_TASK.properties(FILLING))

    result = run(
        spark,
        ctas(f"{db}.broken", query=FAILING_QUERY, sweep=[CtasCleanupJob(tables=[f"{db}.other"], owner=OTHER_TASK)]),
    )

    assert not result.succeeded
    assert result.output.cleaned_up is True
    assert result.output.swept[0].undone == [f"dropped the unfinished {db}.other of try 1"]
    assert tables(spark, db) == []


# --- cancellation --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("atomicity", ATOMICITIES)
def test_cancelling_during_the_fill_stops_the_job_and_removes_the_table(
    spark: SparkSession, db: str, atomicity: str
) -> None:
    target = TableIdentifier.parse(f"{db}.endless")
    filling_name = target if atomicity == "table" else staging_table(target, owner())
    tracker = spark.sparkContext.statusTracker()
    cancellation = Cancellation()
    cancellation.interrupt_with(spark.interruptAll)
    finished = threading.Event()
    seen: dict[str, Any] = {}
    earlier_jobs = set(tracker.getActiveJobsIds())  # the status lags: jobs of earlier tests may still be listed

    def filling() -> bool:
        return bool(set(tracker.getActiveJobsIds()) - earlier_jobs) and spark.catalog.tableExists(filling_name.quoted())

    def cancel_once_writing() -> None:
        try:
            if wait_until(filling, 120, stop=finished):
                seen["state"] = marks(spark, filling_name.quoted()).get(STATE)
                seen["target exists"] = spark.catalog.tableExists(target.quoted())
                cancellation.request("the test cancelled the job")
        except Exception as err:  # reported by the test, not lost in the thread
            seen["error"] = err
        finally:
            if not finished.wait(30):  # a safety net: never let the endless query fill the disk
                cancellation.request("the test's safety net")
                spark.sparkContext.cancelAllJobs()

    watcher = threading.Thread(target=cancel_once_writing, name="test-canceller", daemon=True)
    watcher.start()
    try:
        result = run(spark, ctas(str(target), query=SLOW_QUERY, atomicity=atomicity), cancellation)
    finally:
        finished.set()
        watcher.join(10)

    assert "error" not in seen, seen
    assert seen["state"] == FILLING  # the table existed, marked, while its rows were being written
    assert seen["target exists"] is (atomicity == "table")
    assert not result.succeeded
    assert result.error.startswith("cancelled: the test cancelled the job")
    assert "\n" not in result.error
    assert result.output.cleaned_up is True
    assert result.output.undone == [
        f"dropped the unfinished {target} of try 1"
        if atomicity == "table"
        else f"dropped the staging table {filling_name} of try 1"
    ]
    # The interrupted tasks stop soon, and leave nothing behind once stopped.
    assert wait_until(lambda: no_task_running(tracker), 30), "the interrupted tasks are still running"
    assert tables(spark, db) == []
    assert not os.path.exists(os.path.join(db_folder(spark, db), filling_name.table))
    assert os.listdir(db_folder(spark, db)) == []

    # The session is fine afterwards: the same table can be made at once.
    assert spark.sql("SELECT count(*) FROM range(10)").collect()[0][0] == 10
    again = run(spark, ctas(str(target), try_number=2, atomicity=atomicity))
    assert again.succeeded, again.error
    assert again.output.undone_before == [] and again.output.rows == 5
