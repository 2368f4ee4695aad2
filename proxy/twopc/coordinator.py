"""Commit and rollback of a ``twopc`` transaction.

The shard the transaction touches first is its metadata manager (MM; the dtid names it).
Its branch is an ordinary transaction (``START TRANSACTION``): it is never prepared, its
``COMMIT`` is the decision. Every other shard's branch is an XA transaction
(``XA START``), which can be prepared.

Commit, when at most one shard was written (the others were only read): every branch
commits in one phase (``COMMIT``; ``XA END`` + ``XA COMMIT ... ONE PHASE`` sent together):
one round trip, as in ``multi``. A one-shard transaction is a plain transaction throughout.

Several shards written, one round trip per step:

1. in parallel: every other written participant ``XA END`` + ``XA PREPARE``; the MM
   writes its decision record (``state = COMMIT``, the participants) into its own branch;
2. the decision: ``COMMIT`` on the MM. Its writes and the COMMIT record commit together,
   or neither does (Vitess's StartCommit);
3. ``XA COMMIT`` on every prepared participant (and one-phase commits of the branches that
   only read), in parallel; then the record is cleared in the background.

Any participant failing step 1 rolls every branch back (the client gets XA_RBROLLBACK).
If the MM's commit fails or its answer is lost, the decision is read back from the MM
(recording ROLLBACK if there is none); if the MM cannot be reached the outcome is unknown
to the client (error 1180, naming the dtid) and the resolver finishes it once the MM is
back. A participant failing step 3 is left prepared for the resolver: the transaction is
committed (the client gets OK).

Every branch left in doubt is detached (its connection closed) so that a resolver can
finish it: MariaDB lets only the owning connection, or anyone after it disconnected,
commit a prepared branch; an unprepared branch rolls back when its connection closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from proxy.errors import (
    ER_DUP_ENTRY,
    ER_ERROR_DURING_COMMIT,
    ER_XA_RBROLLBACK,
    ProxyError,
    ShardError,
)
from proxy.pools import ShardConnection
from proxy.twopc.manager import TwoPCManager, record_insert
from proxy.twopc.wire import pipeline
from proxy.twopc.xid import ShardKey, xid_sql

if TYPE_CHECKING:
    from proxy.transaction import ShardTransaction

logger = logging.getLogger(__name__)

Branch = tuple[ShardKey, ShardConnection]


def detach(sc: ShardConnection) -> None:
    """Close the connection now: an unprepared branch on it rolls back, a prepared one
    stays for the resolver."""
    sc.broken = True
    sc.conn.close()


async def _all(steps: list[Coroutine[Any, Any, Any]]) -> list[Any]:
    """``asyncio.gather(..., return_exceptions=True)`` with one task fewer: the last step runs
    in the caller's (under load every task is one more wait in the event loop's queue)."""
    if not steps:
        return []
    tasks = [asyncio.ensure_future(step) for step in steps[:-1]]
    try:
        try:
            last = await steps[-1]
        except Exception as e:  # noqa: BLE001 - returned, as gather(return_exceptions=True) does
            last = e
        others = await asyncio.gather(*tasks, return_exceptions=True) if tasks else []
    except BaseException:
        for t in tasks:
            t.cancel()
        raise
    return [*others, last]


def _name(key: ShardKey) -> str:
    return f"{key[0]}/{key[1]}"


class _Branches:
    """The statements that end each branch: plain (the MM) or XA (every other)."""

    def __init__(self, tx: ShardTransaction) -> None:
        assert tx.dtid is not None
        self.dtid = tx.dtid
        self.xa = tx.xa

    def xid(self, key: ShardKey) -> str:
        return xid_sql(self.dtid, key)

    def commit_one_phase(self, key: ShardKey) -> list[str]:
        if key not in self.xa:
            return ["commit"]
        return [f"xa end {self.xid(key)}", f"xa commit {self.xid(key)} one phase"]

    def rollback(self, key: ShardKey) -> list[str]:
        if key not in self.xa:
            return ["rollback"]
        return [f"xa end {self.xid(key)}", f"xa rollback {self.xid(key)}"]


async def commit(tx: ShardTransaction) -> None:
    m = tx.twopc
    assert m is not None
    branches = [(k, sc) for k, sc in tx.conns.items() if k not in tx.plain]
    if not branches:
        return
    b = _Branches(tx)
    writers = [k for k, _ in branches if k in tx.written]
    if len(writers) <= 1:
        await _one_phase(b, branches, writers[0] if writers else None)
        m.counters.commits_one_phase += 1
        return
    await _two_phase(tx, m, b, branches)


async def _one_phase(b: _Branches, branches: list[Branch], writer: ShardKey | None) -> None:
    """At most one branch wrote: each commits in one phase (the readers' commits only end
    their snapshots and release their locks, whatever becomes of the writer's)."""

    async def one(key: ShardKey, sc: ShardConnection) -> ProxyError | None:
        try:
            await pipeline(sc, b.commit_one_phase(key))
        except ProxyError as e:
            detach(sc)  # whatever it did rolls back with the connection (it was never prepared)
            return e
        return None

    errors = await _all([one(k, sc) for k, sc in branches])
    for (key, _), error in zip(branches, errors, strict=True):
        if error is not None and (key == writer or writer is None):
            raise error


async def rollback(tx: ShardTransaction) -> None:
    m = tx.twopc
    assert m is not None
    branches = [(k, sc) for k, sc in tx.conns.items() if k not in tx.plain]
    if not branches:
        return
    await _abort(_Branches(tx), branches, set())
    m.counters.rollbacks += 1


async def _rollback_branch(b: _Branches, key: ShardKey, sc: ShardConnection, prepared: bool) -> None:
    try:
        if prepared:
            await pipeline(sc, [f"xa rollback {b.xid(key)}"])
        else:
            # XA END fails on a branch that ended already, or that a deadlock rolled back:
            # what counts is the rollback.
            results = await pipeline(sc, b.rollback(key), return_exceptions=True)
            if isinstance(results[-1], ProxyError):
                detach(sc)
    except ProxyError:
        detach(sc)


async def _abort(b: _Branches, branches: list[Branch], prepared: set[ShardKey]) -> None:
    await _all([_rollback_branch(b, k, sc, prepared=k in prepared) for k, sc in branches if not sc.broken])
    for _, sc in branches:
        if sc.broken:
            detach(sc)


async def _two_phase(tx: ShardTransaction, m: TwoPCManager, b: _Branches, branches: list[Branch]) -> None:
    assert tx.mm is not None
    dtid, mm_key = b.dtid, tx.mm
    mm_sc = dict(branches).get(mm_key)  # None: the MM's branch failed to begin; it then only holds the record
    # Participants to prepare: the other shards the transaction wrote on. Branches that only
    # read are not prepared: they commit in one phase after the decision (or roll back).
    rms = [(k, sc) for k, sc in branches if k != mm_key and k in tx.written]
    readers = [(k, sc) for k, sc in branches if k != mm_key and k not in tx.written]
    rm_keys = [k for k, _ in rms]
    prepared: set[ShardKey] = set()
    settled = False  # every branch's fate handled (rolled back, committed, or detached)
    m.in_flight.add(dtid)
    try:
        await m.wait_locks()
        try:
            table = await m.sidecar(mm_key)
        except ProxyError as e:
            settled = True
            await _abort(b, branches, prepared)
            m.counters.prepare_failures += 1
            raise _rolled_back(dtid, mm_key, e) from e
        await m.faults.hit("before_prepare", dtid)

        async def prepare(key: ShardKey, sc: ShardConnection) -> None:
            await pipeline(sc, [f"xa end {b.xid(key)}", f"xa prepare {b.xid(key)}"])
            prepared.add(key)

        steps = [prepare(k, sc) for k, sc in rms]
        keys = list(rm_keys)
        if mm_sc is not None:
            record = record_insert(table, dtid, "COMMIT", rm_keys)
            steps.append(pipeline(mm_sc, [record] if mm_key not in b.xa else [record, f"xa end {b.xid(mm_key)}"]))  # type: ignore[arg-type]  # the steps' results are read as a list of outcomes
            keys.append(mm_key)
        failed = [(k, r) for k, r in zip(keys, await _all(steps), strict=True) if isinstance(r, BaseException)]
        if failed:
            settled = True
            await _abort(b, branches, prepared)
            m.counters.prepare_failures += 1
            key, error = failed[0]
            if not isinstance(error, ProxyError):
                raise error
            logger.info("twopc prepare failed: rolled back",
                        extra={"dtid": dtid, "keyspace": key[0], "shard": key[1], "error": error.message})
            raise _rolled_back(dtid, key, error) from error
        await m.faults.hit("after_prepare", dtid)

        if mm_sc is not None:
            state, cause = await _commit_mm(m, b, mm_key, mm_sc, rm_keys)
        else:
            state, cause = await _record_decision(m, dtid, mm_key, table, rm_keys)
        if state == "ROLLBACK":
            settled = True
            await _abort(b, rms + readers, prepared)
            m.counters.prepare_failures += 1
            raise ProxyError(
                ER_XA_RBROLLBACK,
                f"distributed transaction {dtid} rolled back: the decision on {_name(mm_key)} failed ({cause})",
            )
        if state is None:
            settled = True
            for _, sc in rms + readers:
                detach(sc)
            m.counters.commits_outcome_unknown += 1
            logger.warning("twopc outcome unknown", extra={"dtid": dtid, "mm": _name(mm_key), "error": cause})
            raise ProxyError(
                ER_ERROR_DURING_COMMIT,
                f"distributed transaction {dtid}: commit outcome unknown, shard {_name(mm_key)} did not answer "
                f"({cause}); it is finished when the shard is back (SHOW TRANSACTION STATUS FOR '{dtid}')",
            )
        m.counters.commits_two_phase += 1
        await m.faults.hit("after_decision", dtid)

        outcomes = await _all([
            *(pipeline(sc, [f"xa commit {b.xid(k)}"]) for k, sc in rms),
            *(_one_phase(b, [(k, sc)], None) for k, sc in readers),
        ])
        settled = True
        left = []
        for (key, sc), outcome in zip(rms, outcomes, strict=False):  # readers' outcomes do not matter
            if isinstance(outcome, BaseException):
                detach(sc)
                left.append(_name(key))
        if left:
            # Committed all the same: the decision is recorded; the resolver commits these.
            m.counters.participant_commit_failures += len(left)
            logger.warning("twopc participants left to the resolver", extra={"dtid": dtid, "shards": left})
        else:
            m.finished(mm_key, dtid)
        await m.faults.hit("after_commit", dtid)
    except BaseException:
        if not settled:
            # Cancelled or failed midway: no branch may stay attached to a pooled connection;
            # closed, the unprepared ones roll back and the prepared ones go to the resolver.
            for _, sc in branches:
                detach(sc)
        raise
    finally:
        m.in_flight.discard(dtid)


async def _commit_mm(
    m: TwoPCManager, b: _Branches, mm_key: ShardKey, mm_sc: ShardConnection, rm_keys: list[ShardKey]
) -> tuple[str | None, str]:
    try:
        await pipeline(mm_sc, ["commit" if mm_key not in b.xa else f"xa commit {b.xid(mm_key)} one phase"])
        return "COMMIT", ""
    except ProxyError as e:
        # Its branch rolls back with the connection unless the commit happened; read which.
        detach(mm_sc)
        return await m.decide(b.dtid, mm_key, rm_keys), e.message


async def _record_decision(
    m: TwoPCManager, dtid: str, mm_key: ShardKey, table: str, rm_keys: list[ShardKey]
) -> tuple[str | None, str]:
    """The MM holds no branch of the transaction: the decision is its own autocommit row."""
    try:
        async with m.pools.get(*mm_key).connection() as sc:
            await sc.execute(record_insert(table, dtid, "COMMIT", rm_keys))
        return "COMMIT", ""
    except ShardError as e:
        cause = "decided by a resolver" if e.code == ER_DUP_ENTRY else e.message
        return await m.decide(dtid, mm_key, rm_keys), cause
    except ProxyError as e:
        return await m.decide(dtid, mm_key, rm_keys), e.message


def _rolled_back(dtid: str, key: ShardKey, error: ProxyError) -> ProxyError:
    return ProxyError(
        ER_XA_RBROLLBACK,
        f"distributed transaction {dtid} rolled back: shard {_name(key)} failed to prepare: {error.message}",
    )
