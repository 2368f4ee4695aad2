"""An autocommit write reaching several shards, on the fast path (``FastRoute.several``).

What ``Executor._atomic_statement`` does for such a statement of a ``multi`` session, without
the command loop and the planning: the session's implicit transaction (``ShardTransaction``,
``implicit=True``), each shard's statement sent at once with its deferred BEGIN
(``SessionVCursor.execute_multi``: every shard's answer awaited before the first error is
raised), messaging told of the write inside it (``ProxySession.wrote``), then the shards'
COMMITs one after another (``ProxySession.commit``) — or, on any error, the ROLLBACK of every
shard and that error. The normal path's own objects do the work, so the semantics (and the
shards' round trips) are the normal path's; what is saved is its command loop, executor
dispatch, plan lookup and Result writing. When every shard has an idle fast-path link with the
session's settings, the same round trips go over those links instead of pooled aiomysql
connections (``_run_on_links``: ~1.2 us less proxy CPU per message in the messaging benchmark,
BENCHMARKS.md "msginsert"). An ack of a message table's rows is the exception, as
on the normal path (``Executor._ack_per_shard``): one autocommit UPDATE per shard.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy import running_statement
from proxy.engine.result import Result
from proxy.errors import ProxyError
from proxy.fast_path.shard_link import OkAnswer, ShardLink, lenenc
from proxy.messaging.dml import MessageDml, acked_ids
from proxy.observability.metrics import record_rollback
from proxy.transaction import commit_failed

if TYPE_CHECKING:
    from proxy.fast_path.routing import FastRoute
    from proxy.fast_path.shard_link import LinkPools, ShardLinks
    from proxy.session import ProxySession

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Summed:
    """The statement's answer, as ``proxy.engine.insert`` / ``proxy.engine.dml`` sum their shards'."""

    affected_rows: int = 0
    insert_id: int = 0
    warnings: int = 0


async def run_several(
    session: ProxySession, route: FastRoute, sql: str, links: LinkPools | None = None,
    keep_failed: Callable[[ShardLink], None] | None = None,
) -> Summed:
    """Run ``route``'s shard statements in the session's implicit transaction; raises the
    normal path's error (everything rolled back) when one fails. With ``links`` (the fast
    path's), an INSERT runs on idle links of the session's settings when every shard has one
    (``_run_on_links``); else on the transaction's pooled connections, as the normal path.
    ``keep_failed`` takes the link whose statement failed (its error is in its session, for
    SHOW ERRORS) instead of its pool."""
    queries = route.several
    assert queries is not None and session.tx is None
    if route.acks_table is not None and (ack := acked_ids(sql)) is not None:
        acked = MessageDml("ack", route.keyspace, route.acks_table, ack.ids)
        return await _ack_per_shard(session, route, queries, acked)
    mark = ""
    if route.inserted_table is not None:
        # Marked as the process's own (proxy/messaging/own_mark.py), as Executor._own_insert
        # sends it; a failed COMMIT polls (ProxySession.commit).
        messaging = session.state.messaging
        mark = messaging.own_mark(route.keyspace, route.inserted_table)
        if mark:
            queries = [(shard, mark + query) for shard, query in queries]
        # Autocommit, alone in its implicit transaction: each shard's rows perhaps written
        # already claimed for that shard's manager (MessagingService.preclaim).
        table = route.inserted_table
        if session.autocommit:
            queries = [(shard, messaging.preclaim(route.keyspace, shard, table, query)) for shard, query in queries]
    vcursor = session.vcursor
    vcursor.reached.clear()  # as Executor._write_holding: the shards this statement reaches
    if links is not None and session.next_tx_isolation is None:
        taken = _take_links(links, route, queries)
        if taken is not None:
            return await _run_on_links(session, route, sql, queries, taken, mark, keep_failed)
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


# The shard's status flag of an open transaction (SERVER_STATUS_IN_TRANS).
_IN_TRANS = 0x0001


def _take_links(
    pools: LinkPools, route: FastRoute, queries: list[tuple[str, str]]
) -> list[tuple[ShardLinks, ShardLink]] | None:
    """An idle link with the session's settings to every shard of ``queries`` (the same the
    normal path's ``apply_settings`` would give a pooled connection), or None: none taken."""
    taken: list[tuple[ShardLinks, ShardLink]] = []
    for shard, _ in queries:
        links = pools.get(route.keyspace, shard)
        link = None if links is None else links.take(route.settings)
        if links is None or link is None:
            for owner, other in taken:
                owner.give(other)
            return None
        taken.append((links, link))
    return taken


async def _on_link(link: ShardLink, sql: str, after_begin: bool = False) -> tuple[bytes, ProxyError | None]:
    """Send ``sql`` on ``link`` as the statement's shard query (reached by KILL QUERY); its
    answer. Cancelled (a kill's grace is over), the link is closed: the shard rolls back."""
    statement = running_statement.current()
    if statement is not None:
        statement.shard_query_started(link)  # raises if that statement was killed
    answer = OkAnswer(asyncio.get_running_loop())
    try:
        link.query(sql.encode(), answer, after_begin=after_begin)
        return await answer.done
    except BaseException:
        if link.busy:
            link.abandon()
        raise
    finally:
        if statement is not None:
            statement.shard_query_ended(link)


def _result_of(ok: bytes) -> Result:
    """The Result of an OK packet (its header included), as ``ShardConnection.execute`` reads it."""
    affected, p = lenenc(ok, 5)
    insert_id, p = lenenc(ok, p)
    return Result(affected_rows=affected, insert_id=insert_id, warnings=int.from_bytes(ok[p + 2 : p + 4], "little"))


async def _run_on_links(
    session: ProxySession, route: FastRoute, sql: str, queries: list[tuple[str, str]],
    taken: list[tuple[ShardLinks, ShardLink]], mark: str, keep_failed: Callable[[ShardLink], None] | None = None,
) -> Summed:
    """``run_several``'s implicit transaction on links, with the normal path's round trips and
    semantics: each shard's statement sent at once after its BEGIN (``begin;<statement>``),
    every answer awaited before the first error is raised (ROLLBACK of the shards that began,
    as ``ShardTransaction.rollback``), then the COMMITs one after another as
    ``ShardTransaction._commit_each`` sends them (a failed one rolls back the rest and names
    them). What is saved is aiomysql's reads and pool (BENCHMARKS.md, "msginsert").
    A link whose transaction may be open when this ends is closed (the shard rolls it back)."""
    vcursor = session.vcursor
    session.begin_transaction(implicit=True)  # as the normal path: wrote() defers to the commit
    tx = session.tx
    assert tx is not None
    begin = tx.begin_sql + ";"  # no newline: a syntax error in the statement still says "at line 1"
    for _, link in taken:
        link.began = False  # set by this statement's answer only (a link killed before it is sent never began)
    failed: ShardLink | None = None  # the link of the shard error raised
    try:
        for shard, query in queries:
            vcursor.reached.add((route.keyspace, shard))
            vcursor.last_sent[(route.keyspace, shard)] = query
        try:
            answers = await asyncio.gather(
                *(_on_link(link, begin + query, after_begin=True) for (_, link), (_, query) in zip(taken, queries, strict=True)),
                return_exceptions=True,
            )
            results: list[Result] = []
            for (_, link), answer in zip(taken, answers, strict=True):
                if isinstance(answer, BaseException):
                    raise answer
                data, error = answer
                if error is not None:
                    failed = link
                    raise error
                results.append(_result_of(data))
            write = _message_write(session, route, sql)
            if write is not None:
                session.wrote(route.keyspace, write)
        except BaseException:
            session.tx, session.after_commit = None, []
            record_rollback()  # as ProxySession.rollback
            for _, link in taken:
                if link.began and not link.busy and not link.broken and link.transport is not None:
                    try:
                        _, error = await _on_link(link, "rollback")
                    except ProxyError as e:
                        error = e
                    if error is not None:
                        link.broken = True  # closed below: the shard rolls back on disconnect
                        logger.warning("rollback of a failed statement failed", extra={"error": error.message})
            if mark and route.inserted_table is not None:
                # As Executor._own_insert: a shard lost mid-statement leaves its outcome unknown.
                session.state.messaging.in_doubt(route.keyspace, route.inserted_table, [s for s, _ in queries])
            raise
        session.tx = None
        events, session.after_commit = session.after_commit, []
        try:
            await _commit_each(route.keyspace, taken)
        except BaseException:
            session.commit_in_doubt(events)
            raise
        for keyspace, dml in events:
            session.state.committed(keyspace, dml)
        return _summed(route, results)
    finally:
        for owner, link in taken:
            if link.shard_status & _IN_TRANS or link.busy:
                link.close()
            elif link is failed and keep_failed is not None and not link.broken:
                keep_failed(link)  # its ROLLBACK leaves the error readable (no table used)
                continue
            owner.give(link)


async def _commit_each(keyspace: str, taken: list[tuple[ShardLinks, ShardLink]]) -> None:
    """``ShardTransaction._commit_each`` on links: COMMIT one shard after another; a failure
    rolls back the shards not yet committed and says which did and did not commit."""
    committed: list[str] = []
    for i, (_, link) in enumerate(taken):
        try:
            _, error = await _on_link(link, "commit")
        except ProxyError as e:
            error = e
        if error is None:
            committed.append(f"{keyspace}/{link.shard}")
            continue
        failed = f"{keyspace}/{link.shard}"
        rest = taken[i + 1:]
        for _, other in rest:
            try:
                _, rolled = await _on_link(other, "rollback")
            except ProxyError as e:
                rolled = e
            if rolled is not None:
                other.broken = True
                logger.warning("rollback failed", extra={"keyspace": keyspace, "shard": other.shard,
                                                         "error": str(rolled)})
        raise commit_failed(error, failed, committed, [f"{keyspace}/{o.shard}" for _, o in rest]) from error


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
