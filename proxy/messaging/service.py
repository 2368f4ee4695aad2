"""The messaging service of one proxy process: every message manager, and the front end's API.

The front end calls:

* ``await start()`` / ``await stop()`` with the proxy;
* ``stream(sql, keyspace, target_shard)`` (or ``subscribe(...)``) for ``STREAM * FROM t``: an async
  iterator of ``Result`` chunks, the first with fields only, then one per batch; ``aclose()``
  means the subscriber left;
* ``inserted(keyspace, write)`` after a commit that inserted into a message table (or
  ``notify(keyspace, shard, table)`` where the statements are not known);
* ``acked(keyspace, table, ids)`` after an ack UPDATE through the proxy;
* ``await reload(keyspace)`` after DDL through the proxy;
* ``show_rows()`` for ``SHOW VITESS_MESSAGES``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Protocol

from mysql_mimic.types import ColumnType
from sqlglot import exp

from proxy.engine.result import Result, local_result
from proxy.errors import ER_BAD_DB_ERROR, ER_NO_DB_ERROR, ER_UNKNOWN_ERROR, ProxyError
from proxy.messaging import own_mark
from proxy.messaging.change_watch import TableChangeWatch
from proxy.messaging.dml import MessageDml
from proxy.messaging.errors import (
    MessageTableNotFound,
    MessagingClosed,
    NotAMessageTable,
    SubscriptionEnded,
)
from proxy.messaging.manager import DEFAULT_POSTPONE_CAP, ConnectionSource, MessageManager
from proxy.messaging.receiver import Delivery, Receiver
from proxy.messaging.rows import first_row_seq, frame
from proxy.messaging.schema import LoadedTable, load_message_tables
from proxy.messaging.sql import literal
from proxy.messaging.statement import StreamPredicate, compile_predicate, parse_stream

logger = logging.getLogger(__name__)

# How long an own INSERT counts as in flight at most (``insert_in_flight``).
INSERT_IN_FLIGHT_SECONDS = 1.0


def _drop_stale(started: deque[float], now: float) -> None:
    """Forget the starts of own INSERTs older than ``INSERT_IN_FLIGHT_SECONDS`` (oldest first)."""
    while started and started[0] < now - INSERT_IN_FLIGHT_SECONDS:
        started.popleft()


SHOW_COLUMNS = [
    "Keyspace", "Shard", "Table", "Queued", "InFlight", "Sent", "Acked", "Delayed", "Parked", "Purged",
    "Subscribers", "Error",
]  # fmt: skip
_SHOW_TYPES = [ColumnType.VAR_STRING] * 3 + [ColumnType.LONGLONG] * 8 + [ColumnType.VAR_STRING]

MessageId = bytes | str | int


class PoolsLike(Protocol):
    """``proxy.pools.ShardPools``."""

    def get(self, keyspace: str, shard: str) -> ConnectionSource: ...


_TEXT_ID_TYPES = frozenset({int, str})


def id_bytes(value: MessageId) -> bytes:
    """An id as the text-protocol bytes the shard sends (the cache's key)."""
    if isinstance(value, bytes):
        return value
    return str(value).encode()


@dataclasses.dataclass(eq=False)
class _Subscription:
    """One STREAM: its queue and predicate, and the receiver it has in each manager."""

    keyspace: str
    table: str
    queue: asyncio.Queue[Delivery]
    predicate: StreamPredicate | None
    follows: bool  # to every shard of the keyspace, whichever serve it
    attached: list[tuple[MessageManager, Receiver]] = dataclasses.field(default_factory=list)
    watched: bool = False

    @property
    def managers(self) -> list[MessageManager]:
        return [m for m, _ in self.attached]

    def attach(self, manager: MessageManager) -> None:
        receiver = Receiver(
            self.queue,
            accepts=self.predicate.matches if self.predicate else None,
            predicate_sql=self.predicate.sql if self.predicate else None,
        )
        manager.add_receiver(receiver)
        self.attached.append((manager, receiver))

    def detach(self, manager: MessageManager) -> None:
        for m, receiver in [a for a in self.attached if a[0] is manager]:
            m.remove_receiver(receiver)
            self.attached.remove((m, receiver))


class MessagingService:
    def __init__(
        self,
        pools: PoolsLike,
        shards: Mapping[str, Sequence[str]],
        *,
        postpone_cap: int = DEFAULT_POSTPONE_CAP,
        clock: Callable[[], int] = time.time_ns,
        watch_changes: bool = False,
        on_ddl: Callable[[str], None] | None = None,
    ) -> None:
        """``watch_changes``: follow each subscribed table's binlog (``change_watch``) so rows
        written around this proxy are delivered at once rather than at the next poll.
        ``on_ddl(keyspace)``: called when such a watch sees a DDL in the binlog."""
        self.pools = pools
        self.watch_changes = watch_changes
        self.on_ddl = on_ddl
        self._watches: dict[tuple[str, str], tuple[TableChangeWatch, int]] = {}  # (ks, table) -> (watch, subscribers)
        self.shards = {ks: list(s) for ks, s in shards.items()}
        self.postpone_cap = postpone_cap
        self.clock = clock
        self.tables: dict[tuple[str, str], dict[str, LoadedTable]] = {}
        self.managers: dict[tuple[str, str, str], MessageManager] = {}
        self._reload_locks = {ks: asyncio.Lock() for ks in self.shards}
        self._closing: set[asyncio.Task[None]] = set()
        self._subscriptions: set[_Subscription] = set()
        # Per (keyspace, table): when each own INSERT in flight started (``insert_in_flight``).
        self._inserts_started: dict[tuple[str, str], deque[float]] = {}
        self._open = False

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Read every keyspace's message tables and open their managers. A keyspace whose shard
        cannot be read is logged and left for later: the first STREAM on it, or ``reload``,
        reads it again, and the proxy still starts."""
        self._open = True
        for keyspace in self.shards:
            try:
                await self.reload(keyspace)
            except ProxyError as e:
                logger.warning("message tables not loaded", extra={"keyspace": keyspace, "error": e.message})

    async def stop(self) -> None:
        self._open = False
        watches, self._watches = [w for w, _ in self._watches.values()], {}
        for w in watches:
            await w.stop()
        managers, self.managers = list(self.managers.values()), {}
        for m in managers:
            await m.close(MessagingClosed())
        await asyncio.gather(*self._closing, return_exceptions=True)  # failures logged by _closed

    # -- schema ---------------------------------------------------------------------------
    async def reload(self, keyspace: str) -> None:
        """Re-read the keyspace's message tables on every shard and apply the differences.

        A changed comment updates the running manager in place (subscribers stay connected);
        a dropped or now-invalid table ends its subscribers' streams with the reason."""
        if keyspace not in self.shards:
            return
        async with self._reload_locks[keyspace]:
            for shard in self.shards[keyspace]:
                async with self.pools.get(keyspace, shard).connection() as sc:
                    loaded = await load_message_tables(sc)
                self._apply(keyspace, shard, loaded)

    def _apply(self, keyspace: str, shard: str, loaded: dict[str, LoadedTable]) -> None:
        self.tables[(keyspace, shard)] = loaded
        for key in [k for k in self.managers if k[0] == keyspace and k[1] == shard]:
            entry = loaded.get(key[2])
            if entry is None or entry.spec is None:
                manager = self.managers.pop(key)
                reason = entry.error if entry is not None and entry.error is not None else SubscriptionEnded(
                    f"message table {manager.table} was dropped or is no longer a message table"
                )
                self._spawn_close(manager, reason)
        for name, entry in loaded.items():
            if entry.spec is None:
                continue
            key = (keyspace, shard, name)
            existing = self.managers.get(key)
            if existing is None:
                if self._open:
                    manager = MessageManager(
                        keyspace, shard, entry.spec, self.pools.get(keyspace, shard),
                        postpone_cap=self.postpone_cap, clock=self.clock,
                        insert_in_flight=functools.partial(self.insert_in_flight, keyspace, name),
                    )  # fmt: skip
                    self.managers[key] = manager
                    manager.open()
            elif existing.spec != entry.spec or existing.spec.fields != entry.spec.fields:
                existing.update_spec(entry.spec)

    def _spawn_close(self, manager: MessageManager, reason: ProxyError | None) -> None:
        # Closing awaits the manager's own tasks; it must not run inside a reload that one of
        # them might be waiting on, so it runs as a task the service owns (``stop`` awaits it).
        task = asyncio.get_running_loop().create_task(manager.close(reason))
        self._closing.add(task)
        task.add_done_callback(self._closed)

    def _closed(self, task: asyncio.Task[None]) -> None:
        self._closing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("closing a message manager failed", exc_info=task.exception())

    def _entry(self, keyspace: str, shard: str, table: str) -> LoadedTable | None:
        return self.tables.get((keyspace, shard), {}).get(table.lower())

    def own_mark(self, keyspace: str, table: str) -> str:
        """The comment to send before an own INSERT into ``table`` (proxy/messaging/own_mark.py):
        "" when the table is not a message table or no binlog watch runs (nothing to skip).
        Every path asks for it as such an INSERT starts: it is also counted as in flight until
        it commits (``inserted``) or fails (``in_doubt``), see ``insert_in_flight``."""
        if not self.is_message_table(keyspace, table):
            return ""
        started = self._inserts_started.setdefault((keyspace, table.lower()), deque())
        now = time.monotonic()
        # Starts never ended (a transaction rolled back) are dropped here too, not only when a
        # manager asks: the queue stays bounded whether or not the table has subscribers.
        _drop_stale(started, now)
        started.append(now)
        if not self.watch_changes:
            return ""
        return own_mark.mark(table)

    def insert_in_flight(self, keyspace: str, table: str) -> bool:
        """Whether an own INSERT into ``table`` started and has not committed or failed yet: more
        rows are on their way (``MessageManager`` holds a backlog's tail for them). An INSERT
        counted twice (a fast-path attempt handed to the normal path) or never finished (in an
        explicit transaction not committed yet) stops counting after ``INSERT_IN_FLIGHT_SECONDS``."""
        started = self._inserts_started.get((keyspace, table))
        if not started:
            return False
        _drop_stale(started, time.monotonic())
        return bool(started)

    def _insert_ended(self, keyspace: str, table: str) -> None:
        """An own INSERT into ``table`` committed or failed: no longer in flight; the table's
        managers, which may hold a tail for its rows, look again."""
        key = (keyspace, table.lower())
        started = self._inserts_started.get(key)
        if started:
            started.popleft()
        for shard in self.shards.get(keyspace, []):
            manager = self.managers.get((keyspace, shard, key[1]))
            if manager is not None:
                manager.wake()

    def streamed_at(self, keyspace: str, shard: str, table: str) -> bool:
        """Whether a subscriber of this process streams ``table`` from ``shard`` (a ``preclaim``
        may then rewrite an INSERT's statement)."""
        manager = self.managers.get((keyspace, shard, table.lower()))
        return manager is not None and bool(manager.receivers)

    def preclaim(self, keyspace: str, shard: str, table: str, statement: str) -> str:
        """An own autocommit INSERT into ``table`` about to be sent to ``shard`` (the proxy
        commits it itself, with nothing else in its transaction): the statement to send
        instead, written already claimed when the shard's manager will send its rows from its
        cache at once (``MessageManager.preclaim``), else ``statement`` itself. Its commit is
        reported as any INSERT's (``inserted``, with the statement as sent)."""
        manager = self.managers.get((keyspace, shard, table.lower()))
        return statement if manager is None else manager.preclaim(statement)

    def in_doubt(self, keyspace: str, table: str, shards: Iterable[str] = ()) -> None:
        """A marked INSERT into ``table`` failed or its COMMIT's outcome is not known: it may
        have committed rows the watch will not report (they carry our mark), so poll."""
        self._insert_ended(keyspace, table)
        for shard in tuple(shards) or self.shards.get(keyspace, []):
            manager = self.managers.get((keyspace, shard, table.lower()))
            if manager is not None:
                manager.in_doubt()

    def is_message_table(self, keyspace: str, table: str) -> bool:
        return any(
            (e := self._entry(keyspace, s, table)) is not None and e.spec is not None for s in self.shards.get(keyspace, [])
        )

    async def _resolve(self, keyspace: str, shards: list[str], table: str) -> list[MessageManager]:
        if not self._open:
            raise MessagingClosed()
        if any(self._entry(keyspace, s, table) is None for s in shards):
            # Perhaps created directly on the shards since the last read: read once more.
            await self.reload(keyspace)
        managers = []
        for shard in shards:
            entry = self._entry(keyspace, shard, table)
            if entry is None:
                raise await self._missing_error(keyspace, shard, table)
            if entry.error is not None:
                raise entry.error
            managers.append(self.managers[(keyspace, shard, table.lower())])
        return managers

    async def _missing_error(self, keyspace: str, shard: str, table: str) -> ProxyError:
        """Vitess's two texts: the table does not exist, or it is not a message table."""
        async with self.pools.get(keyspace, shard).connection() as sc:
            found = await sc.execute(
                "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
                f" AND TABLE_NAME = {literal(table)}"
            )
        return NotAMessageTable(table) if found.rows else MessageTableNotFound(table)

    # -- subscribe ------------------------------------------------------------------------
    def stream(self, sql: str, keyspace: str | None, target_shard: str | None = None) -> AsyncIterator[Result]:
        """``STREAM * FROM [ks.]t [WHERE ...]`` for a session using ``keyspace`` (and, with
        ``USE ks:shard``, ``target_shard``). Raises a ``ProxyError`` for a bad statement or
        unknown keyspace; table errors come from the iterator's first step."""
        statement = parse_stream(sql)
        ks = statement.keyspace or keyspace
        if ks is None:
            raise ProxyError(ER_NO_DB_ERROR, "No database selected")
        if ks not in self.shards:
            raise ProxyError(ER_BAD_DB_ERROR, f"Unknown database '{ks}'")
        shards = [target_shard] if target_shard is not None and ks == keyspace else None
        return self.subscribe(ks, statement.table, shards, statement.where)

    async def subscribe(
        self,
        keyspace: str,
        table: str,
        shards: list[str] | None = None,
        where: exp.Expression | str | None = None,
    ) -> AsyncIterator[Result]:
        """Fields first, then one chunk per batch sent to this subscriber, until closed."""
        if keyspace not in self.shards:
            raise ProxyError(ER_BAD_DB_ERROR, f"Unknown database '{keyspace}'")
        for s in shards or []:
            if s not in self.shards[keyspace]:
                raise ProxyError(ER_UNKNOWN_ERROR, f"no such shard: {keyspace}/{s}")
        managers = await self._resolve(keyspace, shards or self.shards[keyspace], table)
        spec = managers[0].spec
        predicate: StreamPredicate | None = None
        if where is not None:
            tree = where if isinstance(where, exp.Expression) else parse_stream(f"stream * from t where {where}").where
            assert tree is not None
            predicate = compile_predicate(tree, spec.streamed, spec.fields)
        fields = [dataclasses.replace(f, db=keyspace) for f in spec.fields]
        queue: asyncio.Queue[Delivery] = asyncio.Queue()
        # A subscription to every shard follows the keyspace's shards (set_shards); one to
        # named shards (USE ks:shard) stays on them.
        sub = _Subscription(keyspace, spec.name.lower(), queue, predicate, follows=shards is None)
        attached = sub.attached
        self._subscriptions.add(sub)
        try:
            for m in managers:
                sub.attach(m)
            await self._watch(keyspace, spec.name, +1)
            sub.watched = True
            logger.info(
                "message subscriber joined",
                extra={"keyspace": keyspace, "table": spec.name, "shards": [m.shard for m in managers]},
            )
            yield Result(fields=fields)
            seq = first_row_seq(len(fields))  # of the next row packet the client expects
            while True:
                delivery = await queue.get()
                if delivery.error is not None:
                    raise delivery.error
                if delivery.payloads is not None:
                    block = frame(delivery.payloads, seq)
                    seq = (seq + block.count) & 0xFF
                    yield Result(block=block)
                else:
                    assert delivery.result is not None
                    seq = (seq + len(delivery.result.rows)) & 0xFF
                    yield delivery.result
                delivery.receiver.free()
        finally:
            self._subscriptions.discard(sub)
            for m, receiver in attached:
                m.remove_receiver(receiver)
            if sub.watched:
                await self._watch(keyspace, spec.name, -1)
            logger.info("message subscriber left", extra={"keyspace": keyspace, "table": spec.name})

    async def _watch(self, keyspace: str, table: str, delta: int) -> None:
        """Reference-count the change watch of a table: running while it has subscribers."""
        if not self.watch_changes:
            return
        key = (keyspace, table.lower())
        watch: TableChangeWatch | None
        watch, count = self._watches.get(key, (None, 0))
        count += delta
        if watch is None and count > 0:
            watch = self._start_watch(keyspace, table)
        if count <= 0:
            self._watches.pop(key, None)
            if watch is not None:
                await watch.stop()
        else:
            assert watch is not None
            self._watches[key] = (watch, count)

    def _start_watch(self, keyspace: str, table: str) -> TableChangeWatch:
        endpoints = {(keyspace, s): self.pools.get(keyspace, s).address for s in self.shards[keyspace]}  # type: ignore[attr-defined]
        on_ddl = self.on_ddl
        watch = TableChangeWatch(
            endpoints, keyspace, table, lambda shard, at: self.binlog_insert(keyspace, shard, table, at),
            on_ddl=(lambda ks, _statement: on_ddl(ks)) if on_ddl is not None else None,
            skip_annotated=own_mark.needle(table),
        )
        watch.start()
        return watch

    # -- resharding ----------------------------------------------------------------------------
    async def set_shards(self, keyspace: str, shards: Sequence[str]) -> None:
        """The shards serving ``keyspace`` changed (a resharding switch): managers on shards
        that stopped serving close (their subscribers are detached first, not ended), managers
        on new shards open, and every subscription to the whole keyspace gets a receiver on
        them. Messages sent from a retired shard and not acked are on the new shards too (the
        switch copied the rows): they are sent again once their ack wait passes, as after a
        crash; none is lost."""
        if keyspace not in self.shards or list(shards) == self.shards[keyspace]:
            return
        async with self._reload_locks[keyspace]:
            retired = [s for s in self.shards[keyspace] if s not in shards]
            self.shards[keyspace] = list(shards)
            for shard in retired:
                self.tables.pop((keyspace, shard), None)
                for key in [k for k in self.managers if k[0] == keyspace and k[1] == shard]:
                    manager = self.managers.pop(key)
                    for sub in self._subscriptions:
                        if sub.follows:
                            sub.detach(manager)
                    # Subscribers of that shard alone (USE ks:shard) are told why their stream ends.
                    self._spawn_close(manager, SubscriptionEnded(
                        f"shard {keyspace}/{shard} no longer serves (resharded): subscribe again"))
        await self.reload(keyspace)
        for sub in [s for s in self._subscriptions if s.keyspace == keyspace and s.follows]:
            for shard in shards:
                serving = self.managers.get((keyspace, shard, sub.table))
                if serving is not None and serving not in sub.managers:
                    sub.attach(serving)
        for (ks, table), (watch, count) in list(self._watches.items()):
            if ks == keyspace:  # its binlog readers follow the new shards
                await watch.stop()
                self._watches[(ks, table)] = (self._start_watch(ks, table), count)
        logger.info("message tables follow new shards", extra={"keyspace": keyspace, "shards": ",".join(shards),
                                                                "retired": ",".join(retired)})

    # -- events from the front end -----------------------------------------------------------
    def notify(self, keyspace: str, shard: str | None, table: str) -> None:
        """Rows were committed into ``table`` on ``shard`` (None: any shard): poll now.

        A table that is not a message table is ignored (the caller need not check)."""
        for s in [shard] if shard is not None else self.shards.get(keyspace, []):
            manager = self.managers.get((keyspace, s, table.lower()))
            if manager is not None:
                manager.notify()

    def inserted(self, keyspace: str, write: MessageDml) -> None:
        """An INSERT into ``write.table`` through this proxy committed. With the statement each
        shard ran (``write.statements``) its managers cache the rows from their values where
        those are known exactly, else they poll (as ``notify``, which also serves a write whose
        statements are not known)."""
        self._insert_ended(keyspace, write.table)
        if not write.statements:
            for shard in write.shards or (None,):
                self.notify(keyspace, shard, write.table)
            return
        table = write.table.lower()
        for shard, statement in write.statements:
            manager = self.managers.get((keyspace, shard, table))
            if manager is not None:
                manager.committed_insert([statement])

    def binlog_insert(self, keyspace: str, shard: str, table: str, received_at: float) -> None:
        """The binlog watch read a commit inserting into ``table`` on ``shard`` at ``received_at``."""
        manager = self.managers.get((keyspace, shard, table.lower()))
        if manager is not None:
            manager.binlog_insert(received_at)

    def acked(self, keyspace: str, table: str, ids: Iterable[MessageId]) -> int:
        """Ids acked through the proxy: dropped from every cache of the table (beyond Vitess:
        an acked message waiting in the cache is not sent again). Returns how many of them this
        process had sent and was still counting as in flight."""
        given = ids if isinstance(ids, (list, tuple)) else list(ids)
        if set(map(type, given)) <= _TEXT_ID_TYPES:
            # The usual ack's ids (ints from the statement): converted at C speed.
            keys = list(map(str.encode, map(str, given)))
        else:
            keys = [id_bytes(i) for i in given]
        freed = 0
        for s in self.shards.get(keyspace, []):
            manager = self.managers.get((keyspace, s, table.lower()))
            if manager is not None:
                freed += manager.acked(keys)
        return freed

    # -- observability ----------------------------------------------------------------------
    def show_rows(self) -> Result:
        """``SHOW VITESS_MESSAGES``: one row per message table and shard."""
        rows = []
        for (keyspace, shard), loaded in sorted(self.tables.items()):
            for name, entry in sorted(loaded.items()):
                m = self.managers.get((keyspace, shard, name))
                if m is None:
                    error = entry.error.message if entry.error is not None else "not serving"
                    rows.append((keyspace, shard, entry.name, 0, 0, 0, 0, 0, 0, 0, 0, error))
                    continue
                c = m.counters
                rows.append(
                    (keyspace, shard, m.table, len(m.cache), m.in_flight, c.sent, c.acked, c.delayed, c.parked,
                     c.purged, len(m.receivers), "")
                )  # fmt: skip
        return local_result(SHOW_COLUMNS, rows, _SHOW_TYPES)
