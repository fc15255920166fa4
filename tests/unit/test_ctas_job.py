"""CtasJob and CtasCleanupJob: validation of every field, the defaults they derive, and their trip through JSON."""

from __future__ import annotations

import dataclasses
import json

import pytest

from spark_tables.core.ctas.job import FORMATS, CtasCleanupJob, CtasJob
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.job_spec import JobSpec
from spark_tables.tasks.sql_reader import nestable_query

_OWNER = {"dag_id": "sales", "run_id": "scheduled__2026-01-01", "task_id": "load", "map_index": 2, "try_number": 3}


def _job(**fields) -> CtasJob:
    return CtasJob(**{"table": "db.t", "owner": _OWNER, "query": "SELECT 1 AS a", **fields})


def _error_message(**fields) -> str:
    with pytest.raises(SpecError) as caught:
        _job(**fields)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_defaults_are_the_catalog_s_format_and_its_atomicity_once_the_job_knows_it():
    job = _job()

    assert (job.format, job.atomicity) == (None, None)
    assert (job.with_format("parquet").format, job.with_format("parquet").atomicity) == ("parquet", "table")
    assert (job.with_format("delta").format, job.with_format("delta").atomicity) == ("delta", "commit")
    assert job.table_formats == () and job.with_format("delta").table_formats == ("delta",)
    job = job.with_format("parquet")
    assert job.partitioned_by == ()
    assert job.properties == {}
    assert job.location is None
    assert job.comment is None
    assert job.if_not_exists is False
    assert job.replace is False
    assert job.atomicity == "table"


def test_an_owner_given_as_a_dict_becomes_a_table_owner():
    assert _job().owner == TableOwner(**_OWNER)


def test_an_owner_given_as_a_table_owner_is_kept():
    owner = TableOwner(dag_id="d", run_id="r", task_id="t")

    assert _job(owner=owner).owner is owner


def test_a_list_of_partition_columns_becomes_a_tuple():
    assert _job(partitioned_by=["day", "region"]).partitioned_by == ("day", "region")


def test_the_identifier_is_parsed_from_the_table():
    assert _job(table="cat.`my db`.t").identifier == TableIdentifier(("cat", "my db", "t"))


@pytest.mark.parametrize("table", ["", "a.b.c.d", "db t", "db.", None, 5])
def test_a_bad_table_identifier_is_rejected(table):
    assert "invalid table identifier" in _error_message(table=table)


@pytest.mark.parametrize("fields", [{"query": None}, {"producer": "jobs.rows:make"}])
def test_exactly_one_of_query_and_producer_is_required(fields):
    assert "exactly one of query" in _error_message(**fields)


@pytest.mark.parametrize(
    "query",
    ["SELECT 1", "select 1", "WITH x AS (SELECT 1) SELECT * FROM x", "FROM t SELECT a", "VALUES (1), (2)", "TABLE t"],
)
def test_queries_are_accepted(query):
    assert _job(query=query).query == query


@pytest.mark.parametrize("query", ["(SELECT 1)", "-- rows\nSELECT 1", "/* rows */ SELECT 1", "  \n SELECT 1"])
def test_a_query_may_start_with_a_parenthesis_comments_or_white_space(query):
    assert _job(query=query).query == query


@pytest.mark.parametrize(
    "query",
    [
        "DROP TABLE x",
        "INSERT INTO x SELECT 1",
        "INSERT OVERWRITE TABLE x SELECT 1",
        "DELETE FROM x",
        "CREATE TABLE x AS SELECT 1",
        "SELECTED",
        "",
        "-- SELECT 1",
        5,
    ],
)
def test_a_query_that_is_a_command_or_not_text_is_rejected(query):
    # The Airflow side reads the query as it builds the job (tasks.sql_reader; core keeps no SQL lexer).
    with pytest.raises(SpecError) as caught:
        _job(query=nestable_query(query, "ctas job"))
    assert "query must be a query" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("producer", ["rows:make", "jobs.rows:make", "_a.b_2:_c"])
def test_producers_are_accepted(producer):
    assert _job(query=None, producer=producer).producer == producer


@pytest.mark.parametrize(
    "producer", ["rows", "jobs.rows", "jobs.rows:", ":make", "a:b.c", "a:b:c", "jobs/rows:make", "1a:b", "", 5]
)
def test_a_bad_producer_is_rejected(producer):
    assert "is invalid: use 'package.module:function'" in _error_message(query=None, producer=producer)


@pytest.mark.parametrize("format", FORMATS)
def test_every_supported_format_is_accepted(format):
    assert _job(format=format).format == format


def test_the_format_is_lowered():
    assert _job(format="ORC").format == "orc"


@pytest.mark.parametrize("format", ["iceberg", "", 5])
def test_an_unsupported_format_is_rejected_with_the_list(format):
    assert "use one of parquet, orc, json, csv, avro, text, delta" in _error_message(format=format)


@pytest.mark.parametrize("replace", [False, True])
def test_a_delta_table_is_made_in_one_commit(replace):
    assert _job(format="Delta", replace=replace).atomicity == "commit"


@pytest.mark.parametrize("atomicity", ["table", "staging"])
def test_a_file_tables_atomicity_is_refused_for_delta(atomicity):
    message = _error_message(format="delta", atomicity=atomicity)
    assert message == (
        f"ctas job: a delta table is made or replaced in one commit: leave atomicity out, or give 'commit' "
        f"('{atomicity}' is for Spark's file formats)"
    )


def test_commit_atomicity_is_refused_for_a_file_format():
    assert "is invalid: use 'table' or 'staging'" in _error_message(format="parquet", atomicity="commit")


@pytest.mark.parametrize("columns", ["day", None, {"day": 1}])
def test_partitioned_by_must_be_a_list(columns):
    assert "partitioned_by must be a list" in _error_message(partitioned_by=columns)


@pytest.mark.parametrize("column", ["", "a b", "1a", "a-b", "`a`", "a.b", 1, None])
def test_an_invalid_partition_column_is_rejected(column):
    assert "partition column" in _error_message(partitioned_by=["ok", column])


@pytest.mark.parametrize("columns", [["a", "a"], ["Day", "day"], ["a", "b", "A"]])
def test_a_repeated_partition_column_is_rejected_whatever_its_case(columns):
    assert "repeat a column" in _error_message(partitioned_by=columns)


def test_properties_are_kept():
    assert _job(properties={"owner.team": "finance"}).properties == {"owner.team": "finance"}


@pytest.mark.parametrize("properties", [{"a": 1}, {1: "a"}, {"a": None}, [("a", "b")], "a=b", None])
def test_properties_must_map_strings_to_strings(properties):
    assert "properties must map strings to strings" in _error_message(properties=properties)


@pytest.mark.parametrize("key", ["spark_tables.ctas.state", "spark_tables.ctas.dag_id", "Spark_Tables.CTAS.anything"])
def test_ownership_mark_keys_are_reserved(key):
    message = _error_message(properties={"ok": "v", key: "x"})

    assert "reserved for ownership marks" in message
    assert key in message


def test_a_property_that_only_looks_like_a_mark_is_allowed():
    assert _job(properties={"spark_tables.ctasx": "v"}).properties == {"spark_tables.ctasx": "v"}


@pytest.mark.parametrize("location", ["", "   ", 5])
def test_a_bad_location_is_rejected(location):
    assert "location must be a non-empty path" in _error_message(location=location)


@pytest.mark.parametrize("location", ["warehouse/sales", "./sales", "sales"])
def test_a_relative_location_is_rejected(location):
    """Spark resolves a relative LOCATION against its warehouse, the provider's file checks against the driver's
    working folder: the two would look at different folders."""
    assert _error_message(location=location) == (
        f"ctas job: location {location!r} is relative, and Spark and the provider would resolve it differently: give "
        "an absolute path or a URI (file:/..., s3a://..., hdfs://...)"
    )


def test_a_location_with_a_parent_part_is_rejected():
    assert _error_message(location="/data/lake/../other") == (
        "ctas job: location '/data/lake/../other' has a '..' part: give the folder's own path"
    )


@pytest.mark.parametrize("location", ["/data/sales", "file:/data/sales", "s3a://bucket/sales", "hdfs://nn:8020/x"])
def test_an_absolute_location_or_uri_is_taken(location):
    assert _job(location=location).location == location


def test_a_comment_must_be_text():
    assert "comment must be a string" in _error_message(comment=5)


@pytest.mark.parametrize("flag", ["if_not_exists", "replace"])
@pytest.mark.parametrize("value", ["yes", 1, None])
def test_flags_must_be_booleans(flag, value):
    assert f"{flag} must be true or false" in _error_message(**{flag: value})


def test_if_not_exists_and_replace_together_are_rejected():
    assert "IF NOT EXISTS and REPLACE contradict" in _error_message(if_not_exists=True, replace=True)


def test_replace_defaults_to_staging_atomicity():
    assert _job(replace=True).with_format("parquet").atomicity == "staging"
    assert _job(replace=True, format="orc").atomicity == "staging"


def test_a_format_named_wins_over_the_catalog_s_default():
    assert _job(format="orc").with_format("delta").format == "orc"


def test_an_atomicity_the_catalog_s_default_format_does_not_take_fails_naming_that_default():
    job = _job(atomicity="staging")

    with pytest.raises(SpecError) as refused:
        job.with_format("delta")

    assert str(refused.value) == (
        "ctas job: a delta table is made or replaced in one commit: leave atomicity out, or give 'commit' "
        "('staging' is for Spark's file formats) (the catalog's default format is delta)"
    )


def test_replace_with_table_atomicity_is_rejected():
    assert "REPLACE TABLE needs atomicity='staging'" in _error_message(replace=True, atomicity="table")


@pytest.mark.parametrize("atomicity", ["table", "staging"])
def test_a_create_may_choose_its_atomicity(atomicity):
    assert _job(atomicity=atomicity).atomicity == atomicity


@pytest.mark.parametrize("atomicity", ["none", "TABLE", "", 1])
def test_an_unknown_atomicity_is_rejected(atomicity):
    assert "use 'table' or 'staging'" in _error_message(atomicity=atomicity)


@pytest.mark.parametrize(
    "owner", [None, "sales.load", ["sales", "r", "load"], {**_OWNER, "dag_id": ""}, {**_OWNER, "try_number": "3"}]
)
def test_a_bad_owner_is_rejected(owner):
    assert "owner" in _error_message(owner=owner)


@pytest.mark.parametrize("owner", [{"dag_id": "sales"}, {**_OWNER, "pool": "default"}])
def test_an_owner_dict_with_missing_or_unknown_keys_is_rejected_as_a_spec_error(owner):
    assert "owner must be an object with dag_id" in _error_message(owner=owner)


def test_describe_names_the_verb_the_source_and_the_atomicity():
    assert _job().describe() == "CREATE TABLE db.t AS a query (the catalog's default format, atomicity by format)"
    assert _job().with_format("parquet").describe() == "CREATE TABLE db.t AS a query (parquet, atomicity table)"
    assert (
        _job(if_not_exists=True, query=None, producer="jobs.rows:make", format="orc").describe()
        == "CREATE TABLE IF NOT EXISTS db.t AS rows from jobs.rows:make (orc, atomicity table)"
    )
    assert _job(replace=True, format="parquet").describe() == (
        "REPLACE TABLE db.t AS a query (parquet, atomicity staging)"
    )


_OTHER_OWNER = {**_OWNER, "dag_id": "finance", "map_index": -1, "try_number": 1}


def test_there_is_nothing_to_sweep_by_default():
    assert _job().sweep == ()


def test_sweep_entries_given_as_dicts_become_cleanup_jobs_in_order():
    job = _job(sweep=[{"tables": ["db.a"], "owner": _OTHER_OWNER}, {"tables": ["cat.db.b"], "owner": _OWNER}])

    assert job.sweep == (
        CtasCleanupJob(tables=("db.a",), owner=TableOwner(**_OTHER_OWNER)),
        CtasCleanupJob(tables=("cat.db.b",), owner=TableOwner(**_OWNER)),
    )
    assert all(isinstance(cleanup.owner, TableOwner) for cleanup in job.sweep)


def test_sweep_cleanup_jobs_are_kept_as_they_are():
    cleanup = CtasCleanupJob(tables=("db.a",), owner=_OTHER_OWNER)

    job = _job(sweep=(cleanup,))

    assert job.sweep == (cleanup,)
    assert job.sweep[0] is cleanup


@pytest.mark.parametrize("sweep", ["db.a", None, {"tables": ["db.a"], "owner": _OWNER}, 5])
def test_sweep_must_be_a_list(sweep):
    assert "sweep must be a list of {tables, owner} objects" in _error_message(sweep=sweep)


@pytest.mark.parametrize(
    "entry",
    [{"tables": ["db a"], "owner": _OWNER}, {"tables": ["db.a"], "owner": None}, {"tables": ["db.a"], "owner": {}}],
)
def test_a_sweep_entry_with_a_bad_table_or_owner_is_rejected(entry):
    _error_message(sweep=[entry])


@pytest.mark.parametrize("entry", [{"tables": ["db.a"]}, {"tables": ["db.a"], "owner": _OWNER, "note": "x"}, "db.a", 5])
def test_a_sweep_entry_that_is_not_a_tables_and_owner_object_is_rejected_as_a_spec_error(entry):
    assert "each sweep entry must be an object with exactly tables and owner" in _error_message(sweep=[entry])


def test_a_cleanup_job_turns_its_owner_dict_into_a_table_owner_and_its_tables_into_a_tuple():
    job = CtasCleanupJob(tables=["db.t", "cat.db.u"], owner=_OWNER)

    assert job.owner == TableOwner(**_OWNER)
    assert job.tables == ("db.t", "cat.db.u")
    assert job.identifiers == (TableIdentifier(("db", "t")), TableIdentifier(("cat", "db", "u")))


@pytest.mark.parametrize(
    ("tables", "owner"),
    [(["db t"], _OWNER), (["db.t"], None), (["db.t"], {**_OWNER, "task_id": ""}), ([], _OWNER), ("db.t", _OWNER)],
)
def test_a_cleanup_job_validates_its_tables_and_owner(tables, owner):
    with pytest.raises(SpecError) as caught:
        CtasCleanupJob(tables=tables, owner=owner)

    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "job",
    [
        _job(),
        _job(
            table="cat.db.sales",
            query=None,
            producer="jobs.rows:make",
            format="csv",
            partitioned_by=["day", "region"],
            properties={"owner.team": "finance", "note": "it's"},
            location="s3://bucket/sales",
            comment="daily\nsales",
            if_not_exists=True,
            atomicity="staging",
        ),
        _job(replace=True),
        _job(sweep=[{"tables": ["db.a"], "owner": _OTHER_OWNER}, {"tables": ["cat.`my db`.b"], "owner": _OWNER}]),
        CtasCleanupJob(tables=("db.t",), owner=_OWNER),
    ],
    ids=["ctas-defaults", "ctas-every-field", "ctas-replace", "ctas-sweep", "ctas-cleanup"],
)
def test_a_job_survives_a_json_round_trip_in_a_spec(job):
    spec = JobSpec(job=job, result_uri="file:///srv/exchange/r.json", watch_pid=4242)

    again = JobSpec.from_json(spec.to_json())

    assert again == spec
    assert type(again.job) is type(job)
    assert isinstance(again.job.owner, TableOwner)


def test_the_spec_json_names_the_ctas_kinds():
    for job, kind in ((_job(), "ctas"), (CtasCleanupJob(tables=("db.t",), owner=_OWNER), "ctas_cleanup")):
        document = json.loads(JobSpec(job=job, result_uri="file:///r.json").to_json())

        assert document["kind"] == kind
        assert document["job"] == json.loads(json.dumps(dataclasses.asdict(job)))
        assert document["job"]["owner"] == _OWNER


def test_the_sweep_survives_a_json_round_trip_as_cleanup_jobs():
    job = _job(sweep=[{"tables": ["db.a"], "owner": _OTHER_OWNER}])
    document = json.loads(JobSpec(job=job, result_uri="file:///r.json").to_json())

    again = JobSpec.from_json(json.dumps(document)).job

    assert document["job"]["sweep"] == [{"tables": ["db.a"], "owner": _OTHER_OWNER}]
    assert again.sweep == job.sweep
    assert type(again.sweep) is tuple
    assert type(again.sweep[0]) is CtasCleanupJob
    assert again.sweep[0].owner == TableOwner(**_OTHER_OWNER)
