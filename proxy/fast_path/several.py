"""An autocommit write reaching several shards, on the fast path (``FastRoute.several``).

What ``Executor._atomic_statement`` does for such a statement of a ``multi`` session, without
the command loop and the planning: the session's implicit transaction (``ShardTransaction``,
``implicit=True``), each shard's statement sent at once with its deferred BEGIN
(``SessionVCursor.execute_multi``: every shard's answer awaited before the first error is
raised), messaging told of the write inside it (``ProxySession.wrote``), then the shards'
COMMITs one after another (``ProxySession.commit``) — or, on any error, the ROLLBACK of every
shard and that error. The normal path's own objects do the work, so the semantics (and the
shards' round trips) are the normal path's; what is saved is its command loop, executor
dispatch, plan lookup and Result writing. An ack of a message table's rows is the exception, as
on the normal path (``Executor._ack_per_shard``): one autocommit UPDATE per shard.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy.errors import ProxyError
from proxy.messaging.dml import MessageDml, acked_ids

if TYPE_CHECKING:
    from proxy.engine.result import Result
    from proxy.fast_path.routing import FastRoute
    from proxy.session import ProxySession

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Summed:
    """The statement's answer, as ``proxy.engine.insert`` / ``proxy.engine.dml`` sum their shards'."""

    affected_rows: int = 0
    insert_id: int = 0
    warnings: int = 0


async def run_several(session: ProxySession, route: FastRoute, sql: str) -> Summed:
    """Run ``route``'s shard statements in the session's implicit transaction; raises the
    normal path's error (everything rolled back) when one fails."""
    queries = route.several
    assert queries is not None and session.tx is None
    if route.acks_table is not None and (ack := acked_ids(sql)) is not None:
        acked = MessageDml("ack", route.keyspace, route.acks_table, ack.ids)
        return await _ack_per_shard(session, route, queries, acked)
    mark = ""
    if route.inserted_table is not None:
        # Marked as the process's own (proxy/messaging/own_mark.py), as Executor._own_insert
        # sends it; a failed COMMIT polls (ProxySession.commit).
        mark = session.state.messaging.own_mark(route.keyspace, route.inserted_table)
        if mark:
            queries = [(shard, mark + query) for shard, query in queries]
    vcursor = session.vcursor
    vcursor.reached.clear()  # as Executor._write_holding: the shards this statement reaches
    session.begin_transaction(implicit=True)
    try:
        results = await vcursor.execute_multi(route.keyspace, queries)
        write = _message_write(session, route, sql)
        if write is not None:
            session.wrote(route.keyspace, write)
    except BaseException:
        try:
            await session.rollback()
        except ProxyError as e:
            logger.warning("rollback of a failed statement failed", extra={"error": e.message})
        if mark and route.inserted_table is not None:
            # As Executor._own_insert: a shard lost mid-statement leaves its outcome unknown.
            session.state.messaging.in_doubt(route.keyspace, route.inserted_table, [s for s, _ in queries])
        raise
    await session.commit()
    return _summed(route, results)


async def _ack_per_shard(
    session: ProxySession, route: FastRoute, queries: list[tuple[str, str]], ack: MessageDml
) -> Summed:
    """An ack of a message table's rows on several shards: one autocommit UPDATE per shard
    (``Executor._ack_per_shard``: Vitess's MessageAck, per shard, not atomic across shards)."""
    vcursor = session.vcursor
    vcursor.reached.clear()
    results = await vcursor.execute_multi(route.keyspace, queries)  # outside a transaction: each autocommit
    session.wrote(route.keyspace, ack)
    return _summed(route, results)


def _summed(route: FastRoute, results: list[Result]) -> Summed:
    out = Summed()
    for r in results:
        out.affected_rows += r.affected_rows
        out.warnings += r.warnings
        if route.keyword == "insert" and not out.insert_id and r.insert_id:
            out.insert_id = r.insert_id  # proxy.engine.insert: the first shard's that has one
    return out


def message_write(
    session: ProxySession, route: FastRoute, sql: str, inserted: Callable[[str], MessageDml]
) -> MessageDml | None:
    """Executor._message_write for a fast-path write: an ack's ids read from its text; an
    INSERT into a message table as ``inserted(table)`` describes it (the statements its shards
    ran, cached from their values at commit: proxy/messaging/inserted.py); None for any other."""
    if route.acks_table is not None:
        ack = acked_ids(sql)
        return None if ack is None else MessageDml("ack", route.keyspace, route.acks_table, ack.ids)
    table = route.inserted_table
    if table is None or not session.state.messaging.is_message_table(route.keyspace, table):
        return None
    return inserted(table)


def _message_write(session: ProxySession, route: FastRoute, sql: str) -> MessageDml | None:
    """``message_write`` of a write to several shards: each shard's statement (``MessageDml.sent_to``)."""
    vcursor = session.vcursor
    return message_write(session, route, sql, lambda table: MessageDml("insert", route.keyspace, table).sent_to(
        route.keyspace, vcursor.reached, vcursor.last_sent))
