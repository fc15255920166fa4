"""The job spec: what the Airflow side hands to the bundled Spark driver, as one JSON document."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from spark_tables.core.cache_descriptor import CacheDescriptor
from spark_tables.core.cached_table import CachedTable
from spark_tables.core.ctas_job import CtasCleanupJob, CtasJob
from spark_tables.core.errors import SpecError
from spark_tables.core.lookup_job import LookupJoinJob, LookupReloadJob
from spark_tables.core.sql_job import SqlJob

SPEC_VERSION = 1

#: Every job kind the driver runs, by name. Each is a frozen dataclass that validates itself.
JOB_KINDS: dict[str, type] = {
    kind.kind: kind for kind in (SqlJob, CtasJob, CtasCleanupJob, LookupJoinJob, LookupReloadJob)
}

Job = SqlJob | CtasJob | CtasCleanupJob | LookupJoinJob | LookupReloadJob


@dataclass(frozen=True)
class CacheUse:
    """A cached table the job reads as a temporary view: the copies the run has registered of it, oldest first,
    and the folder where the job writes a new copy if none of them is whole."""

    table: CachedTable
    registered: tuple[CacheDescriptor, ...]
    location: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table.to_dict(),
            "registered": [descriptor.to_dict() for descriptor in self.registered],
            "location": self.location,
        }

    @classmethod
    def from_dict(cls, data: Any) -> CacheUse:
        if not isinstance(data, dict) or set(data) != {"table", "registered", "location"}:
            raise SpecError("job spec: each cache must be an object with table, registered and location")
        return cls(
            table=CachedTable.from_dict(data["table"]),
            registered=tuple(CacheDescriptor.from_dict(d) for d in data["registered"]),
            location=data["location"],
        )


@dataclass(frozen=True)
class JobSpec:
    """One job, the cached tables it reads, and where its result goes.

    ``result_uri`` is a file URI both sides reach (local folder in client mode, shared storage in cluster
    mode). ``watch_pid`` is the Airflow task process in client mode: the driver stops itself if it dies.
    """

    job: Job
    result_uri: str
    watch_pid: int | None = None
    caches: tuple[CacheUse, ...] = ()

    def __post_init__(self) -> None:
        names = [use.table.name for use in self.caches]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise SpecError(f"cached table(s) {repeated} given more than once: name each cached table once")

    @property
    def carries_credentials(self) -> bool:
        """Whether the job holds a password (a lookup table's database), which must not go on a command line."""
        lookup = getattr(self.job, "lookup", None)
        return bool(lookup is not None and lookup.source.connection.get("password"))

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": SPEC_VERSION,
                "kind": self.job.kind,
                "job": dataclasses.asdict(self.job),
                "result_uri": self.result_uri,
                "watch_pid": self.watch_pid,
                "caches": [use.to_dict() for use in self.caches],
            }
        )

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
        )


def job_from_dict(kind: Any, fields: Any) -> Job:
    job_class = JOB_KINDS.get(kind)
    if job_class is None:
        raise SpecError(f"unknown job kind {kind!r}: use one of {sorted(JOB_KINDS)}")
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
