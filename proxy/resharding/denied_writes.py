"""Denied writes: stopping writes to a keyspace's tables on the source shards of a switch.

Vitess's SwitchTraffic sets ``DeniedTables`` in the source shards' tablet controls; their tablet
servers then fail every DML on those tables with ``disallowed due to rule: enforce denied tables``
(a FAIL_RETRY rule: vtgate retries or buffers). shardgate has no tablet server in front of the
shards, so the rule lives in the shards themselves: per table three ``BEFORE INSERT/UPDATE/DELETE``
triggers that ``SIGNAL`` that error. Unlike ``read_only``, triggers bind every user (root too),
and they bind only the named tables: the ``_shardgate`` sidecar tables (the journal row, 2PC
decisions, the live vschema) stay writable.

A shard answers a denied write with errno 1105, SQLSTATE HY000 and the message
``disallowed due to rule: enforce denied tables (table t)``; the proxy shows it as Vitess does,
``target: ks.-80.primary: disallowed due to rule: enforce denied tables ...``, and
:func:`is_denied_write_error` recognises it (the proxy holds such writes until the topology
changes, see :mod:`proxy.resharding.write_hold`).

Details that matter:

- ``CREATE TRIGGER`` waits for the metadata locks of open transactions that touched the table,
  and while it waits every new statement on the table queues behind it. So each attempt runs with
  ``lock_wait_timeout = 1`` and is retried until ``timeout_seconds``; past it the deny fails with
  a clear error naming the table (the triggers already created stay: call :func:`allow_writes`).
  A consequence: once a table's triggers exist, no transaction that wrote the table before is
  still open.
- The triggers are created with ``sql_log_bin = 0`` where the user may set it: they are a
  property of this server at this moment, not schema to replicate — the Reshard workflow's
  catch-up and the CDC streams read these binlogs and must not see them. (A user without the
  privilege gets them binlogged; logged as a warning.)
- The reverse replication of a switched reshard must write to the denied tables: a session that
  ran :data:`BYPASS_SQL` passes the triggers (Vitess's VReplication bypasses the query rules the
  same way).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Sequence

from proxy.errors import ER_UNKNOWN_ERROR, ProxyError, ShardError
from proxy.sidecar_tables import SqlRunner, hex_literal, row_text
from sqltext.quoting import quote_identifier, sql_literal

logger = logging.getLogger(__name__)

DENIED_WRITE_ERRNO = ER_UNKNOWN_ERROR
DENIED_WRITE_MESSAGE = "disallowed due to rule: enforce denied tables"
# A session that sets this user variable passes the triggers (the reverse replication stream).
BYPASS_VARIABLE = "@shardgate_allow_denied_writes"
BYPASS_SQL = f"set {BYPASS_VARIABLE} = 1"

_EVENTS = (("insert", "i"), ("update", "u"), ("delete", "d"))
_TRIGGER_PREFIX = "shardgate_deny_"
_LOCK_WAIT_TIMEOUT = 1  # seconds per attempt: a queued CREATE TRIGGER stalls the table's statements
_ER_LOCK_WAIT_TIMEOUT = 1205
_ER_NO_PRIVILEGE = frozenset({1044, 1142, 1227})
_MAX_NAME = 64


def trigger_name(table: str, event: str) -> str:
    """The deny trigger of ``table`` for ``event`` (insert/update/delete): recognisable, at most
    64 characters (a long table name is replaced by a digest)."""
    letter = dict(_EVENTS)[event]
    name = f"{_TRIGGER_PREFIX}{letter}_{table}"
    if len(name) > _MAX_NAME:
        name = f"{_TRIGGER_PREFIX}{letter}_{hashlib.sha1(table.encode()).hexdigest()[:40]}"
    return name


def _signal(table: str) -> str:
    text = sql_literal(f"{DENIED_WRITE_MESSAGE} (table {table})"[:128])  # MESSAGE_TEXT holds 128 characters
    return (
        f"if {BYPASS_VARIABLE} is null then "
        f"signal sqlstate 'HY000' set mysql_errno = {DENIED_WRITE_ERRNO}, message_text = {text}; end if"
    )


def is_denied_write_error(error: BaseException | tuple[int, str]) -> bool:
    """True for the error a denied table answers a write with: a ShardError/ProxyError, a
    pymysql error, or ``(errno, message)``."""
    if isinstance(error, tuple):
        code, message = error
    elif isinstance(error, ShardError):
        code, message = error.code, error.shard_message
    elif isinstance(error, ProxyError):
        code, message = error.code, error.message
    elif isinstance(error, BaseException) and len(error.args) >= 2 and isinstance(error.args[0], int):
        code, message = error.args[0], str(error.args[1])
    else:
        return False
    return code == DENIED_WRITE_ERRNO and DENIED_WRITE_MESSAGE in message


async def _session_value(conn: SqlRunner, name: str) -> str:
    res = await conn.execute(f"select @@session.{name}")
    return row_text(res.rows[0][0])


async def _without_binlog(conn: SqlRunner) -> str | None:
    """Turn binary logging off for this session; the previous value, None when not allowed."""
    before = await _session_value(conn, "sql_log_bin")
    try:
        await conn.execute("set @@session.sql_log_bin = 0")
    except ShardError as e:
        if e.code not in _ER_NO_PRIVILEGE:
            raise
        logger.warning("deny triggers will be binlogged: no privilege to set sql_log_bin", extra={"error": e.message})
        return None
    return before


async def _run_ddl(conn: SqlRunner, statements: Sequence[str], table: str, deadline: float) -> None:
    for sql in statements:
        while True:
            try:
                await conn.execute(sql)
                break
            except ShardError as e:
                if e.code != _ER_LOCK_WAIT_TIMEOUT or time.monotonic() >= deadline:
                    if e.code == _ER_LOCK_WAIT_TIMEOUT:
                        raise ProxyError(
                            ER_UNKNOWN_ERROR,
                            f"changing the denied writes of table {table} timed out: open transactions keep "
                            f"using it ({e.shard_message})",
                        ) from e
                    raise
                logger.info("denied writes: table in use, trying again", extra={"table": table})
                await asyncio.sleep(0.05)


async def _change(conn: SqlRunner, database: str, tables: Sequence[str], deny: bool, timeout_seconds: float) -> None:
    deadline = time.monotonic() + timeout_seconds
    lock_wait = await _session_value(conn, "lock_wait_timeout")
    log_bin = await _without_binlog(conn)
    try:
        await conn.execute(f"set @@session.lock_wait_timeout = {_LOCK_WAIT_TIMEOUT}")
        db = quote_identifier(database)
        for table in tables:
            statements = []
            for event, _ in _EVENTS:
                trigger = f"{db}.{quote_identifier(trigger_name(table, event))}"
                if deny:
                    statements.append(
                        f"create trigger if not exists {trigger} before {event} on {db}.{quote_identifier(table)} "
                        f"for each row {_signal(table)}"
                    )
                else:
                    statements.append(f"drop trigger if exists {trigger}")
            await _run_ddl(conn, statements, table, deadline)
    finally:
        await conn.execute(f"set @@session.lock_wait_timeout = {int(lock_wait)}")
        if log_bin is not None:
            await conn.execute(f"set @@session.sql_log_bin = {int(log_bin)}")
    logger.info("denied writes changed", extra={"database": database, "tables": ",".join(tables), "deny": deny})


async def deny_writes(conn: SqlRunner, database: str, tables: Sequence[str], timeout_seconds: float = 30.0) -> None:
    """Deny INSERT/UPDATE/DELETE on ``tables`` of ``database`` on ``conn``'s shard (idempotent).
    Waits up to ``timeout_seconds`` for open transactions on the tables to end. ``conn``: a
    ``proxy.pools.ShardConnection`` (its errors are ShardErrors); its session's
    ``lock_wait_timeout`` and ``sql_log_bin`` are restored afterwards."""
    await _change(conn, database, tables, True, timeout_seconds)


async def allow_writes(conn: SqlRunner, database: str, tables: Sequence[str], timeout_seconds: float = 30.0) -> None:
    """Undo :func:`deny_writes` (idempotent: tables without deny triggers are left as they are)."""
    await _change(conn, database, tables, False, timeout_seconds)


async def denied_tables(conn: SqlRunner, database: str) -> list[str]:
    """The tables of ``database`` whose writes are denied (they have shardgate's deny triggers)."""
    res = await conn.execute(
        "select distinct event_object_table from information_schema.triggers "
        f"where trigger_schema = {hex_literal(database)} and trigger_name like '{_TRIGGER_PREFIX}%' "
        "order by 1"
    )
    return [row_text(r[0]) for r in res.rows]


__all__ = [
    "BYPASS_SQL", "DENIED_WRITE_ERRNO", "DENIED_WRITE_MESSAGE", "allow_writes", "deny_writes", "denied_tables",
    "is_denied_write_error", "trigger_name",
]
