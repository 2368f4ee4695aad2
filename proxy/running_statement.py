"""The statement a client session is running, and how it is stopped: ``KILL QUERY``,
``KILL CONNECTION`` and statement timeouts (``max_execution_time``, Vitess's
``/*vt+ QUERY_TIMEOUT_MS=n */``).

A statement runs (executes and writes its result) in a task of its own, which makes
it the current ``RunningStatement`` (a context variable the tasks it starts inherit,
a scatter's per-shard readers among them). Every ``ShardConnection.stream`` registers
its connection with the current statement while its query is on the shard, so a kill
knows the shard threads to stop.

Stopping a statement, in this order:

1. it is marked killed: a shard query it would start from now on fails at once;
2. ``KILL QUERY <thread id>`` goes to every shard thread it has a query on, over a
   side connection to that shard (the queries end on the shards, not only at the
   proxy: a cancelled read alone leaves ``SELECT SLEEP(60)`` running there);
   connections outside a transaction are also marked broken, so the pool closes
   them rather than reuse one that may have caught the kill late;
3. the statement usually ends by itself within milliseconds, failing with the
   shards' "interrupted" errors, which keeps a transaction's pinned connections in
   a clean state (MySQL keeps the transaction when KILL QUERY aborts a statement);
   if it does not within ``KILL_GRACE_S`` (or had nothing on a shard: waiting for a
   pool, merging rows, writing to a slow client), its task is cancelled.

The client gets MySQL's 1317 ``Query execution was interrupted`` (SQLSTATE 70100),
or 3024 (HY000) when the statement ran out of time; the session stays usable.

Race, accepted: a shard query that ends just as the kill is sent may already have
left the shard, and ``KILL QUERY`` then reaches an idle thread (harmless: that
connection is closed, not reused, outside a transaction).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from proxy.errors import ER_QUERY_INTERRUPTED, ER_QUERY_TIMEOUT, ProxyError

if TYPE_CHECKING:
    from proxy.pools import ShardConnection, ShardPool

logger = logging.getLogger(__name__)


class ShardQueryConnection(Protocol):
    """A shard connection a statement's query runs on, as KILL QUERY reaches it: the pools'
    ``ShardConnection`` and the fast path's ``ShardLink``."""

    broken: bool

    @property
    def thread_id(self) -> int: ...

    @property
    def pool(self) -> ShardPool: ...

    @property
    def keyspace(self) -> str: ...

    @property
    def shard(self) -> str: ...

T = TypeVar("T")

# How long a killed statement may take to end by itself (its shard queries answering
# "interrupted") before its task is cancelled.
KILL_GRACE_S = 1.0

_CURRENT: ContextVar[RunningStatement | None] = ContextVar("shardgate_running_statement", default=None)


def current() -> RunningStatement | None:
    """The statement the calling task works for, if any (background tasks: none)."""
    return _CURRENT.get()


class KillReason(enum.Enum):
    QUERY = "query"  # KILL QUERY
    TIMEOUT = "timeout"  # max_execution_time / QUERY_TIMEOUT_MS
    CONNECTION = "connection"  # KILL [CONNECTION]


class StatementKilled(ProxyError):
    """The statement was stopped by a kill or its timeout (its task was cancelled).
    ``answered``: its last packet had already gone to the client (write no error then)."""

    def __init__(self, error: ProxyError, answered: bool) -> None:
        super().__init__(error.code, error.message, error.sqlstate)
        self.answered = answered


class RunningStatement:
    def __init__(
        self,
        sql: str,
        timeout_s: float | None = None,
        pinned: Callable[[], Iterable[ShardConnection]] = tuple,
    ) -> None:
        self.sql = sql
        self.timeout_s = timeout_s
        self.started = time.monotonic()
        self.killed: KillReason | None = None
        self.finished = False
        # The last packet of the statement's response has been handed to the client's
        # transport (a kill arriving later must not write an error after it).
        self.answered = False
        self._pinned = pinned  # the session's transaction connections: kept, never marked broken
        self._on_shards: set[ShardQueryConnection] = set()
        self._task: asyncio.Task[Any] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._grace: asyncio.TimerHandle | None = None
        self._killer: asyncio.Task[None] | None = None

    # -- what ShardConnection.stream tells ------------------------------------------
    def shard_query_started(self, sc: ShardQueryConnection) -> None:
        if self.finished:
            return  # a background task started by this statement outlives it: not ours to stop
        if self.killed is not None:
            raise self.error()
        self._on_shards.add(sc)

    def shard_query_ended(self, sc: ShardQueryConnection) -> None:
        self._on_shards.discard(sc)

    @property
    def shard_queries(self) -> int:
        return len(self._on_shards)

    # -- the error the client gets -----------------------------------------------------
    def error(self) -> ProxyError:
        if self.killed is KillReason.TIMEOUT:
            return ProxyError(
                ER_QUERY_TIMEOUT, "Query execution was interrupted, maximum statement execution time exceeded"
            )
        return ProxyError(ER_QUERY_INTERRUPTED, "Query execution was interrupted")

    # -- running ------------------------------------------------------------------------
    async def run(self, body: Coroutine[Any, Any, T]) -> T:
        """Run ``body`` (the statement's execution and result writing) in a task of its
        own; raises ``StatementKilled`` if a kill had to cancel it."""
        if self.killed is not None:
            body.close()
            raise self._killed_error()
        self._task = asyncio.create_task(self._as_current(body))
        if self.timeout_s is not None:
            self._timer = asyncio.get_running_loop().call_later(self.timeout_s, self._time_out)
        try:
            return await self._task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self.killed is not None and (me is None or me.cancelling() == 0):
                raise self._killed_error() from None
            raise  # our own task is being cancelled (the connection ends)

    def start(self, body: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """``body`` in a task of its own as this statement (its shard queries reached by a
        kill, the task cancelled after ``KILL_GRACE_S``), not awaited: for the fast path,
        which has no task to wait in and hears of the task's end by a done callback."""
        self._task = asyncio.get_running_loop().create_task(self._as_current(body))
        return self._task

    async def _as_current(self, body: Coroutine[Any, Any, T]) -> T:
        _CURRENT.set(self)  # this task's context only (and the tasks it starts)
        return await body

    def _killed_error(self) -> StatementKilled:
        return StatementKilled(self.error(), self.answered)

    def _time_out(self) -> None:
        self._timer = None
        if self.finished or self.killed is not None:
            return
        logger.info("statement timed out", extra={"timeout_s": self.timeout_s, "statement": self.sql[:200]})
        self._killer = asyncio.create_task(self.kill(KillReason.TIMEOUT))  # awaited by finish()

    async def kill(self, reason: KillReason) -> None:
        """Stop the statement at the shards and at the proxy (see the module docstring).
        Returns once the shards have been told."""
        if self.finished or self.killed is not None:
            return
        self.killed = reason
        on_shards = list(self._on_shards)
        pinned = {id(sc) for sc in self._pinned()}
        for sc in on_shards:
            if id(sc) not in pinned:
                sc.broken = True
        outcomes = await asyncio.gather(
            *(sc.pool.kill_query(sc.thread_id) for sc in on_shards), return_exceptions=True
        )
        for sc, outcome in zip(on_shards, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                logger.warning(
                    "KILL QUERY on a shard failed",
                    extra={"keyspace": sc.keyspace, "shard": sc.shard, "thread_id": sc.thread_id, "error": str(outcome)},
                )
        task = self._task
        if task is None or task.done() or self.finished or task is asyncio.current_task():
            return  # (the last: KILL of its own session, which answers and ends by itself)
        if on_shards:
            self._grace = asyncio.get_running_loop().call_later(KILL_GRACE_S, task.cancel)
        else:
            task.cancel()

    async def finish(self) -> None:
        """The statement is over: stop its timers, let a timeout's kill complete."""
        self.finished = True
        for handle in (self._timer, self._grace):
            if handle is not None:
                handle.cancel()
        self._timer = self._grace = None
        killer, self._killer = self._killer, None
        if killer is not None:
            try:
                await killer
            except Exception as e:  # logged, the statement is over anyway
                logger.warning("stopping a timed-out statement failed", extra={"error": str(e)})
