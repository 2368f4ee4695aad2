"""A session's multi-shard transaction: one pinned connection per shard touched.

How it commits is the session's ``transaction_mode`` (Vitess's names):

- ``multi`` (the default): best effort, like Vitess's default mode: shards commit one
  after another and a failure is reported naming the shards that did and did not
  commit, so nothing is silently half-applied.
- ``single``: a second shard is refused with Vitess's error (and the transaction is
  rolled back).
- ``twopc``: atomic. The first shard's connection begins an ordinary transaction (that
  shard holds the decision: its COMMIT is it); every later shard's begins with
  ``XA START`` instead (the same round trip), so that it can be prepared. A transaction
  that wrote on one shard commits in one phase, as ``multi`` does; one that wrote on
  several goes through two-phase commit (``proxy.twopc.coordinator``).

An *implicit* transaction wraps one autocommit DML statement of a twopc or multi session:
shards its statement reaches together (a scattered UPDATE, an INSERT split across shards:
the engine sends those at once) get transactions (XA branches committed atomically in
twopc, committed one after another in multi); a statement reaching one shard runs in plain
autocommit on it, at no extra cost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from proxy.errors import ER_QUERY_INTERRUPTED, ER_SP_DOES_NOT_EXIST, ER_UNKNOWN_ERROR, ProxyError
from proxy.pools import ShardConnection, ShardPools
from proxy.twopc import MULTI, SINGLE, TWOPC, TwoPCManager
from proxy.twopc import coordinator as twopc_coordinator
from proxy.twopc.xid import xid_sql
from sqltext.quoting import quote_identifier

if TYPE_CHECKING:
    from proxy.topics.kept import KeptRows

logger = logging.getLogger(__name__)

ShardKey = tuple[str, str]


def commit_failed(error: ProxyError, failed: str, committed: Sequence[str], rolled_back: Sequence[str]) -> ProxyError:
    """The error of a best-effort commit that failed on shard ``failed`` (``ks/shard``): the
    shard's code and message, and which shards did commit and which were rolled back."""
    return ProxyError(
        error.code,
        f"commit failed on shard {failed}: {error.message}; "
        f"committed: [{', '.join(committed)}]; rolled back: [{', '.join(rolled_back)}]",
        error.sqlstate,
    )


class ShardTransaction:
    def __init__(
        self,
        pools: ShardPools,
        begin_sql: str = "begin",
        settings: Callable[[], Mapping[str, str]] = dict,
        next_isolation: str | None = None,
        *,
        mode: str = MULTI,
        twopc: TwoPCManager | None = None,
        implicit: bool = False,
    ) -> None:
        self.pools = pools
        self.begin_sql = begin_sql
        self.settings = settings
        self.next_isolation = next_isolation  # SET TRANSACTION ... for this transaction only
        self.conns: dict[ShardKey, ShardConnection] = {}
        self._opening: set[ShardKey] = set()  # shards whose connection is being opened
        self._refused: set[ShardKey] = set()
        self.mode = MULTI
        self.twopc: TwoPCManager | None = None
        self.set_mode(mode, twopc)
        self.implicit = implicit
        self.plain: set[ShardKey] = set()  # implicit twopc: shards run in autocommit (no XA branch)
        # implicit twopc: the statement reaches shards one step after another (see
        # proxy.engine.statement_steps): no shard may run in plain autocommit.
        self.in_steps = False
        self.dtid: str | None = None  # twopc: the distributed transaction's id, set at its first branch
        self.mm: ShardKey | None = None  # twopc: the shard holding its decision record
        self.xa: set[ShardKey] = set()  # twopc: shards whose branch began with XA START
        self.aborted = False  # rolled back by the proxy (single mode refusal): the session drops it
        # twopc: shards a statement that may write reached (the session says which statements
        # only read); a branch that only read needs no prepare.
        self.writing = True
        self.written: set[ShardKey] = set()
        # SAVEPOINT names in order (as Vitess keeps them in the session): set on every shard
        # in the transaction, and on a shard joining later right after its BEGIN, so that
        # ROLLBACK TO undoes what that shard did since too
        self.savepoints: list[str] = []
        # A topic's rows this transaction keeps to its COMMIT (proxy.topics.kept): only while no
        # shard joined it; dropped with the transaction (ROLLBACK, a disconnect).
        self.kept: KeptRows | None = None

    def set_mode(self, mode: str, twopc: TwoPCManager | None) -> None:
        """Choose how this transaction commits; only before it touched a shard."""
        if self.touched:
            raise RuntimeError("transaction mode changed after the transaction touched a shard")
        if mode == TWOPC and twopc is None:
            raise ValueError("a twopc transaction needs the process's TwoPCManager")
        self.mode = mode
        self.twopc = twopc if mode == TWOPC else None

    @property
    def touched(self) -> bool:
        return bool(self.conns or self._opening)

    async def connection(self, keyspace: str, shard: str) -> ShardConnection:
        key = (keyspace, shard)
        if self.writing:
            self.written.add(key)
        sc = self.conns.get(key)
        if sc is not None:
            return sc
        if self.aborted:
            raise self._refusal()
        if self.mode == SINGLE and (set(self.conns) | self._opening) - {key}:
            await self._refuse(key)
        self._opening.add(key)
        try:
            plain = False
            if self.implicit and not self.conns and not self.in_steps:
                # Let the other shard requests of this statement (sent together with
                # asyncio.gather) register first: one shard alone needs no XA branch.
                await asyncio.sleep(0)
                plain = self._opening == {key} and not self.conns
            pool = self.pools.get(keyspace, shard)
            sc = await pool.acquire()
            try:
                await sc.apply_settings(self.settings())
                if not plain:
                    if self.next_isolation:
                        await sc.execute(f"set transaction {self.next_isolation}")
                    begin = self._begin_statement(key)
                    if begin is self.begin_sql:
                        # Sent with the statement this connection is opened for (one round
                        # trip; ShardConnection.defer_begin says why it is safe). XA START
                        # goes alone: a twopc branch must exist before anything prepares it.
                        sc.defer_begin(begin, lambda: self._begin_failed(key, sc))
                    else:
                        await sc.execute(begin)
                    for name in self.savepoints:  # after the BEGIN (deferred or sent)
                        await sc.execute(f"savepoint {quote_identifier(name)}")
                if self.aborted:  # refused meanwhile (single mode, a concurrent request):
                    raise self._refusal()  # closed below, the server rolls its transaction back
            except BaseException:
                sc.broken = True
                pool.release(sc)
                raise
        finally:
            self._opening.discard(key)
        self.conns[key] = sc
        if plain:
            self.plain.add(key)
        return sc

    def connection_nowait(self, keyspace: str, shard: str) -> ShardConnection | None:
        """``connection`` to a shard new to the transaction without waiting, in the simple case:
        an idle pooled connection already carrying the session's settings, its BEGIN deferred;
        no SET TRANSACTION, no savepoint to set, not twopc, implicit or refused (single mode).
        None: ``connection`` must open it (the fast path's caller then waits in a task)."""
        key = (keyspace, shard)
        if (
            key in self.conns or self._opening or self.aborted or self.implicit or self.mode == TWOPC
            or self.next_isolation or self.savepoints or (self.mode == SINGLE and self.conns)
        ):
            return None
        pool = self.pools.pools.get(key)
        if pool is None:
            return None
        sc = pool.acquire_nowait()
        if sc is None:
            return None
        if not sc.has_settings(self.settings()):
            pool.release(sc)
            return None
        if self.writing:
            self.written.add(key)
        sc.defer_begin(self.begin_sql, lambda: self._begin_failed(key, sc))
        self.conns[key] = sc
        return sc

    async def savepoint(self, name: str) -> None:
        """SAVEPOINT ``name`` (one of the same name is replaced, as MySQL does)."""
        await self._on_every_shard(f"savepoint {quote_identifier(name)}")
        self.savepoints = [s for s in self.savepoints if s.lower() != name.lower()] + [name]

    async def rollback_to(self, name: str) -> None:
        """ROLLBACK TO SAVEPOINT ``name``: the savepoints set after it are gone."""
        i = self._savepoint_index(name)
        await self._on_every_shard(f"rollback to savepoint {quote_identifier(name)}")
        del self.savepoints[i + 1:]

    async def release(self, name: str) -> None:
        """RELEASE SAVEPOINT ``name``: it and the savepoints set after it are gone."""
        i = self._savepoint_index(name)
        await self._on_every_shard(f"release savepoint {quote_identifier(name)}")
        del self.savepoints[i:]

    def _savepoint_index(self, name: str) -> int:
        for i, s in enumerate(self.savepoints):
            if s.lower() == name.lower():
                return i
        raise ProxyError(ER_SP_DOES_NOT_EXIST, f"SAVEPOINT {name} does not exist")

    async def _on_every_shard(self, sql: str) -> None:
        for key, sc in list(self.conns.items()):
            if key not in self.plain:
                await sc.execute(sql)

    def _begin_failed(self, key: ShardKey, sc: ShardConnection) -> None:
        """A deferred BEGIN failed: the transaction goes on without this connection, as
        when a BEGIN sent on its own fails in ``connection``."""
        if self.conns.get(key) is sc:
            del self.conns[key]
            self.plain.discard(key)
            sc.broken = True
            sc.pool.release(sc)

    def _begin_statement(self, key: ShardKey) -> str:
        if self.mode != TWOPC:
            return self.begin_sql
        assert self.twopc is not None
        if self.dtid is None:
            try:
                self.dtid = self.twopc.new_dtid(key)
            except ValueError as e:  # names too long for an XA xid
                raise ProxyError(ER_UNKNOWN_ERROR, str(e)) from e
            self.mm = key
            return self.begin_sql  # the MM: never prepared, its COMMIT is the decision
        self.xa.add(key)
        return f"xa start {xid_sql(self.dtid, key)}"

    def _refusal(self) -> ProxyError:
        shards = " ".join(f"{ks}:{s}" for ks, s in sorted(set(self.conns) | self._opening | self._refused))
        return ProxyError(ER_QUERY_INTERRUPTED, f"multi-db transaction attempted: [{shards}]")

    async def _refuse(self, key: ShardKey) -> None:
        """Vitess's single mode: a second shard aborts the transaction."""
        self._refused = {key}
        error = self._refusal()
        self.aborted = True
        logger.info("single-shard transaction refused a second shard", extra={"keyspace": key[0], "shard": key[1]})
        await self._rollback_quietly(exclude=set())
        self.release_all()
        raise error

    async def commit(self) -> None:
        try:
            if self.aborted:
                return
            if self.mode == TWOPC:
                await twopc_coordinator.commit(self)
            else:
                await self._commit_each()
        finally:
            self.release_all()

    async def _commit_each(self) -> None:
        committed: list[str] = []
        for (ks, shard), sc in list(self.conns.items()):
            if (ks, shard) in self.plain:  # an implicit transaction's one shard: ran in autocommit
                committed.append(f"{ks}/{shard}")
                continue
            try:
                await sc.execute("commit")
            except ProxyError as e:
                failed = f"{ks}/{shard}"
                rest = [f"{k}/{s}" for (k, s) in self.conns if f"{k}/{s}" not in committed and f"{k}/{s}" != failed]
                await self._rollback_quietly(exclude=set(committed) | {failed})
                raise commit_failed(e, failed, committed, rest) from e
            committed.append(f"{ks}/{shard}")

    async def rollback(self) -> None:
        try:
            if self.mode == TWOPC:
                # A branch whose rollback fails is closed: the server rolls it back then.
                await twopc_coordinator.rollback(self)
                return
            errors = await self._rollback_quietly(exclude=set())
            if errors:
                raise errors[0]
        finally:
            self.release_all()

    async def _rollback_quietly(self, exclude: set[str]) -> list[ProxyError]:
        errors: list[ProxyError] = []
        for (ks, shard), sc in self.conns.items():
            if f"{ks}/{shard}" in exclude or (ks, shard) in self.plain:  # plain: autocommit, nothing open
                continue
            try:
                await sc.execute("rollback")
            except ProxyError as e:
                # The connection is discarded below; MySQL rolls back on disconnect.
                sc.broken = True
                logger.warning("rollback failed", extra={"keyspace": ks, "shard": shard, "error": str(e)})
                errors.append(e)
        return errors

    async def forget(self, keyspace: str, shard: str) -> None:
        """Roll back and drop this transaction's connection to one shard, as if the transaction
        had never used it (a resharding switch retired the shard before the transaction did
        anything there: proxy/resharding/write_hold.py). Not for twopc transactions."""
        if self.mode == TWOPC:
            raise RuntimeError("a twopc transaction cannot drop a shard")
        key = (keyspace, shard)
        sc = self.conns.pop(key, None)
        self.written.discard(key)
        self.plain.discard(key)
        if sc is None:
            return
        try:
            await sc.execute("rollback")
        except ProxyError:
            sc.broken = True  # closed: the server rolls back on disconnect
        finally:
            sc.pool.release(sc)

    def release_all(self) -> None:
        conns, self.conns = self.conns, {}
        for sc in conns.values():
            sc.pool.release(sc)
