"""DB-API connections to the proxy, optionally targeted at one shard (`keyspace:shard`).

Statements (schema probes, routed INSERT batches) go through mysqlclient (C) when it is
installed, PyMySQL (a core dependency) otherwise. Reads use PyMySQL for the handshake only:
``text_rows`` then reads the row packets off its socket and cuts them into Arrow columns.
"""

from __future__ import annotations

from typing import Any

import pymysql

from proxy.addresses import is_loopback
from proxy.spark.options import ProxyAddress

try:  # pragma: no branch - which driver is installed decides
    import MySQLdb as _mysqlclient  # type: ignore[import-untyped]  # mysqlclient ships no type information
except ImportError:  # mysqlclient is optional
    _mysqlclient = None


def shard_target(keyspace: str, shard: str | None) -> str:
    """The database name that makes a proxy session send SQL verbatim to one shard."""
    return keyspace if shard is None else f"{keyspace}:{shard}"


def connect(address: ProxyAddress, database: str, *, autocommit: bool = True) -> Any:
    """A connection to the proxy using `database` (a keyspace or `keyspace:shard`)."""
    if _mysqlclient is not None:
        return _mysqlclient.connect(**_connection_kwargs(address, database, autocommit))
    return connect_for_rows(address, database, autocommit=autocommit)


def connect_for_rows(address: ProxyAddress, database: str, *, autocommit: bool = True) -> pymysql.Connection:
    """A PyMySQL connection, whose socket ``text_rows.query_record_batches`` reads from."""
    # PyMySQL otherwise prefers TLS and builds a fresh SSL context (loading the system's CA
    # store, ~0.1 s) on every connect; over loopback TLS protects nothing.
    return pymysql.connect(**_connection_kwargs(address, database, autocommit), ssl_disabled=is_loopback(address.host))


def _connection_kwargs(address: ProxyAddress, database: str, autocommit: bool) -> dict[str, Any]:
    return {
        "host": address.host,
        "port": address.port,
        "user": address.user,
        "password": address.password,
        "database": database,
        "charset": "utf8mb4",
        "autocommit": autocommit,
    }
