"""DB-API connections to the proxy, optionally targeted at one shard (`keyspace:shard`).

mysqlclient (C) is used when installed: it decodes rows several times faster than PyMySQL,
which is what makes a per-shard read keep up with Spark's JDBC reader. PyMySQL (a core
dependency) is the fallback. Both are asked for raw values (no conversions): the readers turn
whole columns into Arrow arrays at once, which is faster and exact (DECIMAL text -> decimal128).
"""

from __future__ import annotations

from typing import Any

from proxy.spark.options import ProxyAddress

try:  # pragma: no branch - which driver is installed decides
    import MySQLdb as _mysqlclient
    import MySQLdb.cursors as _mysqlclient_cursors
except ImportError:  # mysqlclient is optional
    _mysqlclient = None
    _mysqlclient_cursors = None


def shard_target(keyspace: str, shard: str | None) -> str:
    """The database name that makes a proxy session send SQL verbatim to one shard."""
    return keyspace if shard is None else f"{keyspace}:{shard}"


def connect(address: ProxyAddress, database: str, *, autocommit: bool = True, raw: bool = False) -> Any:
    """A connection to the proxy using `database` (a keyspace or `keyspace:shard`).

    raw=True returns every value undecoded (str/bytes), for the Arrow column builders."""
    if _mysqlclient is not None:
        kwargs: dict[str, Any] = {
            "host": address.host,
            "port": address.port,
            "user": address.user,
            "password": address.password,
            "database": database,
            "charset": "utf8mb4",
            "autocommit": autocommit,
        }
        if raw:
            kwargs["conv"] = {}
        return _mysqlclient.connect(**kwargs)
    import pymysql

    return pymysql.connect(
        host=address.host,
        port=address.port,
        user=address.user,
        password=address.password,
        database=database,
        charset="utf8mb4",
        autocommit=autocommit,
        conv={} if raw else None,
    )


def streaming_cursor(conn: Any) -> Any:
    """An unbuffered cursor: rows come off the socket as they are fetched, not all at once."""
    if _mysqlclient_cursors is not None and isinstance(conn, _mysqlclient.connections.Connection):
        return conn.cursor(_mysqlclient_cursors.SSCursor)
    import pymysql.cursors

    return conn.cursor(pymysql.cursors.SSCursor)


def quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
