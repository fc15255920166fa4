from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import pytest

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.ctas.job import CtasCleanupJob, CtasJob
from spark_tables.core.errors import SpecError
from spark_tables.core.job_spec import SPEC_VERSION, JobSpec, holds_secret, job_from_dict
from spark_tables.core.kinds import KINDS
from spark_tables.core.lookup.job import LookupJoinJob, LookupReloadJob
from spark_tables.core.lookup.table import LookupSpec, SourceTable
from spark_tables.core.plan.job import PlanJob, PlanOptions
from spark_tables.core.sql.job import SqlJob
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.tasks.sql_reader import read_plan_statement


def _spec_document(**overrides) -> str:
    document = {
        "version": SPEC_VERSION,
        "kind": "sql",
        "job": {"statements": ["SELECT 1"], "max_result_rows": 5},
        "result_uri": "file:///tmp/exchange/r.json",
        "watch_pid": None,
    }
    document.update(overrides)
    return json.dumps(document)


@pytest.mark.parametrize("watch_pid", [None, 4242])
def test_spec_survives_a_json_round_trip(watch_pid):
    spec = JobSpec(
        job=SqlJob(statements=("CREATE TABLE t (a INT)", "SELECT 'x;y' AS v"), max_result_rows=7),
        result_uri="s3://bucket/exchange/d__r__t__-1__1.json",
        watch_pid=watch_pid,
    )

    assert JobSpec.from_json(spec.to_json()) == spec


def test_spec_json_names_version_and_kind():
    document = json.loads(JobSpec(job=SqlJob(statements=["SELECT 1"]), result_uri="file:///r.json").to_json())

    assert document["version"] == SPEC_VERSION
    assert document["kind"] == "sql"
    assert document["job"] == {
        # each statement with what the Airflow side read it to be (tasks.sql_reader)
        "statements": [{"text": "SELECT 1", "summary": "SELECT 1", "writes": None, "ctas": None, "plan": None}],
        "max_result_rows": 100,
        "owner": None,
        "sweep": [],
        "plans": None,
        "count_rows": True,
    }


def test_unknown_kind_is_rejected():
    with pytest.raises(SpecError, match="unknown job kind 'flink'"):
        JobSpec.from_json(_spec_document(kind="flink"))


def test_job_kinds_are_sql_ctas_ctas_cleanup_lookups_plans_and_streaming_aggregations():
    assert {name: kind.job for name, kind in KINDS.items()} == {
        "sql": SqlJob,
        "ctas": CtasJob,
        "ctas_cleanup": CtasCleanupJob,
        "lookup_join": LookupJoinJob,
        "lookup_reload": LookupReloadJob,
        "plan": PlanJob,
        "streaming_aggregation": StreamingAggregationJob,
    }


def test_unknown_kind_error_lists_every_kind():
    with pytest.raises(SpecError) as caught:
        JobSpec.from_json(_spec_document(kind="flink"))

    assert (
        "use one of ['ctas', 'ctas_cleanup', 'lookup_join', 'lookup_reload', 'plan', 'sql', 'streaming_aggregation']"
        in str(caught.value)
    )


def test_unknown_job_field_is_rejected_by_name():
    job = {"statements": ["SELECT 1"], "parallelism": 4}

    with pytest.raises(SpecError, match=r"unknown field\(s\) \['parallelism'\]"):
        JobSpec.from_json(_spec_document(job=job))


def test_job_fields_that_are_not_an_object_are_rejected():
    with pytest.raises(SpecError, match="must be a JSON object"):
        JobSpec.from_json(_spec_document(job=["SELECT 1"]))


def test_invalid_job_fields_are_validated_by_the_job_kind():
    with pytest.raises(SpecError, match="statements must be a list"):
        JobSpec.from_json(_spec_document(job={"statements": "SELECT 1"}))


@pytest.mark.parametrize("version", [0, 2, "1", None])
def test_other_spec_versions_are_rejected(version):
    with pytest.raises(SpecError, match="upgrade the provider"):
        JobSpec.from_json(_spec_document(version=version))


def test_missing_version_is_rejected():
    document = json.loads(_spec_document())
    del document["version"]

    with pytest.raises(SpecError, match="version None"):
        JobSpec.from_json(json.dumps(document))


@pytest.mark.parametrize("text", ["", "{", "not json", '{"version": 1,}'])
def test_invalid_json_is_rejected_on_one_line(text):
    with pytest.raises(SpecError, match="not valid JSON") as caught:
        JobSpec.from_json(text)

    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ["[]", "5", "null", '"spec"'])
def test_json_that_is_not_an_object_is_rejected(text):
    # Fails today: from_json builds its message with data.get(...) and raises AttributeError for non-objects.
    with pytest.raises(SpecError):
        JobSpec.from_json(text)


def test_missing_result_uri_is_rejected():
    # Fails today: data["result_uri"] raises KeyError.
    document = json.loads(_spec_document())
    del document["result_uri"]

    with pytest.raises(SpecError):
        JobSpec.from_json(json.dumps(document))


def test_missing_required_job_field_is_rejected():
    # Fails today: SqlJob(**{}) raises TypeError about a missing positional argument.
    with pytest.raises(SpecError):
        job_from_dict("sql", {"max_result_rows": 5})


def _lookup_join(connection: dict) -> LookupJoinJob:
    source = SourceTable(kind="postgres", connection=connection, table="crm.customers", key=("id",))
    lookup = LookupSpec(name="customers", source=source, options={"lookup.cache": "NONE"}, snapshots="file:///s")
    return LookupJoinJob(lookup=lookup, on=("id",), metrics_uri="file:///m", probe="SELECT 1 AS id")


METASTORE_PASSWORD = {"spark.hadoop.javax.jdo.option.ConnectionPassword": "s3cret"}


def test_session_conf_survives_a_json_round_trip():
    spec = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri="file:///r.json", session_conf=METASTORE_PASSWORD)

    assert JobSpec.from_json(spec.to_json()) == spec
    assert JobSpec.from_json(spec.to_json()).session_conf == METASTORE_PASSWORD


def test_a_spec_without_session_conf_is_written_as_before():
    document = json.loads(JobSpec(job=SqlJob(statements=["SELECT 1"]), result_uri="file:///r.json").to_json())

    assert "session_conf" not in document
    assert JobSpec.from_json(_spec_document()).session_conf == {}


def test_shared_folders_survive_a_json_round_trip_and_are_left_out_when_there_are_none():
    folders = {"[spark_tables] cache_uri": "file:///shared/cache"}
    spec = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri="file:///r.json", shared_folders=folders)

    assert JobSpec.from_json(spec.to_json()).shared_folders == folders
    assert "shared_folders" not in json.loads(JobSpec(job=spec.job, result_uri=spec.result_uri).to_json())
    assert JobSpec.from_json(_spec_document()).shared_folders == {}


@pytest.mark.parametrize("folders", [["file:///a"], {"[spark_tables] cache_uri": None}])
def test_shared_folders_must_map_settings_to_uris(folders):
    with pytest.raises(SpecError, match="shared_folders must map setting names to folder URIs"):
        JobSpec.from_json(_spec_document(shared_folders=folders))


@pytest.mark.parametrize("session_conf", [["a", "b"], {"spark.x": 1}, {"spark.x": None}, "spark.x=1"])
def test_session_conf_must_map_names_to_strings(session_conf):
    with pytest.raises(SpecError, match="session_conf must map Spark setting names to string values"):
        JobSpec.from_json(_spec_document(session_conf=session_conf))


@pytest.mark.parametrize(
    ("job", "session_conf"),
    [
        (SqlJob(statements=("SELECT 1",)), METASTORE_PASSWORD),  # the metastore's password
        (_lookup_join({"host": "db", "dbname": "crm", "user": "u", "password": "s3cret"}), {}),  # a lookup table's
        (SqlJob(statements=("SELECT 1",)), {"spark.hadoop.fs.s3a.secret.key": "k"}),
        (SqlJob(statements=("SELECT 1",)), {"spark.hadoop.fs.s3a.access.key": "k"}),
        (SqlJob(statements=("SELECT 1",)), {"spark.some.Token": "t"}),
    ],
    ids=["metastore-password", "lookup-password", "secret-key", "access-key", "token"],
)
def test_a_spec_holding_a_secret_anywhere_carries_credentials(job, session_conf):
    assert JobSpec(job=job, result_uri="file:///r.json", session_conf=session_conf).carries_credentials


@pytest.mark.parametrize(
    ("job", "session_conf"),
    [
        (SqlJob(statements=("SELECT 'password'",)), {}),  # a value, not a setting named like a secret
        (SqlJob(statements=("SELECT 1",)), {"spark.sql.shuffle.partitions": "4"}),
        (SqlJob(statements=("SELECT 1",)), {"spark.hadoop.javax.jdo.option.ConnectionPassword": ""}),
        (_lookup_join({"host": "db", "dbname": "crm", "user": "u"}), {}),
    ],
    ids=["sql", "plain-session-conf", "empty-password", "lookup-without-password"],
)
def test_a_spec_without_a_secret_carries_no_credentials(job, session_conf):
    assert not JobSpec(job=job, result_uri="file:///r.json", session_conf=session_conf).carries_credentials


def test_a_spec_holding_a_connection_says_so_password_or_not():
    """Connection arguments go to the driver in the spec file, never on a command line (issue 25)."""
    lookup = _lookup_join({"host": "db", "dbname": "crm", "user": "u"})
    assert JobSpec(job=lookup, result_uri="file:///r.json").holds_connections
    assert not JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri="file:///r.json").holds_connections


def test_a_lookup_join_of_a_kafka_topic_survives_a_json_round_trip_its_brokers_in_the_spec_file():
    """A Kafka probe's connection holds the brokers (and SASL's JAAS line when it has one): the spec file, too."""
    lookup = _lookup_join({"host": "db", "dbname": "crm", "user": "u"})
    topic = KafkaTopicSource("clicks", "web.clicks", "id INT", conn_id="brokers", on_malformed="skip")
    job = dataclasses.replace(
        lookup,
        probe=None,
        probe_stream=topic,
        output="db.enriched",
        checkpoint="file:///c",
        kafka_connections={"brokers": {"kafka.bootstrap.servers": "b:9092"}},
    )
    spec = JobSpec(job=job, result_uri="file:///r.json")

    read = JobSpec.from_json(spec.to_json())
    assert read == spec and read.job.probe_stream == topic
    assert JobSpec(
        job=dataclasses.replace(job, lookup=_lookup_join({}).lookup), result_uri="file:///r"
    ).holds_connections


@dataclass(frozen=True)
class _Vault:
    handle: str
    carries_credentials: bool


@pytest.mark.parametrize("says", [True, False])
def test_a_part_that_says_whether_it_holds_a_secret_is_believed(says):
    assert holds_secret({"source": [_Vault(handle="token-free", carries_credentials=says)]}) is says


def test_a_secret_is_found_at_any_depth():
    assert holds_secret(({"outer": {"inner": [{"password": "x"}]}},))
    assert not holds_secret(({"outer": {"inner": [{"password": ""}]}},))


def test_a_plan_job_survives_a_json_round_trip_and_its_sink_password_marks_the_spec_secret():
    sink = PostgresUpsertSink(name="counts", conn_id="pg", table="public.counts", key=("shop",))
    job = PlanJob(
        statement=read_plan_statement("EXECUTE PLAN 's3://plans/p.json'"),
        options=PlanOptions(
            configuration={"table.exec.state.ttl": "1 h"},
            postgres_sinks=(sink,),
            connections={"counts": {"host": "db", "port": 5432, "dbname": "d", "user": "u", "password": "s3cret"}},
            checkpoints="file:///checkpoints",
        ),
    )
    spec = JobSpec(job=job, result_uri="file:///r.json")

    assert JobSpec.from_json(spec.to_json()) == spec
    assert spec.carries_credentials
    assert "s3cret" not in repr(job)


def test_a_plan_job_that_executes_needs_its_checkpoints():
    with pytest.raises(SpecError, match=r"executing a plan needs options\.checkpoints"):
        PlanJob(statement=read_plan_statement("COMPILE AND EXECUTE PLAN '/p.json' FOR INSERT INTO t SELECT * FROM s"))
    with pytest.raises(SpecError, match=r"table\.exec\.state\.ttl='soon' is not a duration"):
        explain = read_plan_statement("EXPLAIN PLAN '/p.json'")
        PlanJob(statement=explain, options={"configuration": {"table.exec.state.ttl": "soon"}})
