"""The job spec: what the Airflow side hands to the bundled Spark driver, as one JSON document."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_tables.core.cache.descriptor import CacheDescriptor
from spark_tables.core.cache.table import FILES, CachedTable
from spark_tables.core.errors import SpecError
from spark_tables.core.job_kind import Job
from spark_tables.core.kinds import KINDS, kind_of

SPEC_VERSION = 1
#: Names of the settings that hold a secret: those Spark's default ``spark.redaction.regex`` hides, API keys
#: (OpenLineage's ``spark.openlineage.transport.auth.apiKey``), JAAS configurations (Kafka's SASL passwords) and the
#: executors' AWS keys (``spark.executorEnv.AWS_ACCESS_KEY_ID``: ``core/object_storage.py``).
SECRET_PATTERN = r"(?i)secret|password|token|access[._]?key|api[.]?key|jaas"
SECRET_NAME = re.compile(SECRET_PATTERN)
#: The fields of a job's parts that hold a connection's arguments (``holds_connection``).
CONNECTION_FIELDS = ("connection", "connections", "kafka_connections")


@dataclass(frozen=True)
class CacheUse:
    """A cached table the job reads as a temporary view: the copies the run has registered of it that this job can
    read, oldest first, and where the job keeps a new copy if none of them is whole: with ``storage`` files, the
    folder it writes; with memory, the global temporary view it caches (``core.cache.layout.memory_view``)."""

    table: CachedTable
    registered: tuple[CacheDescriptor, ...]
    location: str
    storage: str = FILES

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table.to_dict(),
            "registered": [descriptor.to_dict() for descriptor in self.registered],
            "location": self.location,
            "storage": self.storage,
        }

    @classmethod
    def from_dict(cls, data: Any) -> CacheUse:
        if not isinstance(data, dict) or set(data) != {"table", "registered", "location", "storage"}:
            raise SpecError("job spec: each cache must be an object with table, registered, location and storage")
        return cls(
            table=CachedTable.from_dict(data["table"]),
            registered=tuple(CacheDescriptor.from_dict(d) for d in data["registered"]),
            location=data["location"],
            storage=data["storage"],
        )


@dataclass(frozen=True)
class JobSpec:
    """One job, the cached tables it reads, and where its result goes.

    ``result_uri`` is a file URI both sides reach (local folder in client mode, shared storage in cluster
    mode). ``watch_pid`` is the Airflow task process in client mode: the driver stops itself if it dies.
    ``session_conf`` is Spark conf the driver sets on its session before it starts, for settings that hold a
    secret (the metastore's password): spark-submit's ``--conf`` would put them on a command line. ``durable``: the
    driver outlives the task process (``core/durable_job.py``): it says when its session started, beside its result.
    ``shared_folders`` are the folders the job's executors write and its driver reads, by the setting that names
    each (``[spark_tables] cache_uri``, say): on a cluster the driver checks that they are shared before the work.
    """

    job: Job
    result_uri: str
    watch_pid: int | None = None
    caches: tuple[CacheUse, ...] = ()
    session_conf: Mapping[str, str] = field(default_factory=dict)
    durable: bool = False
    shared_folders: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [use.table.name for use in self.caches]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise SpecError(f"cached table(s) {repeated} given more than once: name each cached table once")
        if not isinstance(self.session_conf, Mapping) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in self.session_conf.items()
        ):
            raise SpecError("job spec: session_conf must map Spark setting names to string values")
        object.__setattr__(self, "session_conf", dict(self.session_conf))
        if not isinstance(self.shared_folders, Mapping) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in self.shared_folders.items()
        ):
            raise SpecError("job spec: shared_folders must map setting names to folder URIs")
        object.__setattr__(self, "shared_folders", dict(self.shared_folders))

    @property
    def carries_credentials(self) -> bool:
        """Whether any part of the spec holds a secret (a password, a token), which must not go on a command line."""
        return holds_secret([self.job, self.session_conf, *self.caches])

    @property
    def holds_connections(self) -> bool:
        """Whether the spec holds a database connection's arguments (a lookup table's, a sink's): they go to the
        driver in the spec file, as ``PostgresHook`` builds them, never on a command line, password or not."""
        return holds_connection(self.job)

    def to_json(self) -> str:
        document = {
            "version": SPEC_VERSION,
            "kind": self.job.kind,
            "job": dataclasses.asdict(self.job),
            "result_uri": self.result_uri,
            "watch_pid": self.watch_pid,
            "caches": [use.to_dict() for use in self.caches],
        }
        if self.session_conf:
            document["session_conf"] = self.session_conf
        if self.durable:
            document["durable"] = True
        if self.shared_folders:
            document["shared_folders"] = self.shared_folders
        return json.dumps(document)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise SpecError(f"job spec is not valid JSON ({err})") from None
        if not isinstance(data, dict):
            raise SpecError(f"job spec must be a JSON object, not {type(data).__name__}")
        if data.get("version") != SPEC_VERSION:
            raise SpecError(f"job spec version {data.get('version')!r} is not {SPEC_VERSION}: upgrade the provider")
        if not isinstance(data.get("result_uri"), str) or not data["result_uri"]:
            raise SpecError("job spec has no result_uri: say where the driver writes its result")
        return cls(
            job=job_from_dict(data.get("kind"), data.get("job")),
            result_uri=data["result_uri"],
            watch_pid=data.get("watch_pid"),
            caches=tuple(CacheUse.from_dict(use) for use in data.get("caches", [])),
            session_conf=data.get("session_conf", {}),
            durable=data.get("durable") is True,
            shared_folders=data.get("shared_folders", {}),
        )


def holds_secret(part: Any) -> bool:
    """Whether ``part`` holds a secret, at any depth: a part that says so (a ``carries_credentials`` of its own), or
    a non-empty string under a name ``SECRET_NAME`` matches (a dataclass field, a mapping key such as a connection's
    ``password`` or a Spark setting's ``...ConnectionPassword``)."""
    says = getattr(part, "carries_credentials", None)
    if isinstance(says, bool):
        return says
    if dataclasses.is_dataclass(part) and not isinstance(part, type):
        named = ((f.name, getattr(part, f.name)) for f in dataclasses.fields(part))
    elif isinstance(part, Mapping):
        named = ((str(key), value) for key, value in part.items())
    elif isinstance(part, list | tuple | set | frozenset):
        return any(holds_secret(item) for item in part)
    else:
        return False
    return any(
        (isinstance(value, str) and value and SECRET_NAME.search(name)) or holds_secret(value) for name, value in named
    )


def holds_connection(part: Any) -> bool:
    """Whether ``part`` holds a non-empty field ``connection``, ``connections`` or ``kafka_connections`` (a Kafka
    connection's brokers and settings), at any depth of its dataclasses."""
    if not dataclasses.is_dataclass(part) or isinstance(part, type):
        return isinstance(part, list | tuple) and any(holds_connection(item) for item in part)
    return any(
        bool(value) if field.name in CONNECTION_FIELDS else holds_connection(value)
        for field in dataclasses.fields(part)
        if (value := getattr(part, field.name)) is not None
    )


def job_from_dict(kind: Any, fields: Any) -> Job:
    described = kind_of(kind)
    if described is None:
        raise SpecError(f"unknown job kind {kind!r}: use one of {sorted(KINDS)}")
    job_class = described.job
    if not isinstance(fields, dict):
        raise SpecError(f"{kind} job: its fields must be a JSON object")
    known = {f.name for f in dataclasses.fields(job_class)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise SpecError(f"{kind} job: unknown field(s) {unknown}: use only {sorted(known)}")
    missing = sorted(
        f.name
        for f in dataclasses.fields(job_class)
        if f.name not in fields and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    if missing:
        raise SpecError(f"{kind} job: missing field(s) {missing}")
    return job_class(**fields)
