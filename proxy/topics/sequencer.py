"""One topic's life in one proxy process: its sequencer, its followers' wake-ups, its purge.

Ordering, and why it is commit order with no late arrivals
----------------------------------------------------------
A message's id is taken from the topic's high-water mark (``last_ms``, ``last_seq`` of its
metadata row) by one of two writers, both holding that row's lock from reading the mark to
committing the ids they give:

* a **direct publish** (``proxy.topics.direct``): a publish whose transaction the proxy owns
  (an autocommit ``INSERT INTO topic ... VALUES`` through the proxy, REST's publish without a
  pointer) is one multi-statement ``BEGIN; UPDATE <mark>; INSERT <rows with their ids>;
  COMMIT``: its UPDATE locks the mark and moves it past the rows' ids, which the INSERT writes;
  the rows are readable at the commit, when the OK returns;
* a **sequencer pass** (``ShardTopicStore.sequence``), for rows written with no id: those of a
  client's transaction (``BEGIN ... INSERT ... COMMIT``; their place is taken at commit, so an
  open transaction holds nobody back), REST's commit markers, anything the proxy cannot rewrite
  exactly, and inserts made directly on the shard. A pass reads the committed rows still
  without id, in one consistent read; then, in one UPDATE, gives them the next ids after the
  mark and moves it, on the condition that the mark is still the one it read
  (compare-and-set), or, after losing that race once, with the mark read under its row lock
  in the same transaction (so a pass never starves however often direct publishes move the
  mark). Readers (the view, ``STREAM``, REST poll) see only rows with ids.

Either way the mark's row lock is held from the mark's read to the commit of the ids given
after it, so writers of every proxy take ids one at a time, each after the mark the previous
one committed. Hence:

* ids only grow, across writers and proxies (the mark each builds on is the locked, committed
  one: a proxy's remembered copy is only a guess), never behind the last id (``GREATEST`` of the
  shard's clock and the mark), and no id is used twice (a unique index backs it);
* a reader that sees an id B sees every id below B: those were committed by writers that held
  the mark's lock before B's writer could take it (InnoDB makes a transaction's changes visible
  before it releases its locks); and one writer's ids appear together, at its commit. So once a
  reader has seen id B, no id A < B can appear later: **no late arrivals**, for every reader,
  whatever it reads with (the shard's own MVCC is the arbiter, not any proxy's memory);
* a rolled-back transaction's rows never existed for the read; an open transaction's rows are
  invisible to a pass (READ COMMITTED, and rows are then reached by primary key only), so they
  hold nobody back, and get ids in the first pass after their commit — after everything made
  visible before that pass: **order is the order messages become visible**, which for a direct
  publish is its commit and for a deferred row its pass (rows of transactions that committed
  between the same two passes' reads are ordered by insert order, i.e. the auto-increment key,
  so a transaction's own messages keep their insert order);
* a proxy killed mid-publish or mid-pass loses nothing whose publish returned OK: a direct
  publish's transaction (rows and mark together) commits before its OK or rolls back with the
  connection; a pass's UPDATE rolls back (or never ran), its rows stay committed and
  un-sequenced, and the next pass of any proxy takes them.

A direct publish through this process wakes its followers at its OK (``published``); when a
commit through it left rows without ids, its sequencer runs a pass at once (``notify``), or,
under load, once the pacing interval after the previous pass began has passed (the commits of the
wait share it: the order argument above holds for a pass of any size): ``MIN_PASS_INTERVAL_S``,
or, after a pass of ``PACED_ROWS`` rows or more, ``PASS_SPACING`` times what that pass took, at most
``MAX_PASS_INTERVAL_S``; otherwise it probes every
``poll_seconds`` (rows inserted through other proxies or directly on the shard, and other
proxies' passes and direct publishes, which wake this process's followers).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from proxy.errors import ER_NO_SUCH_TABLE, ProxyError
from proxy.topics.store import PASS_LIMIT, ShardTopicStore

if TYPE_CHECKING:
    from proxy.topics.feed import TopicFeed

logger = logging.getLogger(__name__)

ERROR_BACKOFF_S = 1.0
# Under load a pass starts no sooner than this after the previous one started, and takes every
# commit of the wait: a pass costs the shard ~450 us whatever its size (its SELECT ~200 us, its
# UPDATE ~250 us plus ~20 us a row, ~13 since rows are updated in place (proxy.topics.schema);
# measured on 8- and 40-row passes), and back to back, passes
# took ~8 messages each from 4 single-message publishers. Paced: 0.045 passes per message
# instead of 0.13, shard CPU per message 175 -> 132 us, proxy 118 -> 101 us (``python -m
# tests.benchmarks topic_publish``, autocommit). A commit after a quiet 4 ms (at 200 commits/s,
# one every ~5.5 ms) gets its pass at once.
MIN_PASS_INTERVAL_S = 0.004
# After a pass of many rows (commits arriving much faster than passes), the next one starts no
# sooner than PASS_SPACING times what it took (passes take at most ~1/8 of the sequencer's time,
# and of the shard's), at most MAX_PASS_INTERVAL_S after it started (the visibility the pacing
# may add under load). Why: a pass's fixed cost is larger than the figures above under sustained
# load: its SELECT steps over the unpurged entries the previous passes left in the id index's
# NULL range (~276 pages read for ~17 rows, 0.38 ms of engine time; its UPDATE 0.46 ms for ~33
# rows: the shard's slow log, 4 single-message publishers), ~1 ms of shard CPU a pass in all.
# Passes of ~20 rows (4 ms) cost the shard ~+77 us a message over the same INSERTs of a plain
# table and the proxy ~+30 us; spaced (~150 rows a pass) +34 to +44 and +8 to +20 (BENCHMARKS.md,
# "single2"). Spaced only after a pass of at least PACED_ROWS rows (commits arriving at >= 2,000 a
# second): spacing after any pass of two rows held a 200-commits-a-second publisher in spaced
# passes (a longer wait, so two rows again), its STREAM p50 1.57 -> 2.03 ms (median of 9 runs);
# at 200 a second even the longest interval gathers 5 rows, so such a publisher is never spaced.
PASS_SPACING = 8
MAX_PASS_INTERVAL_S = 0.025
PACED_ROWS = 8


def pass_interval(took_s: float, rows: int) -> float:
    """The least time from the start of a pass that took ``took_s`` and sequenced ``rows`` to the
    start of the next paced one."""
    if rows < PACED_ROWS:
        return MIN_PASS_INTERVAL_S
    return min(MAX_PASS_INTERVAL_S, max(MIN_PASS_INTERVAL_S, PASS_SPACING * took_s))


@dataclass(frozen=True, slots=True)
class TopicInfo:
    keyspace: str
    name: str
    shard: str
    generation: int
    ttl_seconds: int
    properties: dict[str, str] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    created_ms: int = 0


@dataclass(slots=True)
class TopicCounters:
    passes: int = 0
    sequenced: int = 0
    direct: int = 0  # direct publishes through this process (ids assigned in the write)
    batches: int = 0  # scripts that carried several of them (proxy.topics.batch)
    batched: int = 0  # the direct publishes those carried
    fed: int = 0  # scripts whose rows went to the followers' feed without a read (proxy.topics.feed)
    purged: int = 0
    errors: int = 0
    last_pass_ms: float = 0.0


class TopicRuntime:
    """The sequencer task of one topic in this process, and the broadcast its followers wait on."""

    def __init__(
        self,
        info: TopicInfo,
        store: ShardTopicStore,
        *,
        poll_seconds: float,
        follow_poll_seconds: float,
        purge_seconds: float,
        pending_max_age_s: int,
        on_gone: asyncio.Event | None = None,
    ) -> None:
        self.info = info
        self.store = store
        self.poll_seconds = poll_seconds
        self.follow_poll_seconds = follow_poll_seconds
        self.purge_seconds = purge_seconds
        self.pending_max_age_s = pending_max_age_s
        self.on_gone = on_gone  # set when the topic is found dropped (the service refreshes)
        self.followers = 0
        self.last_id: str | None = None
        self.counters = TopicCounters()
        self._dirty = asyncio.Event()
        self._changed = asyncio.Event()
        self._pass_started = 0.0  # time.monotonic() at the start of the last pass
        self._pass_interval = MIN_PASS_INTERVAL_S  # the least time from its start to the next one's
        self._task: asyncio.Task[None] | None = None
        self._purge_task: asyncio.Task[None] | None = None
        # Reads of followers at one position, shared (proxy.topics.service.TopicService.follow).
        self.shared_reads: dict[tuple[str, int], asyncio.Future[Any]] = {}
        # The followers' shared reader of the log (proxy.topics.feed), made by the first follower.
        self.feed: TopicFeed | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            loop = asyncio.get_running_loop()
            where = f"{self.info.keyspace}.{self.info.name}"
            self._task = loop.create_task(self._run(), name=f"topic-sequencer:{where}")
            self._purge_task = loop.create_task(self._purge_loop(), name=f"topic-purge:{where}")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, self._purge_task) if t is not None]
        self._task = self._purge_task = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.feed is not None:
            await self.feed.stop()
        self._bump()  # followers wake, read, and find the topic gone

    # -- signals ------------------------------------------------------------------------------
    def notify(self) -> None:
        """Rows were committed into the topic: run a pass now."""
        self._dirty.set()

    def published(self) -> None:
        """A direct publish through this process committed (its rows have their ids): followers
        wake; no pass (the next one reads the mark it moved under the mark's lock)."""
        self.counters.direct += 1
        self.store.forget_mark(self.info.name)
        self._bump()

    def changed(self) -> asyncio.Event:
        """An event set at the next change of the high-water mark (take it before reading)."""
        return self._changed

    def _bump(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    # -- the loop -----------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            interval = self.follow_poll_seconds if self.followers else self.poll_seconds
            notified = False
            try:
                async with asyncio.timeout(interval):
                    await self._dirty.wait()
                notified = True
            except TimeoutError:
                pass
            try:
                if notified:
                    await self._paced_drain()
                else:
                    self._dirty.clear()
                    probe = await self.store.probe(self.info.name)
                    if probe.gone:
                        self._gone()
                        return
                    if probe.last_id != self.last_id:
                        self.last_id = probe.last_id
                        self._bump()
                    if probe.unsequenced:
                        await self._paced_drain()
            except ProxyError as e:
                self.counters.errors += 1
                if e.code == ER_NO_SUCH_TABLE:
                    self._gone()
                    return
                logger.warning("topic sequencer failed; retrying", extra={
                    "keyspace": self.info.keyspace, "shard": self.info.shard, "topic": self.info.name,
                    "error": e.message, "retry_s": ERROR_BACKOFF_S})
                await asyncio.sleep(ERROR_BACKOFF_S)
                self._dirty.set()

    async def _purge_loop(self) -> None:
        """TTL: expired messages deleted in the background (a task of its own, so a purge that
        waits never delays sequencing; readers never see expired rows anyway: the view hides them)."""
        while True:
            await asyncio.sleep(self.purge_seconds)
            try:
                purged = await self.store.purge(self.info.name, self.info.ttl_seconds, self.pending_max_age_s)
            except ProxyError as e:
                if e.code == ER_NO_SUCH_TABLE:
                    return
                logger.warning("topic purge failed; retrying", extra={
                    "keyspace": self.info.keyspace, "topic": self.info.name, "error": e.message})
                continue
            if purged:
                self.counters.purged += purged
                logger.info("topic purged", extra={"keyspace": self.info.keyspace, "topic": self.info.name,
                                                   "messages": purged})

    async def _paced_drain(self) -> None:
        """``drain``, starting no sooner than the pacing interval after the last pass started
        (the notifies of the wait are this pass's)."""
        delay = self._pass_started + self._pass_interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        self._dirty.clear()
        await self.drain()

    async def drain(self) -> None:
        """Passes until no committed row waits."""
        while True:
            started = time.perf_counter()
            self._pass_started = time.monotonic()
            result = await self.store.sequence(self.info.name)
            if result.gone:
                self._gone()
                return
            self.counters.passes += 1
            took = time.perf_counter() - started
            self.counters.last_pass_ms = took * 1000
            self._pass_interval = pass_interval(took, result.count)
            if result.last_id != self.last_id:
                self.last_id = result.last_id
                self.counters.sequenced += result.count
                self._bump()
            if result.count < PASS_LIMIT:
                return

    def _gone(self) -> None:
        logger.info("topic gone", extra={"keyspace": self.info.keyspace, "topic": self.info.name})
        self._bump()
        if self.on_gone is not None:
            self.on_gone.set()
