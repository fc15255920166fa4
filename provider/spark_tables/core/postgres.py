"""PostgreSQL connection arguments as the jobs get them, and what PostgreSQL's JDBC driver takes of them.

The Airflow side builds the arguments with the postgres provider's ``PostgresHook`` (``hooks/postgres.py``): libpq's
keywords (``host``, ``port``, ``dbname``, ``user``, ``password``, and every connection extra the hook passes on,
such as ``sslmode``, ``sslrootcert`` or ``options``). psycopg takes them as they are; Spark's JDBC reader and the
Hive metastore client reach PostgreSQL through pgjdbc, which takes the keywords ``JDBC_PROPERTIES`` lists under
its own names and has no counterpart for the others (``sslcrl``, ``keepalives_idle``, ``client_encoding``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

#: libpq's keywords that pgjdbc takes too, under its own names; ``host``, ``port`` and ``dbname`` make the URL.
JDBC_PROPERTIES = {
    "user": "user",
    "password": "password",
    "options": "options",
    "sslmode": "sslmode",
    "sslrootcert": "sslrootcert",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "sslpassword": "sslpassword",
    "application_name": "ApplicationName",
    "connect_timeout": "connectTimeout",
    "keepalives": "tcpKeepAlive",
    "gssencmode": "gssEncMode",
    "krbsrvname": "kerberosServerName",
}
#: The keywords whose values are secrets: never in a URL, a log line or an error message.
SECRET_KEYWORDS = ("password", "sslpassword")
DEFAULT_PORT = 5432


def describe(args: Mapping[str, Any]) -> str:
    """``host:port database dbname``: where the arguments lead, for messages (no secret)."""
    return f"{args.get('host')}:{args.get('port', DEFAULT_PORT)} database {args.get('dbname')}"


def jdbc_url(args: Mapping[str, Any], *, with_properties: bool = False) -> str:
    """``jdbc:postgresql://host:port/dbname``; ``with_properties``: the non-secret ``jdbc_properties`` in its query,
    for clients configured by URL alone (the Hive metastore's DataNucleus)."""
    url = f"jdbc:postgresql://{args.get('host')}:{args.get('port', DEFAULT_PORT)}/{quote(str(args.get('dbname')))}"
    if with_properties:
        public = {
            name: value
            for name, value in jdbc_properties(args).items()
            if name not in ("user", *(JDBC_PROPERTIES[keyword] for keyword in SECRET_KEYWORDS))
        }
        if public:
            url += "?" + urlencode(public, quote_via=quote)
    return url


def jdbc_properties(args: Mapping[str, Any]) -> dict[str, str]:
    """pgjdbc's connection properties for the arguments: ``user``, ``password`` and the extras it knows."""
    properties: dict[str, str] = {}
    for keyword, value in args.items():
        name = JDBC_PROPERTIES.get(keyword)
        if name is None or value is None or value == "":
            continue
        if keyword == "keepalives":
            properties[name] = "false" if str(value) == "0" else "true"
        else:
            properties[name] = str(value)
    return properties
