"""Several statements on one shard connection in one round trip.

The statements (each answering a plain OK: XA END, XA PREPARE, XA COMMIT, an INSERT)
are written back to back and their answers read in order afterwards; MySQL servers
execute the commands of a connection one after another, so this is the same as running
them in turn, minus the waiting in between. It is what makes a one-shard twopc commit
(``XA END`` + ``XA COMMIT ... ONE PHASE``) cost one round trip, like ``COMMIT``.

A statement that fails does not stop the later ones (the server runs them anyway):
every answer is read, and the first error is raised. A connection-level failure marks
the connection broken (the pool closes it; the server then rolls back any XA branch on
it that was not prepared).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pymysql
from pymysql.constants import COMMAND
from pymysql.protocol import OKPacketWrapper

from proxy import aiomysql_wire
from proxy.engine.result import Result
from proxy.errors import ER_UNKNOWN_ERROR, ProxyError, ShardUnavailable
from proxy.pools import ShardConnection

_MAX_PAYLOAD = 0xFFFFFF


def _packet(sql: bytes) -> bytes:
    payload = bytes([COMMAND.COM_QUERY]) + sql
    if len(payload) >= _MAX_PAYLOAD:
        raise ProxyError(ER_UNKNOWN_ERROR, "statement too long to pipeline")
    return len(payload).to_bytes(3, "little") + b"\x00" + payload  # sequence id 0: a new command


async def pipeline(
    sc: ShardConnection, statements: Sequence[str], *, return_exceptions: bool = False
) -> list[Result | ProxyError]:
    """Run ``statements`` in one round trip; the first statement error is raised (or, with
    ``return_exceptions``, returned in its place). Connection failures always raise."""
    conn = sc.conn
    await sc.begin_deferred()  # the MM's BEGIN, if no statement has carried it yet
    try:
        # One write for all: one TCP segment on the wire, whatever the socket's options.
        data = b"".join(_packet(sql.encode()) for sql in statements)
        aiomysql_wire.write_commands(conn, data)
    except (pymysql.err.MySQLError, OSError, asyncio.IncompleteReadError) as e:
        sc.broken = True
        raise sc.pool.translate(e, sc) from e
    results: list[Result | ProxyError] = []
    first_error: ProxyError | None = None
    for _ in statements:
        aiomysql_wire.expect_new_answer(conn)  # every answer starts a new packet sequence
        try:
            packet = await aiomysql_wire.read_packet(conn)
        except pymysql.err.MySQLError as e:
            error = sc.pool.translate(e, sc)
            if isinstance(error, ShardUnavailable) or not isinstance(error, ProxyError):
                sc.broken = True
                raise error from e
            first_error = first_error or error
            results.append(error)
            continue
        except (OSError, asyncio.IncompleteReadError) as e:
            sc.broken = True
            raise sc.pool.translate(e, sc) from e
        if not packet.is_ok_packet():
            # Only statements answering OK are pipelined; anything else leaves rows unread.
            sc.broken = True
            raise ProxyError(ER_UNKNOWN_ERROR, f"unexpected result set from shard {sc.pool.name} in a pipelined statement")
        ok = OKPacketWrapper(packet)
        conn.server_status = ok.server_status
        results.append(Result(affected_rows=ok.affected_rows, warnings=ok.warning_count))
    if first_error is not None and not return_exceptions:
        raise first_error
    return results
