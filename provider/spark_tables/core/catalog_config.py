"""Where tables live: Spark's Hive-compatible catalog backed by an embedded Derby or a PostgreSQL metastore.

Both produce the Spark configuration that makes tables outlive the application that wrote them: ``spark_conf``,
which spark-submit gets on its command line, and ``secret_conf``, the settings that hold a secret (the metastore's
password), which go to the driver in the job spec's private file and never on a command line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from spark_tables.core.errors import SpecError
from spark_tables.core.jvm_jars import POSTGRES_JDBC_DRIVER
from spark_tables.core.postgres import jdbc_url
from spark_tables.core.table_format.formats import (
    DEFAULT_TABLE_FORMATS,
    default_format_conf,
    formats_conf,
    table_formats,
)

#: Where a catalog's table formats are set: the catalog connection's extra (``hooks/catalog.py``).
FORMATS_SETTING = "the catalog connection's extra 'table-formats'"
#: Where a catalog's default format is set.
DEFAULT_FORMAT_SETTING = "the catalog connection's extra 'default-format'"
#: The metastore property that holds the database password.
PASSWORD_PROPERTY = "javax.jdo.option.ConnectionPassword"


def _absolute_uri(location: str) -> str:
    """A warehouse location as a URI: local paths become absolute ``file:`` URIs, URIs stay as given."""
    if "://" in location or location.startswith("file:"):
        return location
    return "file:" + quote(os.path.abspath(location))


class _TableFormatsLoaded:
    """What both catalogs say of their table formats: the formats their applications load (``table_formats``, with
    their jars and session settings) and the one a table without ``USING`` is made in (``default_format``)."""

    table_formats: tuple[str, ...]
    default_format: str | None

    def _check_table_formats(self) -> None:
        self._table_formats_conf()

    def _table_formats_conf(self) -> dict[str, str]:
        return {
            **formats_conf(table_formats(self.table_formats, FORMATS_SETTING)),
            **default_format_conf(self.default_format, self.table_formats, DEFAULT_FORMAT_SETTING),
        }

    @property
    def jars(self) -> tuple[str, ...]:
        """The jars its applications load, for their driver and executors: its table formats'."""
        return _format_jars(self.table_formats)

    def check_loads(self, names: tuple[str, ...]) -> None:
        """Fail in one line if a job makes tables in a format this catalog does not load, before its spark-submit."""
        missing = next((name for name in names if name not in self.table_formats), None)
        if missing is not None:
            coordinates = ", ".join(table_formats((missing,), FORMATS_SETTING)[0].coordinates)
            raise SpecError(
                f'table format {missing} is not loaded by this catalog: add "{missing}" to {FORMATS_SETTING}, which '
                f"gives Spark {coordinates} and its session catalog (docs/table-formats.md)"
            )

    def _hive_conf(self, warehouse: str) -> dict[str, str]:
        return {
            "spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": _absolute_uri(warehouse),
            **self._table_formats_conf(),
        }


def _format_jars(formats: tuple[str, ...]) -> tuple[str, ...]:
    """The jars of ``formats``, each checked to be a file here."""
    loaded = table_formats(formats, FORMATS_SETTING)
    for table_format in loaded:
        table_format.check_jars(FORMATS_SETTING)
    return tuple(jar for table_format in loaded for jar in table_format.jars)


@dataclass(frozen=True)
class EmbeddedCatalog(_TableFormatsLoaded):
    """Derby metastore and warehouse folder under one home folder; one Spark application at a time."""

    home: str
    #: The table formats its applications load (``core.table_format``): their jars and session settings.
    table_formats: tuple[str, ...] = DEFAULT_TABLE_FORMATS
    #: The format of a table made without ``USING``; None: Spark's (parquet).
    default_format: str | None = None
    exclusive = True
    driver_class_path = None

    def __post_init__(self) -> None:
        if not self.home or "://" in self.home or self.home.startswith("file:"):
            raise SpecError(f"embedded catalog home {self.home!r} must be a local folder path")
        object.__setattr__(self, "home", os.path.abspath(self.home))
        self._check_table_formats()

    @property
    def warehouse(self) -> str:
        return os.path.join(self.home, "warehouse")

    @property
    def metastore_path(self) -> str:
        return os.path.join(self.home, "metastore_db")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.home, "metastore.lock")

    def spark_conf(self) -> dict[str, str]:
        return {
            **self._hive_conf(self.warehouse),
            "spark.hadoop.javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={self.metastore_path};create=true"
            ),
            "spark.driver.extraJavaOptions": f"-Dderby.stream.error.file={os.path.join(self.home, 'derby.log')}",
        }

    def secret_conf(self) -> dict[str, str]:
        """None: Derby has no password."""
        return {}

    def describe(self) -> str:
        return f"embedded Derby metastore at {self.metastore_path}, warehouse {self.warehouse}"

    def in_use_error(self) -> str:
        """The one line of a job that found the metastore booted by another application (``says_derby_in_use``)."""
        return (
            f"the embedded Derby metastore {self.metastore_path} is in use by another Spark application: run one at a "
            "time, or configure a PostgreSQL metastore (docs/configuration.md)"
        )


#: Derby's words for a database another JVM has booted (XSDB6), or the failure to start it that wraps them (XJ040).
_DERBY_IN_USE = ("ERROR XSDB6", "ERROR XJ040", "Another instance of Derby may have already booted the database")


def says_derby_in_use(line: str) -> bool:
    """Whether a line of a driver's log says its embedded Derby metastore is booted by another application."""
    return any(marker in line for marker in _DERBY_IN_USE)


@dataclass(frozen=True)
class PostgresMetastore(_TableFormatsLoaded):
    """Hive metastore schema in a PostgreSQL database: any number of applications at once."""

    host: str
    database: str
    warehouse: str
    port: int = 5432
    user: str = "postgres"
    password: str = field(default="", repr=False)  # no log line or error message shows it
    jdbc_driver_jar: str = POSTGRES_JDBC_DRIVER
    #: libpq's other connection arguments: the catalog connection's extras that PostgresHook passes on (``sslmode``,
    #: ``options``, ...); pgjdbc's counterparts of them go into ``jdbc_url``.
    parameters: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The table formats its applications load (``core.table_format``): their jars and session settings.
    table_formats: tuple[str, ...] = DEFAULT_TABLE_FORMATS
    #: The format of a table made without ``USING``; None: Spark's (parquet).
    default_format: str | None = None
    exclusive = False

    def __post_init__(self) -> None:
        if not self.host or not self.database:
            raise SpecError("PostgreSQL metastore: the catalog connection needs a host and a schema (database)")
        if not self.warehouse:
            raise SpecError(
                "PostgreSQL metastore: set the catalog connection's extra 'warehouse' to a folder or URI "
                "that every Spark application reaches"
            )
        self._check_table_formats()

    def connect_args(self) -> dict[str, Any]:
        """The metastore database's libpq connection arguments, password included."""
        args = {"host": self.host, "port": self.port, "dbname": self.database, "user": self.user, **self.parameters}
        if self.password:
            args["password"] = self.password
        return args

    @property
    def jdbc_url(self) -> str:
        """The metastore's JDBC URL, with the pgjdbc properties of ``parameters`` but no secret."""
        return jdbc_url(self.connect_args(), with_properties=True)

    @property
    def driver_class_path(self) -> str:
        return self.jdbc_driver_jar

    def metastore_properties(self) -> dict[str, str]:
        """The DataNucleus settings shared by Spark's Hive client and the SchemaTool that creates the schema."""
        return {
            "javax.jdo.option.ConnectionURL": self.jdbc_url,
            "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "javax.jdo.option.ConnectionUserName": self.user,
            PASSWORD_PROPERTY: self.password,
            "datanucleus.identifierFactory": "datanucleus1",
            "datanucleus.rdbms.useLegacyNativeValueStrategy": "true",
        }

    def spark_conf(self) -> dict[str, str]:
        """The settings spark-submit may show on its command line: all but the password (``secret_conf``)."""
        secret = self.secret_conf()
        conf = self._hive_conf(self.warehouse)
        hadoop = {f"spark.hadoop.{key}": value for key, value in self.metastore_properties().items()}
        conf.update({key: value for key, value in hadoop.items() if key not in secret})
        # The schema is created up front by SchemaTool; lazy creation deadlocked on PostgreSQL.
        conf["spark.hadoop.hive.metastore.schema.verification"] = "false"
        conf["spark.hadoop.datanucleus.schema.autoCreateAll"] = "false"
        return conf

    def secret_conf(self) -> dict[str, str]:
        """The password, for the driver to set on its session before it starts (``spark.hadoop.*`` then reaches the
        Hive client): a command line is visible to every user of the machine. Empty without a password."""
        return {f"spark.hadoop.{PASSWORD_PROPERTY}": self.password} if self.password else {}

    def describe(self) -> str:
        return f"PostgreSQL metastore {self.host}:{self.port}/{self.database}, warehouse {self.warehouse}"


Catalog = EmbeddedCatalog | PostgresMetastore
