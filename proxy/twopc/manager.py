"""Per-process 2PC state: the process id in every dtid, the transactions it is
committing right now, the decision records (sidecar table), its counters, and the
background tasks (resolver, clearing of finished records).

The decision record of a distributed transaction lives on its metadata manager (MM),
the first shard the transaction wrote on, in ``_shardgate.dt_state`` (or, where the
shard's user may not create a database, ``<shard db>._shardgate_dt_state``)::

    dtid           the transaction (``ks:shard:<process>-<n>``, see ``xid``)
    state          COMMIT | ROLLBACK
    participants   the other shards, ``ks:shard,ks:shard`` (Vitess's spelling)
    time_created   when the decision was made (UTC)

A COMMIT row is written inside the MM's own branch of the transaction, so it commits
exactly when the MM's writes do: that commit *is* the decision. A ROLLBACK row is
written (autocommit) by whoever decides to abort a transaction whose coordinator is
gone; the row's primary key makes the two exclusive (a coordinator that comes late
fails on the duplicate key and rolls back). COMMIT rows are deleted once every
participant has committed; ROLLBACK rows are kept a while longer as tombstones.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from proxy.errors import ER_DUP_ENTRY, ER_LOCK_WAIT_TIMEOUT, ProxyError, ShardError
from proxy.pools import ShardAddress, ShardConnection, ShardPools
from proxy.sidecar_tables import ensure_sidecar_table, hex_literal
from proxy.twopc.faults import Faults
from proxy.twopc.xid import ShardKey, lock_name, make_dtid, parse_participants, participant_list

logger = logging.getLogger(__name__)

SIDECAR_TABLE = "dt_state"
# ROLLBACK records outlive their transaction this long: a coordinator that was merely slow
# (not dead) must still find the tombstone and fail, rather than commit alone.
ROLLBACK_RETENTION_S = 600.0
# How long a decision may wait for a row lock held by a committing MM branch.
DECIDE_LOCK_WAIT_S = 1


def _create_table(name: str) -> str:
    return (
        f"create table if not exists {name} ("
        " dtid varbinary(64) not null,"
        " state varbinary(16) not null,"
        " participants varbinary(4096) not null,"
        " time_created datetime(6) not null,"
        " primary key (dtid)"
        ") engine=InnoDB comment 'shardgate 2PC decisions'"
    )


def record_insert(table: str, dtid: str, state: str, participants: list[ShardKey]) -> str:
    return (
        f"insert into {table} (dtid, state, participants, time_created) values "
        f"({hex_literal(dtid)}, '{state}', {hex_literal(participant_list(participants))}, utc_timestamp(6))"
    )


@dataclass
class TwoPCCounters:
    """Plain counters for the metrics endpoint to come (read with ``snapshot()``)."""

    commits_one_phase: int = 0  # twopc transactions that wrote on one shard (XA ... ONE PHASE)
    commits_two_phase: int = 0  # multi-shard: decision COMMIT recorded
    rollbacks: int = 0  # twopc transactions rolled back by the client
    prepare_failures: int = 0  # multi-shard commits rolled back because a participant failed to prepare
    commits_outcome_unknown: int = 0  # MM unreachable at the decision: left to the resolver
    participant_commit_failures: int = 0  # decision COMMIT, but a participant's XA COMMIT failed: left to the resolver
    resolver_runs: int = 0
    resolved_commit: int = 0  # prepared branches committed by the resolver
    resolved_rollback: int = 0  # prepared branches rolled back by the resolver
    records_cleared: int = 0
    in_doubt: int = 0  # gauge: prepared transactions the last resolver run left unresolved

    def snapshot(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class Decision:
    state: str
    participants: list[ShardKey] = field(default_factory=list)


class TwoPCManager:
    def __init__(
        self,
        addresses: Iterable[ShardAddress],
        resolver_interval_s: float = 1.0,
        resolver: Callable[[TwoPCManager], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        # The resolver loop (proxy.twopc.resolver.run_resolver, which imports this module: handed
        # in by proxy.twopc.manager_for so the imports run one way); None: no resolver task.
        self._resolver = resolver
        addresses = list(addresses)
        self.process = secrets.token_hex(6)
        self.shards: list[ShardKey] = sorted((a.keyspace, a.shard) for a in addresses)
        self.databases = {(a.keyspace, a.shard): a.database for a in addresses}
        # The manager's own connections: resolver work never waits for (or starves) client sessions.
        self.pools = ShardPools(addresses, maxsize=8)
        self.interval = resolver_interval_s
        self.counters = TwoPCCounters()
        self.faults = Faults.from_env()
        self.in_flight: set[str] = set()  # dtids this process is committing right now
        self.first_seen: dict[str, float] = {}  # prepared dtids without a decision, when first seen
        self._seq = itertools.count(1)
        self._sidecar: dict[ShardKey, str] = {}
        self._finished: dict[ShardKey, list[str]] = {}
        self._finished_event = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.resolver_conns: dict[ShardKey, ShardConnection] = {}
        # Set once the resolver first tried to take this process's liveness locks: until then
        # another process's resolver could take our commits for a dead coordinator's.
        self.locks_taken = asyncio.Event()

    def add_shard(self, address: ShardAddress) -> None:
        """A shard that started serving (a resharding switch): decisions may live there from
        now on. Commits wait for the resolver's next run, which takes this process's liveness
        lock there too (as at start-up)."""
        key = (address.keyspace, address.shard)
        if key in self.databases and self.pools.get(*key).address == address:
            return
        self.pools.ensure(address)
        self.databases[key] = address.database
        self.shards = sorted(set(self.shards) | {key})
        self.locks_taken.clear()

    # -- lifecycle -------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return bool(self._tasks)

    def start(self) -> None:
        """Start the resolver (first run at once, then every interval); idempotent.
        Needs a running event loop (a no-op without one)."""
        if self._tasks:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._tasks = [loop.create_task(self._clear_finished_loop())]
        if self._resolver is not None:
            self._tasks.append(loop.create_task(self._resolver(self)))
        logger.info("twopc resolver started", extra={"proxy_process": self.process, "interval_s": self.interval})

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
        await self.close_connections()

    async def close_connections(self) -> None:
        conns, self.resolver_conns = self.resolver_conns, {}
        for sc in conns.values():
            sc.broken = True
            sc.pool.release(sc)
        await self.pools.close()

    async def wait_locks(self) -> None:
        if not self.locks_taken.is_set():
            self.start()
            try:
                await asyncio.wait_for(self.locks_taken.wait(), 5)
            except TimeoutError:
                logger.warning("twopc liveness locks not taken yet", extra={"proxy_process": self.process})

    # -- names -----------------------------------------------------------------------
    def new_dtid(self, mm: ShardKey) -> str:
        return make_dtid(mm, self.process, next(self._seq))

    @property
    def lock_name(self) -> str:
        return lock_name(self.process)

    # -- the sidecar table -------------------------------------------------------------
    async def sidecar(self, key: ShardKey, sc: ShardConnection | None = None) -> str:
        """The decision table on shard ``key`` (created on first use), fully qualified."""
        name = self._sidecar.get(key)
        if name is not None:
            return name
        if sc is None:
            async with self.pools.get(*key).connection() as own:
                return await self._ensure_sidecar(key, own)
        return await self._ensure_sidecar(key, sc)

    async def _ensure_sidecar(self, key: ShardKey, sc: ShardConnection) -> str:
        name = await ensure_sidecar_table(sc, self.databases[key], SIDECAR_TABLE, _create_table)
        self._sidecar[key] = name
        return name

    async def read_decision(self, sc: ShardConnection, table: str, dtid: str) -> Decision | None:
        res = await sc.execute(f"select state, participants from {table} where dtid = {hex_literal(dtid)}")
        if not res.rows:
            return None
        state, parts = res.rows[0]
        return Decision(bytes(state).decode(), parse_participants(bytes(parts or b"").decode()))  # type: ignore[arg-type]  # NOT NULL column

    async def decide_on(
        self, sc: ShardConnection, table: str, dtid: str, participants: list[ShardKey]
    ) -> str | None:
        """The transaction's decision, recording ROLLBACK if none was made: a recorded
        decision wins; otherwise the ROLLBACK row is inserted, which a committing MM
        branch (holding the row's lock) makes wait, then fail on the duplicate key.
        None if it cannot be told now (the lock is held longer than the wait)."""
        for _ in range(3):
            decision = await self.read_decision(sc, table, dtid)
            if decision is not None:
                return decision.state
            try:
                await sc.execute(
                    f"set statement innodb_lock_wait_timeout = {DECIDE_LOCK_WAIT_S} for "
                    + record_insert(table, dtid, "ROLLBACK", participants)
                )
            except ShardError as e:
                if e.code == ER_DUP_ENTRY:  # decided meanwhile: read it
                    continue
                if e.code == ER_LOCK_WAIT_TIMEOUT:  # the MM branch is committing right now
                    return None
                raise
            logger.info("twopc decision recorded", extra={"dtid": dtid, "state": "ROLLBACK"})
            return "ROLLBACK"
        return None

    async def decide(self, dtid: str, mm: ShardKey, participants: list[ShardKey]) -> str | None:
        """``decide_on`` over a connection of the manager's own; None if the MM is unreachable."""
        try:
            async with self.pools.get(*mm).connection() as sc:
                table = await self.sidecar(mm, sc)
                return await self.decide_on(sc, table, dtid, participants)
        except ProxyError as e:
            logger.warning("twopc decision unknown", extra={"dtid": dtid, "error": e.message})
            return None

    # -- clearing finished records ---------------------------------------------------------
    def finished(self, mm: ShardKey, dtid: str) -> None:
        """Every participant of ``dtid`` committed: its record can go (in the background)."""
        self._finished.setdefault(mm, []).append(dtid)
        self._finished_event.set()

    async def _clear_finished_loop(self) -> None:
        while True:
            await self._finished_event.wait()
            await asyncio.sleep(0.05)  # gather a batch
            self._finished_event.clear()
            batch, self._finished = self._finished, {}
            for mm, dtids in batch.items():
                await self.delete_records(mm, dtids)

    async def delete_records(self, mm: ShardKey, dtids: list[str], sc: ShardConnection | None = None) -> None:
        if not dtids:
            return
        try:
            if sc is None:
                async with self.pools.get(*mm).connection() as own:
                    await self._delete(own, mm, dtids)
            else:
                await self._delete(sc, mm, dtids)
        except ProxyError as e:
            # Left for the resolver, which clears records whose participants are all done.
            logger.info("twopc records not cleared", extra={"keyspace": mm[0], "shard": mm[1], "error": e.message})

    async def _delete(self, sc: ShardConnection, mm: ShardKey, dtids: list[str]) -> None:
        table = await self.sidecar(mm, sc)
        for i in range(0, len(dtids), 500):
            keys = ", ".join(hex_literal(d) for d in dtids[i : i + 500])
            res = await sc.execute(f"delete from {table} where dtid in ({keys})")
            self.counters.records_cleared += res.affected_rows

    def note_prepared(self, dtid: str) -> float:
        return self.first_seen.setdefault(dtid, time.time())
