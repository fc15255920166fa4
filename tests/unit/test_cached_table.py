"""Cached table declarations, their descriptors, where their copies lie, and how a job spec carries them."""

from __future__ import annotations

import json

import pytest

from spark_tables.core.cache.descriptor import (
    DESCRIPTOR_TYPE,
    CacheDescriptor,
    CachePartition,
    descriptor_of_copy,
    is_descriptor,
)
from spark_tables.core.cache.layout import (
    cache_folder_name,
    cache_name,
    copy_folder,
    memory_location,
    memory_parts,
    memory_view,
    run_folder,
)
from spark_tables.core.cache.table import REGISTRY_KEY_PREFIX, CachedTable
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.errors import SpecError
from spark_tables.core.job_spec import CacheUse, JobSpec
from spark_tables.core.sizes import parse_size
from spark_tables.core.sql.job import SqlJob
from spark_tables.tasks.sql_reader import check_cached_table, split_cached_views

QUERY = "SELECT k, max(sha2(CAST(id AS STRING), 256)) AS h FROM a GROUP BY k"
OWNER = TableOwner(dag_id="flip36", run_id="manual__2026-11-22T10:00:00+00:00", task_id="max_b", try_number=2)


def descriptor(**fields) -> CacheDescriptor:
    values = {
        "name": "b",
        "fingerprint": CachedTable("b", query=QUERY).fingerprint,
        "location": "file:///cache/flip36/run/b-x/max_b",
        "format": "parquet",
        "schema": '{"type": "struct", "fields": []}',
        "partitions": (CachePartition("part-0.parquet", 10, 100, 7), CachePartition("part-1.parquet", 5, 60, 9)),
        "owner": OWNER,
        "written_at": "2026-11-22T10:00:01+00:00",
        **fields,
    }
    return CacheDescriptor(**values)


#: What a copy kept in a Spark Connect server's memory has instead of files.
MEMORY_COPY = {
    "location": memory_location("app-20261127101010-0000", "global_temp.spark_tables_b_x_0001"),
    "format": "memory",
    "partitions": (),
    "storage": "memory",
    "server": "spark_connect",
    "memory_rows": 50,
    "memory_bytes": 4096,
}


class TestCachedTable:
    def test_a_query_or_a_producer_defines_it(self):
        assert CachedTable("b", query=QUERY).query == QUERY
        assert CachedTable("b", producer="pkg.transforms:b").producer == "pkg.transforms:b"

    @pytest.mark.parametrize("name", ["", "my-view", "db.b", "1 b", None])
    def test_a_name_that_is_not_a_view_name_is_rejected_by_name(self, name):
        with pytest.raises(SpecError, match=r"cached table name .* is invalid"):
            CachedTable(name, query=QUERY)

    @pytest.mark.parametrize(
        ("fields", "named"),
        [
            ({}, "give exactly one of query"),
            ({"query": QUERY, "producer": "m:f"}, "give exactly one of query"),
            ({"producer": "not a function"}, "producer 'not a function' is invalid"),
            ({"query": "  "}, "query is empty or not text: give a query"),
        ],
    )
    def test_a_bad_definition_is_rejected_with_one_line(self, fields, named):
        with pytest.raises(SpecError, match=named) as caught:
            CachedTable("b", **fields)
        assert "cached table b" in str(caught.value) and "\n" not in str(caught.value)

    def test_a_command_for_a_query_is_rejected_by_the_reader_with_one_line(self):
        # The operator given the table checks this as the DAG is parsed (core keeps no SQL lexer).
        with pytest.raises(SpecError, match="query must be a query") as caught:
            check_cached_table(CachedTable("b", query="DROP TABLE a"))
        assert "cached table b" in str(caught.value) and "\n" not in str(caught.value)

    def test_the_fingerprint_ignores_surrounding_white_space_and_a_final_semicolon(self):
        assert CachedTable("b", query=f"\n   {QUERY};\n").fingerprint == CachedTable("b", query=QUERY).fingerprint

    @pytest.mark.parametrize(
        "other",
        [
            CachedTable("b", query=QUERY.replace("max", "min")),
            CachedTable("c", query=QUERY),
            CachedTable("b", producer="pkg.transforms:b"),
            CachedTable("b", query=QUERY.replace("GROUP BY k", "GROUP  BY k")),  # white space inside counts
        ],
    )
    def test_another_definition_or_name_is_another_cache(self, other):
        assert other.fingerprint != CachedTable("b", query=QUERY).fingerprint

    def test_it_is_registered_under_its_name(self):
        assert CachedTable("b", query=QUERY).registry_key == REGISTRY_KEY_PREFIX + "b"

    @pytest.mark.parametrize("storage", ["auto", "memory", "files"])
    def test_it_survives_a_dict_round_trip(self, storage):
        table = CachedTable("b", producer="pkg.transforms:b", storage=storage)
        assert CachedTable.from_dict(json.loads(json.dumps(table.to_dict()))) == table

    def test_where_it_is_kept_is_not_what_it_is(self):
        assert CachedTable("b", query=QUERY, storage="files").fingerprint == CachedTable("b", query=QUERY).fingerprint

    @pytest.mark.parametrize(
        ("storage", "server", "kept"),
        [
            ("auto", "spark_connect", "memory"),
            ("auto", None, "files"),
            ("files", "spark_connect", "files"),
            ("files", None, "files"),
            ("memory", "spark_connect", "memory"),
        ],
    )
    def test_auto_keeps_it_in_the_servers_memory_in_session_mode_and_on_files_in_per_job_mode(
        self, storage, server, kept
    ):
        assert CachedTable("b", query=QUERY, storage=storage).storage_in(server) == kept

    def test_memory_in_per_job_mode_is_refused_in_one_line(self):
        with pytest.raises(SpecError) as refused:
            CachedTable("b", query=QUERY, storage="memory").storage_in(None)
        assert str(refused.value) == (
            "cached table b: storage 'memory' keeps it in a Spark Connect server's memory, and this task's Spark "
            "connection starts an application per job, whose memory ends with it: use storage 'auto' or 'files', or "
            "a connection of type spark_connect"
        )

    def test_an_unknown_storage_is_refused_naming_the_known_ones(self):
        with pytest.raises(SpecError, match=r"cached table b: storage 'disk' is not one of auto, memory, files"):
            CachedTable("b", query=QUERY, storage="disk")


class TestSplitCachedViews:  # the SQL reader's (tasks.sql_reader)
    def test_cached_views_are_taken_out_and_declared(self):
        statements = (
            "CREATE TEMPORARY VIEW b CACHED AS " + QUERY,
            "-- the consumer\nSELECT max(h) FROM b",
        )

        rest, declared = split_cached_views(statements)

        assert rest == ("-- the consumer\nSELECT max(h) FROM b",)
        assert declared == (CachedTable("b", query=QUERY),)

    @pytest.mark.parametrize(
        "statement",
        [
            f"create or replace temp view b cached as {QUERY}",
            f"/* b */ CREATE TEMPORARY VIEW b\n  CACHED\n  AS\n  {QUERY}",
        ],
    )
    def test_spellings_and_layout_do_not_matter(self, statement):
        assert split_cached_views((statement,))[1] == (CachedTable("b", query=QUERY),)

    def test_the_sql_form_is_the_same_cache_as_the_python_form(self):
        [declared] = split_cached_views((f"CREATE TEMPORARY VIEW b CACHED AS\n    {QUERY}\n",))[1]
        assert declared.fingerprint == CachedTable("b", query=f"\n    {QUERY}\n").fingerprint

    @pytest.mark.parametrize(
        "statement", ["CREATE TEMPORARY VIEW b AS SELECT 1", "CACHE TABLE b AS SELECT 1", "SELECT 'CACHED AS'"]
    )
    def test_other_statements_are_left_alone(self, statement):
        assert split_cached_views((statement,)) == ((statement,), ())

    def test_a_view_declared_twice_is_rejected(self):
        with pytest.raises(SpecError, match="cached view b is declared twice"):
            split_cached_views((f"CREATE TEMP VIEW b CACHED AS {QUERY}", f"CREATE TEMP VIEW b CACHED AS {QUERY}"))

    def test_a_bad_cached_view_is_rejected_with_its_name(self):
        with pytest.raises(SpecError, match="cached table name 'my-b' is invalid"):
            split_cached_views(("CREATE TEMP VIEW my-b CACHED AS SELECT 1",))

    def test_a_cached_view_of_a_command_is_rejected_with_its_name(self):
        with pytest.raises(SpecError, match="cached table b: query must be a query"):
            split_cached_views(("CREATE TEMP VIEW b CACHED AS DROP TABLE a",))


class TestCacheDescriptor:
    def test_it_survives_json_as_a_tagged_object(self):
        data = json.loads(json.dumps(descriptor().to_dict()))

        assert data["type"] == DESCRIPTOR_TYPE and isinstance(data["partitions"], list)
        assert is_descriptor(data) and CacheDescriptor.from_dict(data) == descriptor()

    def test_rows_and_bytes_add_up_its_partitions(self):
        assert (descriptor().rows, descriptor().bytes) == (15, 160)

    def test_a_copy_kept_in_memory_gives_its_rows_and_bytes_whole_and_survives_json(self):
        in_memory = descriptor(**MEMORY_COPY)

        assert (in_memory.in_memory, in_memory.rows, in_memory.bytes) == (True, 50, 4096)
        assert CacheDescriptor.from_dict(json.loads(json.dumps(in_memory.to_dict()))) == in_memory
        assert "(50 rows, 4,096 bytes in memory)" in in_memory.describe()

    def test_a_descriptor_of_an_earlier_release_is_a_copy_on_files(self):
        data = descriptor().to_dict()
        for field in ("storage", "server", "memory_rows", "memory_bytes"):
            del data[field]
        assert CacheDescriptor.from_dict(data) == descriptor() and not descriptor().in_memory

    def test_a_copy_a_job_kept_in_memory_becomes_a_descriptor_naming_the_server(self):
        report = {
            "location": MEMORY_COPY["location"],
            "written": {"storage": "memory", "schema": "{}", "rows": 50, "bytes": 4096},
        }
        kept = descriptor_of_copy("b", "f" * 16, report, OWNER, "2026-11-27T10:00:00+00:00", "spark_connect")

        assert kept is not None and (kept.in_memory, kept.server, kept.partitions) == (True, "spark_connect", ())
        assert (kept.rows, kept.bytes, kept.format) == (50, 4096, "memory")

    @pytest.mark.parametrize("value", [{"name": "b"}, {"type": "other"}, [], "b", None])
    def test_other_values_are_not_descriptors(self, value):
        assert not is_descriptor(value)
        with pytest.raises(SpecError, match="not a descriptor"):
            CacheDescriptor.from_dict(value)

    def test_a_malformed_descriptor_is_rejected(self):
        data = descriptor().to_dict()
        del data["partitions"]
        with pytest.raises(SpecError, match="malformed"):
            CacheDescriptor.from_dict(data)

    def test_a_written_copy_becomes_a_descriptor_and_a_read_one_does_not(self):
        table = CachedTable("b", query=QUERY)
        report = {
            "status": "miss",
            "location": "file:///cache/x",
            "written": {"schema": "{}", "partitions": [{"file": "p", "rows": 1, "bytes": 2, "crc32": 3}]},
        }

        made = descriptor_of_copy("b", table.fingerprint, report, OWNER, "2026-11-22T10:00:00+00:00")

        assert made.partitions == (CachePartition("p", 1, 2, 3),) and made.owner == OWNER
        assert descriptor_of_copy("b", table.fingerprint, {"status": "hit"}, OWNER, "now") is None


class TestCacheLayout:
    def test_a_copy_lies_under_its_run_and_cache_in_a_folder_of_its_own(self):
        table = CachedTable("b", query=QUERY)
        run = run_folder("s3://bucket/cache/", "flip36", "manual__2026-11-22T10:00:00+00:00")

        first, second = copy_folder(run, table, OWNER), copy_folder(run, table, OWNER)

        assert run.startswith("s3://bucket/cache/flip36__") and ":" not in run.removeprefix("s3://")
        assert first.startswith(f"{run}/{cache_folder_name(table)}/max_b__-1__2__") and first != second
        assert cache_name(cache_folder_name(table)) == "b"

    def test_a_copy_kept_in_memory_is_located_by_its_application_and_view(self):
        location = memory_location("app-1", "global_temp.spark_tables_b_x")
        assert location == "memory:app-1/global_temp.spark_tables_b_x"
        assert memory_parts(location) == ("app-1", "global_temp.spark_tables_b_x")

    def test_each_try_keeps_its_copy_in_memory_under_a_view_of_its_own(self):
        table = CachedTable("b", query=QUERY)
        first, second = memory_view(table), memory_view(table)
        assert first.startswith(f"spark_tables_b_{table.fingerprint}_") and first != second

    def test_runs_of_other_dags_and_ids_get_other_folders(self):
        folders = {run_folder("/c", dag, run) for dag in ("d", "d2") for run in ("r:1", "r_1")}
        assert len(folders) == 4


class TestJobSpecCaches:
    def test_cache_uses_survive_the_spec_round_trip(self):
        use = CacheUse(table=CachedTable("b", query=QUERY), registered=(descriptor(),), location="file:///c/new")
        spec = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri="file:///r.json", caches=(use,))

        assert JobSpec.from_json(spec.to_json()) == spec

    def test_a_use_kept_in_memory_survives_the_spec_round_trip(self):
        in_memory = descriptor(**MEMORY_COPY)
        use = CacheUse(CachedTable("b", query=QUERY), (in_memory,), "spark_tables_b_x_0001", storage="memory")
        spec = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri="file:///r.json", caches=(use,))

        assert JobSpec.from_json(spec.to_json()) == spec

    def test_a_cached_table_given_twice_is_rejected(self):
        use = CacheUse(table=CachedTable("b", query=QUERY), registered=(), location="file:///c/new")
        with pytest.raises(SpecError, match=r"\['b'\] given more than once"):
            JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri="file:///r.json", caches=(use, use))


class TestParseSize:
    @pytest.mark.parametrize(
        ("text", "size"),
        [("500000", 500_000), ("800 MB", 800_000_000), ("10 GiB", 10 * 2**30), ("1.5 KiB", 1536), ("3 bytes", 3)],
    )
    def test_units(self, text, size):
        assert parse_size(text, "quota") == size

    @pytest.mark.parametrize("text", ["", "ten", "10 XB", "-1"])
    def test_what_is_not_a_size_is_rejected_by_name(self, text):
        with pytest.raises(SpecError, match=f"quota {text!r} is not a size"):
            parse_size(text, "quota")
