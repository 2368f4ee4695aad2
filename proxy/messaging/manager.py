"""One message manager per (keyspace, shard, message table): poller, cache, send loop, purge.

Delivery protocol (why it is safe with several proxies on one shard):

1. The poller reads due rows into the cache (and, beyond Vitess, arms a timer for the earliest
   future ``time_next`` so scheduled messages go out on time, not at the next poll). Rows
   inserted through this proxy go into the cache at commit from the INSERT's own values where
   those are known exactly (``committed_insert``, as Vitess's messager before vstreams), else
   the commit makes the manager poll.
2. The send loop picks the next free receiver round-robin and pops up to ``vt_batch_size``
   messages it accepts.
3. Before anything is sent, the batch is *claimed* in one transaction: the rows are read
   ``FOR UPDATE`` and only those still unacked, still due and with the ``epoch`` the poller saw
   are postponed (``epoch = epoch + 1``, ``time_next`` = next retry, or NULL to park after
   ``vt_max_attempts``). The row, not process memory, decides who sends: a second proxy that
   cached the same message finds a different epoch and skips it.
4. Only the claimed rows go to the receiver. A crash after the claim means redelivery after the
   ack wait, never loss; a receiver that vanished after the claim likewise.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from typing import Protocol

from asyncio_throttle import Throttler

from proxy.engine.result import Result, Row, decode_value
from proxy.errors import ProxyError
from proxy.messaging import sql
from proxy.messaging.backoff import NS, jitter, next_send_ns
from proxy.messaging.cache import CachedMessage, MessageCache
from proxy.messaging.claim_link import ClaimLinks
from proxy.messaging.errors import MessagingClosed, SubscriptionEnded
from proxy.messaging.inserted import BOOKKEEPING, exact_messages, exact_parsed, parse_insert_at
from proxy.messaging.own_mark import is_marked
from proxy.messaging.receiver import Receiver
from proxy.messaging.table import MessageTableSpec

logger = logging.getLogger(__name__)

# Claims (postpones) in flight at once per manager, as Vitess's postpone cap (default 4).
DEFAULT_POSTPONE_CAP = 4
# How long the binlog watch's wake-up for one of our own cached inserts is waited for (and an
# early wake-up is matched to our commit), in seconds: the watch reads a commit within a few
# milliseconds; an unmatched credit at worst lets one foreign insert wait for the next poll.
OWN_COMMIT_MATCH_SECONDS = 1.0
# How long a binlog wake-up that matches none of our cached commits waits for one to be
# reported before it polls, while this proxy is inserting: what a row written around the proxy
# may then wait more than before.
OWN_COMMIT_GRACE_SECONDS = 0.01
# How long at most the tail of a backlog (fewer than ``vt_batch_size`` messages left after a
# full batch went out at the same wake-up) waits in the cache for the rows of an own INSERT in
# flight, to go out with them in a whole batch. Sent at once, each tail was a delivery and a
# claim of its own (576 deliveries of 34.7 messages on average for 20k messages in
# bench_messaging, a third of them of 1-15 messages), and the subscribers' acks of 50 then
# straddled two deliveries, often of two shards: 4.8 claim and ack UPDATEs per 100 messages
# against raw's 4.0. A fixed 2 ms hold expired between two producers' commits and sent the
# tails alone (5.3); a fixed 10 ms one did on a loaded machine (4.8). A message with no backlog
# before it, or with no own INSERT in flight, never waits.
TAIL_HOLD_SECONDS = 0.020
# How long a pre-claimed INSERT (``preclaim``) may take to be reported committed: after this its
# reservation of cache and in-flight room is dropped (an INSERT that failed is not always
# reported), and a commit reported later is handled as any INSERT whose rows are not due: they
# come due at the ``time_next`` it wrote, as claimed messages never acked.
PRECLAIM_REPORT_SECONDS = 1.0
# A pre-claimed message goes out without a claim only while its ``time_next`` is further away
# than this share of the ack wait, so that no proxy sends it again within its ack wait, as
# Vitess promises (0.5 let another proxy send it again half an ack wait after ours). A late one
# is unclaimed (``_unclaim``) and claimed as Vitess claims it, at its send. (The pre-claim
# writes ack wait + backoff >= 2 ack waits by default ahead: a message is late only when no
# subscriber here took it for a whole min_backoff.)
PRECLAIM_MARGIN = 1.0


class ShardConn(Protocol):
    broken: bool

    async def execute(self, sql: str) -> Result: ...


class ConnectionSource(Protocol):
    """``proxy.pools.ShardPool``: ``async with pool.connection() as sc``."""

    def connection(self) -> AbstractAsyncContextManager[ShardConn]: ...


@dataclass(slots=True)
class MessageCounters:
    sent: int = 0
    acked: int = 0
    delayed: int = 0  # sent with epoch >= 1 (a redelivery)
    parked: int = 0
    purged: int = 0
    claim_lost: int = 0  # cached messages another proxy (or an ack/reschedule) took first
    postpone_failed: int = 0
    purge_failed: int = 0
    poll_failed: int = 0
    polls: int = 0
    polled_rows: int = 0
    claims: int = 0  # claim statements (or transactions) sent
    binlog_wakeups: int = 0  # binlog-watch inserts that made the manager poll
    binlog_covered: int = 0  # ... that a poll started since, or our own cached commit, covered
    inserts_cached: int = 0  # committed INSERTs through this proxy cached from their values
    inserts_polled: int = 0  # ... whose values were not known exactly (a poll reads them)
    inserts_in_doubt: int = 0  # own marked INSERTs (or COMMITs) that failed: polled for (own_mark)
    poll_skipped_settled: int = 0  # polled rows claimed or acked while that poll ran
    preclaimed: int = 0  # own INSERTs written already claimed for this manager (``preclaim``)
    preclaimed_sent: int = 0  # ... messages of them sent without a claim statement
    preclaims_undone: int = 0  # ... messages never sent from here, given back unclaimed (``_unclaim``)
    unclaim_failed: int = 0


@dataclass(slots=True)
class _Preclaim:
    """An own INSERT sent already claimed, until its commit is reported (``committed_insert``)."""

    messages: list[CachedMessage]
    time_next: int  # what it wrote (``CachedMessage.claimed_until``)
    started: float  # ``time.monotonic()``


_ID = attrgetter("id")
_ROW = attrgetter("row")
_EPOCH = attrgetter("epoch")
_PAYLOAD = attrgetter("payload")
_CLAIMED_UNTIL = attrgetter("claimed_until")


def _int(raw: bytes | None) -> int | None:
    return None if raw is None else int(raw)


class MessageManager:
    def __init__(
        self,
        keyspace: str,
        shard: str,
        spec: MessageTableSpec,
        pool: ConnectionSource,
        *,
        postpone_cap: int = DEFAULT_POSTPONE_CAP,
        clock: Callable[[], int] = time.time_ns,
        insert_in_flight: Callable[[], bool] = lambda: False,
    ) -> None:
        """``insert_in_flight``: whether an own INSERT into the table is on its way (a backlog's
        tail is held for its rows only then)."""
        self.keyspace = keyspace
        self.shard = shard
        self.spec = spec
        self.pool = pool
        self.clock = clock
        self.cache = MessageCache(spec.cache_size)
        self.counters = MessageCounters()
        self.receivers: list[Receiver] = []
        self._next_receiver = 0
        self._unacked: dict[bytes, int] = {}  # sent by us, not acked: id -> ack deadline (ns)
        self._pending = False  # the last poll left due rows in the table
        self._polling = False
        self._poll_requested = asyncio.Event()
        self._has_receivers = asyncio.Event()
        self._send_wake = asyncio.Event()
        self._next_due_ns: int | None = None
        # Since when (``time.monotonic()``) a backlog's tail waits to fill a batch; None: none waits.
        self._tail_since: float | None = None
        self.tail_hold = TAIL_HOLD_SECONDS
        self.insert_in_flight = insert_in_flight
        # When the latest poll started (``time.time()``, the binlog watch's clock).
        self._poll_started_at = 0.0
        # Ids claimed or acked while a poll runs: its snapshot may predate that, and re-caching
        # them made a claim lose to ourselves (claim_lost 98-365 per 25k messages with ONE
        # proxy in bench_messaging, each costing a claim_check SELECT).
        self._in_poll = False
        self._settled: set[bytes] = set()
        # Own inserts cached at commit whose binlog wake-up has not come yet, and wake-ups that
        # came before the commit they belong to was reported (``time.monotonic()``).
        self._own_commits: deque[float] = deque()
        self._early_wakeups: deque[float] = deque()
        self._own_insert_at = -OWN_COMMIT_MATCH_SECONDS  # the latest cached one
        # Own INSERTs sent already claimed, by their statement as sent (``preclaim``), and how
        # many messages they will add to the cache.
        self._preclaims: dict[str, _Preclaim] = {}
        self._reserved = 0
        self._claims = asyncio.Semaphore(postpone_cap)
        self._claim_links = ClaimLinks(pool, postpone_cap)
        self._throttler = self._make_throttler(spec)
        self._tasks: set[asyncio.Task[None]] = set()
        self._open = False

    # -- identity / observability -------------------------------------------------------
    @property
    def table(self) -> str:
        return self.spec.name

    @property
    def in_flight(self) -> int:
        self._expire_unacked(self.clock())
        return len(self._unacked)

    def __repr__(self) -> str:
        return f"MessageManager({self.keyspace}/{self.shard}.{self.table})"

    # -- lifecycle ------------------------------------------------------------------------
    def open(self) -> None:
        if self._open:
            return
        self._open = True
        self._claim_links.reopen()
        for coro in (self._poll_loop(), self._send_loop(), self._purge_loop()):
            self._spawn(coro)
        logger.info("message manager opened", extra={"keyspace": self.keyspace, "shard": self.shard, "table": self.table})

    async def close(self, reason: ProxyError | None = None) -> None:
        """Stop every task this manager owns and end its receivers' streams."""
        self._open = False
        for r in list(self.receivers):
            r.end(reason or MessagingClosed())
        self.receivers.clear()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        # Their failures were logged by _task_done; here we only wait for them to finish.
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._claim_links.close()
        self.cache.clear()

    def _spawn(self, coro: object) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "message manager task failed",
                extra={"keyspace": self.keyspace, "shard": self.shard, "table": self.table},
                exc_info=task.exception(),
            )

    # -- spec changes (beyond Vitess: live, without disconnecting subscribers) -------------
    def update_spec(self, spec: MessageTableSpec) -> None:
        if spec.streamed != self.spec.streamed or [f.type for f in spec.fields] != [f.type for f in self.spec.fields]:
            ended = SubscriptionEnded(f"message table {spec.name} changed its streamed columns: reconnect")
            for r in list(self.receivers):
                r.end(ended)
            self.receivers.clear()
            self._has_receivers.clear()
            ahead = self.cache.claimed_ahead()
            if ahead and self._open:
                self._spawn(self._unclaim(ahead))  # never sent: due again at once, as in Vitess
            self.cache.clear()
            # Pre-claimed INSERTs' messages carry the old columns: their rows come due instead.
            self._preclaims.clear()
            self._reserved = 0
        self.spec = spec
        self.cache.size = max(spec.cache_size, 1)
        self._throttler = self._make_throttler(spec)
        self.request_poll()
        self._send_wake.set()

    @staticmethod
    def _make_throttler(spec: MessageTableSpec) -> Throttler | None:
        if spec.max_rate <= 0:
            return None
        if spec.max_rate >= 1:
            return Throttler(rate_limit=round(spec.max_rate), period=1.0, retry_interval=0.002)
        return Throttler(rate_limit=1, period=1.0 / spec.max_rate, retry_interval=0.01)

    # -- receivers ---------------------------------------------------------------------------
    def add_receiver(self, receiver: Receiver) -> None:
        if not self._open:
            raise MessagingClosed()
        receiver.on_free.append(self._send_wake.set)
        self.receivers.append(receiver)
        self._has_receivers.set()
        self.request_poll()
        self._send_wake.set()

    def remove_receiver(self, receiver: Receiver) -> None:
        if receiver in self.receivers:
            idx = self.receivers.index(receiver)
            self.receivers.remove(receiver)
            if idx < self._next_receiver:
                self._next_receiver -= 1
        receiver.closed = True
        if not self.receivers:
            # As Vitess: the last subscriber leaving clears the cache (the rows stay due, and
            # so do those written already claimed for it: given back unclaimed).
            self._has_receivers.clear()
            ahead = self.cache.claimed_ahead()
            if ahead and self._open:
                self._spawn(self._unclaim(ahead))
            self.cache.clear()
            self._pending = False

    # -- external events --------------------------------------------------------------------
    def request_poll(self) -> None:
        """Poll now (a receiver arrived, the cache ran low, the spec changed, ...)."""
        self._poll_requested.set()

    def _low_water(self) -> int:
        """Below this many cached messages the next poll is due (keeps the pipeline full)."""
        return max(self.spec.batch_size, 1) * max(len(self.receivers), 1)

    def notify(self) -> None:
        """Rows were committed into the table: poll now, unless the cache already holds enough
        work; then the poll runs as soon as the cache drains below its low-water mark. (Under a
        backlog every commit would otherwise re-read up to ``vt_cache_size`` rows.)"""
        if len(self.cache) >= self._low_water():
            self._pending = True
            return
        self.request_poll()

    def in_doubt(self) -> None:
        """An own marked INSERT on this shard failed or its answer was lost: it may have
        committed rows the binlog watch skips (proxy/messaging/own_mark.py). Poll, as ``notify``."""
        self.counters.inserts_in_doubt += 1
        self.notify()

    def acked(self, ids: Iterable[bytes]) -> int:
        """Ids acked through the proxy: drop them from the cache and the in-flight count."""
        id_list = ids if isinstance(ids, list) else list(ids)
        self.cache.discard(id_list)
        if self._in_poll:
            self._settled.update(id_list)
        unacked = self._unacked
        # At C speed (set operations, ``map``): a subscriber's ack of 50 ids reaches the
        # manager of every shard of the table, most of whose ids it never sent.
        freed = 0
        if not unacked.keys().isdisjoint(id_list):
            freed = len(id_list) - list(map(unacked.pop, id_list, repeat(None, len(id_list)))).count(None)
        self.counters.acked += freed
        if freed:
            self._send_wake.set()
        if self.spec.ordering_col is not None:
            self.request_poll()  # the next message of each key is now at the head
        return freed

    def binlog_insert(self, received_at: float) -> None:
        """The binlog watch read the commit of an insert into this table at ``received_at``
        (``time.time()``). A poll that started since then, or one requested and not started
        yet, reads those rows: nothing to do. Nor for one of this proxy's own inserts that
        ``committed_insert`` cached. Otherwise as ``notify``. (As Vitess skips vstream events up
        to the poller's snapshot, by time rather than GTID: a row whose engine commit lags its
        binlog write is, at worst, found by the next poll.)"""
        if self._covered(received_at) or self._take_own_commit():
            self.counters.binlog_covered += 1
            return
        if time.monotonic() - self._own_insert_at < OWN_COMMIT_MATCH_SECONDS:
            # Perhaps one of ours not reported yet: a multi-shard INSERT commits its shards one
            # after another and is reported after the last, and the watch often reads the first
            # shard's commit before that (56 of ~500 own commits per shard polled for nothing in
            # bench_messaging without this wait). Only while this proxy is inserting.
            asyncio.get_running_loop().call_later(OWN_COMMIT_GRACE_SECONDS, self._binlog_insert_late, received_at)
        else:
            self._binlog_insert_late(received_at)

    def _binlog_insert_late(self, received_at: float) -> None:
        if self._covered(received_at) or self._take_own_commit():
            self.counters.binlog_covered += 1
            return
        self._early_wakeups.append(time.monotonic())  # for our commit, should it be reported later
        self.counters.binlog_wakeups += 1
        self.notify()

    def _covered(self, received_at: float) -> bool:
        return self._poll_started_at >= received_at or self._poll_requested.is_set()

    def _take_own_commit(self) -> bool:
        """Match a binlog wake-up with one of our cached commits not matched yet."""
        now = time.monotonic()
        own = self._own_commits
        while own and own[0] < now - OWN_COMMIT_MATCH_SECONDS:
            own.popleft()
        if own:
            own.popleft()
            return True
        return False

    def committed_insert(self, statements: Sequence[str]) -> None:
        """INSERTs through this proxy committed on this shard (each as the shard ran it): cache
        their messages from the values written (Vitess's messager before vstreams did the
        same), or, where a value is not known exactly (``proxy.messaging.inserted``), poll as
        ``notify``. Only after the commit: a row never committed is never delivered."""
        if self._preclaims:
            statements = [s for s in statements if not self._committed_preclaimed(s)]
            if not statements:
                return
        spec = self.spec
        if spec.insert_shape is None or spec.ordering_col is not None or self._pushdown_predicate() is not None:
            # FIFO heads and filtered polls depend on other rows: the poll decides.
            self.counters.inserts_polled += 1
            self.notify()
            return
        now = self.clock()
        messages: list[CachedMessage] = []
        for sql_text in statements:
            found = exact_messages(spec.insert_shape, spec.name, spec.streamed, spec.id_index, sql_text, now)
            if found is None:
                self.counters.inserts_polled += 1
                self.notify()
                return
            messages.extend(found)
        self.counters.inserts_cached += 1
        # Marked statements' rows are dropped unread by the watch's decoders (own_mark): no
        # wake-up will come to be matched with this commit.
        if not all(map(is_marked, statements)):
            self._expect_own_wakeup()
        if not self.receivers:
            return  # no cache without subscribers: the first one's poll reads these rows
        if not self.cache.add_new(messages, self._unacked):
            self._pending = True  # the rest are read once the cache drains
        self._send_wake.set()

    def preclaim(self, statement: str) -> str:
        """An own autocommit INSERT into the table about to be sent to this shard: written
        already claimed when this manager would send its rows from the cache at once anyway —
        every value known exactly, none of the bookkeeping columns named, a subscriber here that
        takes any message, room for them in the cache and under the in-flight cap (counting
        every message cached or pre-claimed before), no rate cap. Then the statement returned
        sets each row's ``epoch`` and ``time_next`` as this manager's claim would have
        (``epoch`` 1, ``time_next`` = now + ack wait + backoff, with its jitter), and once it is
        reported committed its messages go out without the claim UPDATE. Else ``statement``
        itself (the same object): cached or polled at its commit, and claimed, as before.

        Why: the claim was a shard write per batch (2 of the 4 UPDATEs per 100 messages in
        bench_messaging, with their binlog events). Other proxies never see these rows before
        their ``time_next`` (not due); messages of them not sent from here are given back
        unclaimed (``_unclaim``), due at once, as Vitess has a message never sent."""
        spec = self.spec
        if (
            not self._open
            or spec.insert_shape is None
            or spec.ordering_col is not None
            or self._throttler is not None
            or not self.receivers
            or self._pushdown_predicate() is not None
        ):
            return statement
        parsed = parse_insert_at(statement)
        if parsed is None or not set(parsed.columns).isdisjoint(BOOKKEEPING):
            return statement
        now = self.clock()
        messages = exact_parsed(spec.insert_shape, spec.name, spec.streamed, spec.id_index, parsed, now)
        if messages is None:
            return statement
        ids = list(map(_ID, messages))
        if not self._unacked.keys().isdisjoint(ids) or self.cache.holds_any(ids):
            # An id this manager sent or holds (a row deleted and written again): the cache
            # would skip the new row's message, left to come due only after its ack wait.
            return statement
        self._drop_stale_preclaims(time.monotonic())
        waiting = len(self.cache) + self._reserved + len(messages)
        if waiting > self.cache.size:
            return statement
        if spec.max_inflight > 0:
            self._expire_unacked(now)
            if len(self._unacked) + waiting > spec.max_inflight:
                return statement
        time_next = next_send_ns(spec, now, 0, jitter())
        if time_next is None:
            return statement  # its first send parks it (vt_max_attempts 1): the locking claim decides
        rewritten = sql.preclaimed_insert_sql(parsed, 1, time_next)
        if rewritten in self._preclaims:
            # The same statement already pre-claimed and not reported (same ids, same clock):
            # one entry a statement, or the other's reservation would never be released.
            return statement
        for m in messages:
            m.claimed_until = time_next
        self._preclaims[rewritten] = _Preclaim(messages, time_next, time.monotonic())
        self._reserved += len(messages)
        self.counters.preclaimed += 1
        return rewritten

    def _drop_stale_preclaims(self, now: float) -> None:
        """Forget pre-claimed INSERTs not reported within ``PRECLAIM_REPORT_SECONDS`` (oldest first)."""
        preclaims = self._preclaims
        while preclaims:
            first = next(iter(preclaims))
            entry = preclaims[first]
            if entry.started >= now - PRECLAIM_REPORT_SECONDS:
                return
            del preclaims[first]
            self._reserved -= len(entry.messages)

    def _committed_preclaimed(self, statement: str) -> bool:
        """``committed_insert`` of a statement ``preclaim`` wrote: its messages cached to go out
        without a claim (True), unless it is not one of those (False)."""
        entry = self._preclaims.pop(statement, None)
        if entry is None:
            return False
        self._reserved -= len(entry.messages)
        self.counters.inserts_cached += 1
        if not is_marked(statement):
            self._expect_own_wakeup()
        if not self.receivers or entry.time_next - self.clock() <= self._preclaim_margin_ns():
            # Not sent from here (the subscriber left, or the report came late): the rows go
            # back to the table unclaimed, due at once as Vitess has them, for any subscriber.
            if self._open:
                self._spawn(self._unclaim(entry.messages))
            return True
        self.cache.add_new(entry.messages, self._unacked, beyond_size=True)
        self._send_wake.set()
        return True

    def _preclaim_margin_ns(self) -> int:
        return int(self.spec.ack_wait * PRECLAIM_MARGIN * NS)

    def _claimed_ahead(
        self, batch: list[CachedMessage]
    ) -> tuple[list[CachedMessage], list[CachedMessage], list[CachedMessage]]:
        """(the messages of ``batch`` pre-claimed and still well before their time_next: sent
        without a claim; the others, to claim; of those, the pre-claimed ones too late, to be
        unclaimed first: then their claim is Vitess's, at their send, from epoch 0)."""
        if not any(map(_CLAIMED_UNTIL, batch)):
            return [], batch, []
        limit = self.clock() + self._preclaim_margin_ns()
        ahead = [m for m in batch if m.claimed_until > limit]
        if len(ahead) == len(batch):
            return batch, [], []
        to_claim = [m for m in batch if m.claimed_until <= limit]
        return ahead, to_claim, [m for m in to_claim if m.claimed_until]

    async def _unclaim(self, messages: list[CachedMessage], then_poll: bool = True) -> None:
        """Give pre-claimed messages never sent from here back to the table as their INSERT
        alone leaves them (``sql.unclaim_sql``): due at once, epoch 0, as in Vitess, where
        nothing claims a message before its send. Left claimed, a message whose subscriber
        left came due only after ack wait + backoff, for every subscriber here or on another
        proxy, and its first send counted as its second attempt (epoch 1: twice the backoff
        after it, parked one attempt early under ``vt_max_attempts``). A failure leaves them
        to come due at their time_next: delayed, never lost."""
        claims: dict[int, list[bytes]] = {}
        for m in messages:
            if m.claimed_until:
                claims.setdefault(m.claimed_until, []).append(m.id)
                m.claimed_until = 0
        if not claims:
            return
        try:
            async with self.pool.connection() as sc:
                res = await sc.execute(sql.unclaim_sql(self.spec, claims))
        except ProxyError as e:
            self.counters.unclaim_failed += 1
            logger.warning(
                "message pre-claim undo failed",
                extra={"keyspace": self.keyspace, "shard": self.shard, "table": self.table, "error": e.message},
            )
            for t in claims:  # they come due then: the poller looks
                if self._next_due_ns is None or t < self._next_due_ns:
                    self._next_due_ns = t
            return
        self.counters.preclaims_undone += res.affected_rows
        if then_poll and res.affected_rows and self.receivers:
            self.notify()

    def _expect_own_wakeup(self) -> None:
        """An own commit the binlog watch reports too: its wake-up is matched, not polled for."""
        early, at = self._early_wakeups, time.monotonic()
        self._own_insert_at = at
        while early and early[0] < at - OWN_COMMIT_MATCH_SECONDS:
            early.popleft()
        if early:
            early.popleft()  # its wake-up came first (and polled)
        else:
            self._own_commits.append(at)

    async def ack(self, ids: Iterable[bytes]) -> int:
        """Ack by id on this shard (Vitess's MessageAck); returns the rows acked."""
        id_list = list(ids)
        if not id_list:
            return 0
        async with self.pool.connection() as sc:
            res = await sc.execute(sql.ack_sql(self.spec, id_list, self.clock()))
        self.acked(id_list)
        return res.affected_rows

    # -- poller -------------------------------------------------------------------------------
    async def _poll_loop(self) -> None:
        while True:
            if not self.receivers:
                await self._has_receivers.wait()
            timeout = self.spec.poller_interval if self.spec.poller_interval > 0 else 1.0
            if self._next_due_ns is not None:
                timeout = min(timeout, max((self._next_due_ns - self.clock()) / NS, 0.0))
            try:
                async with asyncio.timeout(timeout):
                    await self._poll_requested.wait()
            except TimeoutError:
                pass
            self._poll_requested.clear()
            if not self.receivers:
                continue
            self._next_due_ns = None  # re-read by the poll; a failed poll must not spin
            self._polling = True
            try:
                await self.poll()
            except ProxyError as e:
                self.counters.poll_failed += 1
                logger.warning(
                    "message poll failed",
                    extra={"keyspace": self.keyspace, "shard": self.shard, "table": self.table, "error": e.message},
                )
            except Exception:
                # A bug, not a shard failure: report it loudly, keep the manager serving.
                self.counters.poll_failed += 1
                logger.exception("message poll crashed", extra={"keyspace": self.keyspace, "shard": self.shard, "table": self.table})
                await asyncio.sleep(self.spec.poller_interval if self.spec.poller_interval > 0 else 1.0)
            finally:
                self._polling = False

    def _pushdown_predicate(self) -> str | None:
        """With only filtered receivers, the poller reads only rows some receiver takes."""
        preds = [r.predicate_sql for r in self.receivers]
        if not preds or any(p is None for p in preds):
            return None
        return " OR ".join(f"({p})" for p in dict.fromkeys(preds))

    async def poll(self) -> int:
        """Read due rows into the cache; returns how many the table returned."""
        spec = self.spec
        now = self.clock()
        async with self.pool.connection() as sc:
            self._poll_started_at = time.time()
            self._settled.clear()
            self._in_poll = True
            try:
                res = await sc.execute(sql.poll_sql(spec, now, self._pushdown_predicate()))
            finally:
                self._in_poll = False
        settled = self._settled
        rows = res.rows
        timer_row = next((r for r in reversed(rows) if r[0] == b"1"), None)  # last, as a rule
        next_due = None if timer_row is None else _int(timer_row[2])
        due_rows = len(rows) - (timer_row is not None)
        self.counters.polls += 1
        self.counters.polled_rows += due_rows
        full = False
        cache = self.cache
        self._expire_unacked(now)
        for row in rows:
            if row[0] != b"0":
                continue
            mid = row[4 + spec.id_index]
            # Known, or sent by us within its ack wait (a snapshot older than our own
            # claim still shows it due), or claimed or acked while the poll ran: skip rather
            # than queue a claim that must lose.
            if cache.contains(mid) or mid in self._unacked:  # type: ignore[arg-type]
                continue
            if mid in settled:
                self.counters.poll_skipped_settled += 1
                continue
            msg = CachedMessage(
                id=mid,  # type: ignore[arg-type]
                priority=_int(row[1]) or 0,
                time_next=_int(row[2]),
                epoch=_int(row[3]) or 0,
                row=tuple(row[4:]),
            )
            if not cache.add(msg):
                full = True
                break
        self._pending = full or due_rows >= spec.cache_size
        if due_rows:
            self._send_wake.set()
        # Claims made while the poll ran may have set an earlier time (see _account_claim).
        if next_due is not None and (self._next_due_ns is None or next_due < self._next_due_ns):
            self._next_due_ns = next_due
        return due_rows

    # -- send loop ----------------------------------------------------------------------------
    def _expire_unacked(self, now: int) -> None:
        """Forget sent messages whose ack wait is over (they are due again, or were acked
        elsewhere). Entries are kept in deadline order, so this stops at the first live one."""
        unacked = self._unacked
        while unacked:
            first = next(iter(unacked))
            if unacked[first] > now:
                return
            del unacked[first]

    def _inflight_room(self) -> int | None:
        """How many more messages may be in flight (None: no cap)."""
        cap = self.spec.max_inflight
        if cap <= 0:
            return None
        self._expire_unacked(self.clock())
        return max(cap - len(self._unacked), 0)

    def _pick(self, after_full: bool = False) -> tuple[Receiver, list[CachedMessage]] | None:
        """The next free receiver and its batch. ``after_full``: a full batch went out at this
        wake-up, so fewer than a batch left is a backlog's tail, held (``tail_hold``)."""
        n = len(self.receivers)
        if n == 0 or len(self.cache) == 0:
            return None
        room = self._inflight_room()
        if room == 0:
            return None
        limit = max(self.spec.batch_size, 1) if room is None else min(max(self.spec.batch_size, 1), room)
        if len(self.cache) < limit and self._hold_tail(after_full):
            return None
        for step in range(n):
            idx = (self._next_receiver + step) % n
            r = self.receivers[idx]
            if r.busy or r.closed:
                continue
            accept = None if r.accepts is None else (lambda m, r=r: r.takes(m.row))
            batch = self.cache.pop(limit, accept)
            if not batch:
                continue
            r.busy = True
            self._next_receiver = (idx + 1) % n
            return r, batch
        return None

    def _hold_tail(self, after_full: bool) -> bool:
        """Whether a partial batch waits for more rows: it is a backlog's tail (a full batch
        went out at this wake-up, or it has been waiting since one did), an own INSERT into the
        table is in flight, and it has waited less than ``tail_hold`` seconds. With a filtered
        receiver (it takes only some messages) never."""
        now = time.monotonic()
        if self._tail_since is None:
            if not after_full or any(r.accepts is not None for r in self.receivers):
                return False
            self._tail_since = now
        if now - self._tail_since < self.tail_hold and self.insert_in_flight():
            return True
        self._tail_since = None
        return False

    def wake(self) -> None:
        """Look at the cache again (an own INSERT this manager may hold a tail for ended)."""
        self._send_wake.set()

    def _wake_timeout(self) -> float | None:
        """With the in-flight cap reached, wake when the earliest sent message's ack wait ends;
        with a backlog's tail held, when its hold ends."""
        timeout = None
        if self.spec.max_inflight > 0 and self._unacked and len(self._unacked) >= self.spec.max_inflight:
            timeout = max((min(self._unacked.values()) - self.clock()) / NS, 0.001)
        if self._tail_since is not None:
            hold = max(self._tail_since + self.tail_hold - time.monotonic(), 0.0)
            timeout = hold if timeout is None else min(timeout, hold)
        return timeout

    async def _send_loop(self) -> None:
        while True:
            timeout = self._wake_timeout()
            if timeout is None:
                # The usual wait: no cap reached, no tail held. Without a timeout context (one
                # per wake-up was 2% of the proxy's samples in bench_messaging).
                await self._send_wake.wait()
            else:
                try:
                    async with asyncio.timeout(timeout):
                        await self._send_wake.wait()
                except TimeoutError:
                    pass
            self._send_wake.clear()
            picks: list[tuple[Receiver, list[CachedMessage]]] = []
            full = False
            while (picked := self._pick(full)) is not None:
                if len(picked[1]) >= self.spec.batch_size:
                    full = True
                    self._tail_since = None  # a held tail went out in this full batch
                if self._throttler is not None:
                    for _ in picked[1]:
                        await self._throttler.acquire()
                picks.append(picked)
                if self._pending and not self._polling and len(self.cache) < self._low_water():
                    self.request_poll()
            if self._tail_since is not None and time.monotonic() - self._tail_since >= self.tail_hold:
                self._tail_since = None  # its hold is over with nothing held (cache emptied, no room)
            if picks:
                self._spawn(self._claim_and_deliver(picks))

    async def _claim_and_deliver(self, picks: list[tuple[Receiver, list[CachedMessage]]]) -> None:
        """Claim the batches of every receiver picked at one wake-up in one statement (a
        poll that finds work for several free receivers costs one UPDATE, not one each),
        then hand each receiver the rows of its batch that were won."""
        batch = picks[0][1] if len(picks) == 1 else [m for _, b in picks for m in b]
        rows: list[Row] = []
        epochs: list[int] = []
        whole = False
        handed = False
        try:
            ahead, to_claim, late = self._claimed_ahead(batch)
            if late:
                await self._unclaim(late, then_poll=False)  # they are claimed next, here
            if ahead:
                # Claimed by their own INSERT (``preclaim``): in flight from now, as after a claim.
                now = self.clock()
                self._account_claim(len(ahead), {m.id: m.claimed_until for m in ahead}, now)
                self.counters.preclaimed_sent += len(ahead)
            try:
                if to_claim:
                    async with self._claims:
                        claimed = await self._claim_or_all(to_claim)
                else:
                    claimed = None
                if claimed is None:
                    whole = True
                else:
                    rows, epochs = claimed
            except ProxyError as e:
                self.counters.postpone_failed += 1
                logger.warning(
                    "message claim failed",
                    extra={"keyspace": self.keyspace, "shard": self.shard, "table": self.table, "error": e.message},
                )
            if not whole and ahead:
                rows = [*rows, *map(_ROW, ahead)]
                epochs = [*epochs, *map(_EPOCH, ahead)]
            if whole:
                # The usual claim: every message won, each receiver gets its part as cached.
                counters = self.counters
                for receiver, part in picks:
                    if receiver.closed:
                        receiver.free()
                        continue
                    counters.sent += len(part)
                    if max(map(_EPOCH, part)) >= 1:
                        counters.delayed += sum(1 for m in part if m.epoch >= 1)
                    payloads = list(map(_PAYLOAD, part))
                    if None in payloads:
                        receiver.offer(Result(rows=list(map(_ROW, part))))
                    else:
                        receiver.offer_payloads(payloads)  # type: ignore[arg-type]  # no None (checked)
                handed = True
                return
            id_index = self.spec.id_index
            won = {row[id_index]: (row, epoch) for row, epoch in zip(rows, epochs, strict=True)}
            for receiver, part in picks:
                mine = [won[m.id] for m in part if m.id in won]
                if not mine or receiver.closed:
                    # Nothing to send (another proxy won, the claim failed, or the subscriber
                    # left: claimed rows come back after their ack wait). Free again.
                    receiver.free()
                    continue
                self.counters.sent += len(mine)
                self.counters.delayed += sum(1 for _, e in mine if e >= 1)
                receiver.offer(Result(rows=[r for r, _ in mine]))
            handed = True
        finally:
            ids = list(map(_ID, batch))
            if self._in_poll:
                self._settled.update(ids)
            self.cache.release(ids)
            if not handed:
                for receiver, _ in picks:
                    receiver.free()

    async def _claim(self, batch: list[CachedMessage]) -> tuple[list[Row], list[int]]:
        """Postpone the rows this proxy may send; returns them with the epochs they were sent at."""
        claimed = await self._claim_or_all(batch)
        if claimed is None:
            return [m.row for m in batch], [m.epoch for m in batch]
        return claimed

    async def _claim_or_all(self, batch: list[CachedMessage]) -> tuple[list[Row], list[int]] | None:
        """As ``_claim``, but None when every message of the batch was claimed as cached (the
        usual claim: its messages then go out without a row or epoch list rebuilt).

        Fast path, one statement: an UPDATE conditional on each row's cached epoch (and on the
        row still being due and unacked). InnoDB re-checks the condition under the row lock, so
        exactly one claimer moves a row from epoch ``e`` to ``e + 1``. If fewer rows changed than
        were asked for, the rows are read back: ours are those now at ``e + 1`` with exactly
        the ``time_next`` (nanoseconds) we wrote. A batch that would park a message takes the
        locking path instead, because a parked ``time_next`` (NULL) cannot tell claimers apart."""
        if not batch:
            return [], []
        self.counters.claims += 1
        spec = self.spec
        now = self.clock()
        factor = jitter()
        # One formula per epoch (as a rule all of a batch are at 0): per message it was 10% of
        # the claim's CPU in bench_messaging.
        by_epoch = {e: next_send_ns(spec, now, e, factor) for e in set(map(_EPOCH, batch))}
        next_times: dict[bytes, int | None]
        if len(by_epoch) == 1:
            next_times = dict.fromkeys(map(_ID, batch), next(iter(by_epoch.values())))
        else:
            next_times = {m.id: by_epoch[m.epoch] for m in batch}
        if None in by_epoch.values():
            winners, epochs, claimed = await self._claim_locked(batch, now, factor)
        else:
            statement = sql.conditional_postpone_sql(spec, batch, next_times, now)
            affected = await self._claim_links.affected_rows(statement)
            if affected == len(batch):
                self._account_claim(len(batch), next_times, now)
                return None
            async with self.pool.connection() as sc:
                if affected is None:  # no link at hand: the pool's connection claims
                    affected = (await sc.execute(statement)).affected_rows
                    if affected == len(batch):
                        self._account_claim(len(batch), next_times, now)
                        return None
                check = await sc.execute(sql.claim_check_sql(spec, next_times))
                mine = {
                    row[0] for row in check.rows
                    if row[0] in next_times
                    and _int(row[1]) == next(m.epoch for m in batch if m.id == row[0]) + 1
                    and _int(row[2]) == next_times[row[0]]  # type: ignore[index]
                }  # fmt: skip
                won = [m for m in batch if m.id in mine]
            winners = [m.row for m in won]
            epochs = [m.epoch for m in won]
            claimed = {m.id: next_times[m.id] for m in won}
        self._account_claim(len(batch), claimed, now)
        return winners, epochs

    async def _claim_locked(
        self, batch: list[CachedMessage], now: int, factor: float
    ) -> tuple[list[Row], list[int], dict[bytes, int | None]]:
        """Read the candidates FOR UPDATE, postpone those still as cached, in one transaction."""
        spec = self.spec
        expected = {m.id: m.epoch for m in batch}
        id_at = 2 + spec.id_index
        winners: list[Row] = []
        epochs: list[int] = []
        next_times: dict[bytes, int | None] = {}
        async with self.pool.connection() as sc:
            try:
                await sc.execute("START TRANSACTION")
                current = await sc.execute(sql.claim_read_sql(spec, expected))
                for row in current.rows:
                    mid = row[id_at]
                    epoch = _int(row[0]) or 0
                    time_next = _int(row[1])
                    due = (time_next is None and epoch == 0) or (time_next is not None and time_next <= now)
                    if mid is None or mid not in expected or expected[mid] != epoch or not due:
                        continue
                    next_times[mid] = next_send_ns(spec, now, epoch, factor)
                    winners.append(tuple(row[2:]))
                    epochs.append(epoch)
                if next_times:
                    await sc.execute(sql.postpone_sql(spec, next_times))
                await sc.execute("COMMIT")
            except BaseException:
                # Closing the connection rolls the transaction back on the server.
                sc.broken = True
                raise
        return winners, epochs, next_times

    def _account_claim(self, asked: int, claimed: dict[bytes, int | None], now: int) -> None:
        self.counters.claim_lost += asked - len(claimed)
        deadline = now + int(self.spec.ack_wait * NS)
        unacked = self._unacked
        if not unacked.keys().isdisjoint(claimed):
            for mid in claimed:
                unacked.pop(mid, None)  # re-inserted last: the dict stays in deadline order
        unacked.update(dict.fromkeys(claimed, deadline))
        # As a rule one next time per claim (the jitter is per claim): checked once each.
        for t in set(claimed.values()):
            if t is None:
                self.counters.parked += sum(1 for v in claimed.values() if v is None)
            # Proactive scheduling: the poller wakes when the earliest postponed row is due.
            elif self._next_due_ns is None or t < self._next_due_ns:
                self._next_due_ns = t

    # -- purge ------------------------------------------------------------------------------
    async def _purge_loop(self) -> None:
        while True:
            await asyncio.sleep(self.spec.poller_interval if self.spec.poller_interval > 0 else 1.0)
            self._expire_unacked(self.clock())
            try:
                await self.purge()
            except ProxyError as e:
                self.counters.purge_failed += 1
                logger.warning(
                    "message purge failed",
                    extra={"keyspace": self.keyspace, "shard": self.shard, "table": self.table, "error": e.message},
                )

    async def purge(self) -> int:
        """Delete acked rows older than ``vt_purge_after``, 500 at a time; returns the count."""
        total = 0
        while True:
            cutoff = self.clock() - int(self.spec.purge_after * NS)
            async with self.pool.connection() as sc:
                res = await sc.execute(sql.purge_sql(self.spec, cutoff))
            total += res.affected_rows
            self.counters.purged += res.affected_rows
            if res.affected_rows < sql.PURGE_BATCH_ROWS:
                return total

    # -- helpers for subscribers ---------------------------------------------------------------
    def decode_row(self, row: Row) -> dict[str, object]:
        return {
            name: decode_value(f, v) for name, f, v in zip(self.spec.streamed, self.spec.fields, row, strict=True)
        }
