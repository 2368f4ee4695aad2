"""The topics service of one proxy process: the registry of topics, their sequencers, and the
operations SQL sessions, the REST API and the Python client share.

The registry is a cache: the truth is each shard's ``_tms_topics`` table. It is read at start,
every ``refresh_seconds``, when a sequencer finds its topic gone, and on a miss (a statement
failing with 1146, a REST call naming an unknown topic), so a topic created through another
proxy is usable here at once. Admin answers (``get``, ``list``, ``SHOW TOPICS``) always read
the shards.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mysql_mimic.types import ColumnType

from proxy.config import TopicsConfig
from proxy.engine.result import PacketBlock, Result, local_result, split_packets
from proxy.errors import (
    ER_CONNECTION_KILLED,
    ER_NO_DB_ERROR,
    ER_NOT_SUPPORTED_YET,
    ER_SERVER_SHUTDOWN,
    ProxyError,
    ShardError,
    ShardUnavailable,
)
from proxy.messaging.statement import parse_stream
from proxy.pools import ShardPools
from proxy.topics import direct, ids, kept, routing, statement
from proxy.topics.batch import Settings, TopicBatcher
from proxy.topics.errors import (
    InvalidTopicRequest,
    KeyspaceNotFound,
    ServiceStopping,
    TopicExists,
    TopicNotFound,
    naming_the_topic,
)
from proxy.topics.feed import TopicFeed
from proxy.topics.http import add_topic_routes
from proxy.topics.names import check_name, keyspace_id, place
from proxy.topics.schema import generation_guard, view_select_list
from proxy.topics.sequencer import TopicInfo, TopicRuntime
from proxy.topics.statement import StartPosition
from proxy.topics.store import ER_NO_SUCH_TABLE, ShardTopicStore, TopicRow, rows_of
from proxy.twopc import TWOPC
from rewriter.evaluate import like
from sqltext.lexer import strip_leading_comments
from vschema.internal_tables import is_internal
from vschema.model import Table, VSchema
from vschema.tracked_schema import TableSchema, TrackedSchema

if TYPE_CHECKING:
    from proxy.cluster_state import ClusterState
    from proxy.session import Outcome, ProxySession

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlanWithTopics:
    """A statement joining topics with tables beyond the topic's shard: planned by the
    executor with ``catalog`` (the vschema and tracked schema in which each topic is a table
    pinned to its shard)."""

    catalog: tuple[VSchema, TrackedSchema]

FOLLOW_BATCH = 200  # rows per read of a follower (big payloads: keep a read bounded)
FOLLOW_MAX_WAIT_S = 1.0
# A follower's read that lost its shard (a restart, a killed connection: ShardUnavailable, or
# the shard's own 1927/1053) is read again from the same position, on a fresh connection: a
# read takes nothing, so the stream resumes with no gap and no duplicate. Only a shard gone
# longer than this ends the stream with that error (a restart of the tests' mariadbd takes
# ~0.3 s; a killed connection's retry succeeds at once).
FOLLOW_SHARD_RETRY_S = 10.0
FOLLOW_SHARD_BACKOFF_S = 0.2
_SHARD_LOST_CODES = frozenset({ER_CONNECTION_KILLED, ER_SERVER_SHUTDOWN})
MAX_POLL_LIMIT = 10000
# A plain COMMIT / ROLLBACK (proxy.executor's forms): the end of a transaction that kept rows.
_PLAIN_END = re.compile(r"^(?:commit|rollback)(?:\s+work)?\s*;?$", re.I)

SHOW_COLUMNS = ["Keyspace", "Topic", "Shard", "Generation", "TTL_seconds", "Messages", "Bytes",
                "Oldest_publish_time", "Newest_publish_time", "Publish_rate", "Subscribers", "Last_id"]
_L, _S = ColumnType.LONGLONG, ColumnType.VAR_STRING
_SHOW_TYPES = [_S, _S, _S, _L, _L, _L, _L, _L, _L, ColumnType.DOUBLE, _L, _S]


@dataclass(frozen=True, slots=True)
class Message:
    id: str
    publish_time: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class TopicWrite:
    """An INSERT into a topic, told to its sequencer when it commits (``direct``: its rows took
    their ids in the write, ``proxy.topics.direct``: followers wake, no pass)."""

    keyspace: str
    name: str
    direct: bool = False


def _last_first_column(block: PacketBlock) -> bytes | None:
    """The first column (message_id) of the last row packet of a block, without decoding rows."""
    data = block.data
    pos, end, last = 0, len(data), 0
    while pos < end:
        n = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
        if n == 0xFFFFFF:  # a row of 16 MiB or more: split it properly
            payload = split_packets(data)[-1]
            break
        last = pos
        pos += 4 + n
    else:
        payload = data[last + 4 :]
    if payload[0] == 0xFB:
        return None
    length = payload[0]  # message ids are 20 bytes: a one-byte length
    return bytes(payload[1 : 1 + length])


def _last_id(res: Result) -> str:
    """The id of a read's last row (a read that returned rows)."""
    last = _last_first_column(res.block) if res.block is not None else res.rows[-1][0]
    assert last is not None
    return last.decode() if isinstance(last, bytes) else str(last)


def _relayed(res: Result, next_seq: int | None, cache: dict[int, PacketBlock] | None) -> tuple[Result, int | None]:
    """A read's rows to send to a follower whose client expects packet ``next_seq`` next, and
    the sequence id after them. A block is renumbered to continue the client's sequence, so it
    goes out whole (the connection checks; it re-frames every packet otherwise); ``cache``
    keeps the renumbered copies of a shared chunk for the other followers."""
    block = res.block
    if block is None:
        return Result(rows=list(res.rows)), next_seq
    if next_seq is not None and block.first_seq != next_seq:
        copy = cache.get(next_seq) if cache is not None else None
        if copy is None:
            copy = _renumbered(block, next_seq)
            if cache is not None:
                cache[next_seq] = copy
        block = copy
    return Result(block=block), (block.first_seq + block.count) % 256


async def _wait(event: asyncio.Event) -> None:
    try:
        async with asyncio.timeout(FOLLOW_MAX_WAIT_S):
            await event.wait()
    except TimeoutError:
        pass


def _shard_lost(e: ProxyError) -> bool:
    """Whether a read failed because its connection to the shard was lost (worth reading again)."""
    return isinstance(e, ShardUnavailable) or (isinstance(e, ShardError) and e.code in _SHARD_LOST_CODES)


def _renumbered(block: PacketBlock, first_seq: int) -> PacketBlock:
    data = bytearray(block.data)
    pos, end, seq = 0, len(data), first_seq
    while pos < end:
        data[pos + 3] = seq
        seq = (seq + 1) & 0xFF
        pos += 4 + (data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16)
    return PacketBlock(bytes(data), block.count, first_seq)


def _info(keyspace: str, shard: str, row: TopicRow) -> TopicInfo:
    return TopicInfo(keyspace, row.name, shard, row.generation, row.ttl_seconds, dict(row.properties),
                     list(row.columns), row.created_ms)


class _Feeding:
    """A topic's direct publishes (``proxy.topics.batch``) to its followers' feed in this
    process (``TopicFeed.offer``), through whichever runtime serves the topic now."""

    __slots__ = ("_runtimes", "_key", "_columns")

    def __init__(self, runtimes: dict[tuple[str, str], TopicRuntime], key: tuple[str, str]) -> None:
        self._runtimes = runtimes
        self._key = key
        self._columns: tuple[TopicInfo, str] | None = None  # the view's columns, quoted, for a topic's info

    def _feed(self) -> tuple[TopicRuntime, TopicFeed] | None:
        rt = self._runtimes.get(self._key)
        feed = rt.feed if rt is not None else None
        return None if rt is None or feed is None else (rt, feed)

    def rows(self) -> direct.FeedRows | None:
        found = self._feed()
        after = found[1].wants_rows() if found is not None else None
        if found is None or after is None:
            return None
        info = found[0].info
        cached = self._columns
        if cached is None or cached[0] is not info:
            cached = self._columns = (info, view_select_list(info.columns))
        ms, seq = ids.parse_id(after)
        return direct.FeedRows(cached[1], info.ttl_seconds, ms, seq)

    def committed(self, asked: direct.FeedRows | None, rows: Result | None, count: int) -> None:
        found = self._feed()
        if found is None:
            return
        rt, feed = found
        if asked is None or rows is None:
            feed.missed()
        elif feed.offer(ids.make_id(asked.after_ms, asked.after_seq), rows, count) is not None:
            rt.counters.fed += 1


class TopicService:
    def __init__(self, proxy: ClusterState, settings: TopicsConfig | None = None) -> None:
        self.proxy = proxy
        self.settings = settings or TopicsConfig()
        addresses = [p.address for _, p in sorted(proxy.pools.pools.items())]
        self.pools = ShardPools(addresses, maxsize=16)
        self.stores = {(a.keyspace, a.shard): ShardTopicStore(self.pools.get(a.keyspace, a.shard)) for a in addresses}
        self.runtimes: dict[tuple[str, str], TopicRuntime] = {}
        self.stopping = False  # set by ``stop``: what ends a follower then is the proxy's stop
        # Each topic's direct publishes from this process (``proxy.topics.batch``), made on first use.
        self.batchers: dict[tuple[str, str, str, int | None], TopicBatcher] = {}
        self._pattern: re.Pattern[str] | None = None
        self._gone = asyncio.Event()
        self._refresh_task: asyncio.Task[None] | None = None
        self._refreshing: dict[str, asyncio.Future[None]] = {}
        self._read_since: dict[str, float] = {}  # start time of the latest completed refresh
        # Planning with topics as tables (``catalog``): the views' columns by (keyspace, topic,
        # generation), and the last catalog built, with the vschema and the key it was built for.
        self._view_columns: dict[tuple[str, str, int], TableSchema] = {}
        self._catalog: tuple[VSchema, tuple[Any, ...], tuple[VSchema, TrackedSchema]] | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the registry's refresh timer, whose first round reads the shards at once (in the
        background: a down shard must not delay start-up; a miss before it ends refreshes anyway)."""
        self._gone.set()
        self._refresh_task = asyncio.get_running_loop().create_task(self._refresh_loop(), name="topics-refresh")

    async def stop(self) -> None:
        task, self._refresh_task = self._refresh_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self.stopping = True  # followers woken below end with 1053, not as if their topic were dropped
        runtimes, self.runtimes = self.runtimes, {}
        await asyncio.gather(*(rt.stop() for rt in runtimes.values()), return_exceptions=True)
        batchers, self.batchers = self.batchers, {}
        await asyncio.gather(*(b.stop() for b in batchers.values()), return_exceptions=True)
        await self.pools.close()

    async def _refresh_loop(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self.settings.refresh_seconds):
                    await self._gone.wait()
            except TimeoutError:
                pass
            self._gone.clear()
            try:
                await self.refresh()
            except ProxyError as e:  # logged per shard in refresh; anything else: next round
                logger.warning("topics: refresh failed", extra={"error": e.message})

    # -- registry -------------------------------------------------------------------------------
    @property
    def keyspaces(self) -> list[str]:
        return sorted(self.proxy.config.keyspaces)

    def _keyspace(self, keyspace: str | None) -> str:
        if keyspace is None:
            raise ProxyError(ER_NO_DB_ERROR, "No database selected")
        if keyspace not in self.proxy.config.keyspaces:
            raise KeyspaceNotFound(keyspace)
        return keyspace

    def _shards(self, keyspace: str) -> list[str]:
        return self.proxy.shard_names(keyspace)

    def _sharded(self, keyspace: str) -> bool:
        return self.proxy.is_sharded(keyspace)

    def placement(self, keyspace: str, name: str) -> str:
        return place(keyspace, self._shards(keyspace), self._sharded(keyspace), name)

    def store_for(self, keyspace: str, name: str) -> ShardTopicStore:
        return self.stores[(keyspace, self.placement(keyspace, name))]

    def lookup(self, keyspace: str | None, name: str) -> TopicInfo | None:
        if keyspace is None:
            return None
        rt = self.runtimes.get((keyspace, name))
        return rt.info if rt is not None else None

    async def refresh(self, keyspace: str | None = None) -> None:
        """Read the shards' topic rows (one keyspace, or all) into the registry."""
        for ks in [keyspace] if keyspace else self.keyspaces:
            started = time.monotonic()
            found: dict[str, TopicInfo] = {}
            unread: set[str] = set()
            for shard in self._shards(ks):
                try:
                    rows = await self.stores[(ks, shard)].topics()
                except ProxyError as e:
                    unread.add(shard)
                    logger.warning("topics: cannot read topics of a shard", extra={
                        "keyspace": ks, "shard": shard, "error": e.message})
                    continue
                for row in rows:
                    if row.live and self.placement(ks, row.name) == shard:
                        found[row.name] = _info(ks, shard, row)
            for (k, name), rt in list(self.runtimes.items()):
                if k == ks and name not in found and rt.info.shard not in unread:
                    await self._uninstall(k, name)
            for info in found.values():
                await self._install(info)
            self._read_since[ks] = max(self._read_since.get(ks, started), started)

    async def refresh_on_miss(self, keyspace: str) -> None:
        """Returns once a refresh of ``keyspace`` that started after this call has ended;
        concurrent misses share one refresh."""
        missed_at = time.monotonic()
        while self._read_since.get(keyspace, float("-inf")) < missed_at:
            running = self._refreshing.get(keyspace)
            if running is None or running.done():
                # A refresh that has ended but whose done callback has not run yet must not be
                # awaited again: awaiting a done future does not yield, so this loop would spin
                # and starve the very callback that removes it (seen: a proxy at 100% CPU for
                # minutes when many statements hit a dropped topic's 1146 at once).
                running = asyncio.ensure_future(self.refresh(keyspace))
                self._refreshing[keyspace] = running
                running.add_done_callback(functools.partial(self._refreshed, keyspace))
            await asyncio.shield(running)

    def _refreshed(self, keyspace: str, done: asyncio.Future[None]) -> None:
        """A refresh of ``keyspace`` ended: no longer the one to join (unless a newer one is)."""
        if self._refreshing.get(keyspace) is done:
            del self._refreshing[keyspace]

    async def _install(self, info: TopicInfo) -> TopicRuntime:
        key = (info.keyspace, info.name)
        rt = self.runtimes.get(key)
        if rt is not None and rt.info.generation == info.generation and rt.info.shard == info.shard:
            rt.info = info  # TTL or properties changed
            return rt
        if rt is not None:
            await rt.stop()
            for old in [k for k in self.batchers if k[:2] == key and k[3] != info.generation]:
                await self.batchers.pop(old).stop()  # the previous generation's
        s = self.settings
        rt = TopicRuntime(
            info, self.stores[(info.keyspace, info.shard)], poll_seconds=s.poll_seconds,
            follow_poll_seconds=s.follow_poll_seconds, purge_seconds=s.purge_seconds,
            pending_max_age_s=s.pending_max_age_seconds, on_gone=self._gone,
        )
        self.runtimes[key] = rt
        rt.start()
        rt.notify()  # rows may be waiting (a proxy died before its pass)
        self._pattern = routing.names_pattern(n for _, n in self.runtimes)
        logger.info("topic serving", extra={"keyspace": info.keyspace, "topic": info.name, "shard": info.shard,
                                            "generation": info.generation})
        return rt

    async def _uninstall(self, keyspace: str, name: str) -> None:
        rt = self.runtimes.pop((keyspace, name), None)
        self._pattern = routing.names_pattern(n for _, n in self.runtimes)
        if rt is not None:
            await rt.stop()
        for key in [k for k in self.batchers if k[:2] == (keyspace, name)]:
            await self.batchers.pop(key).stop()

    def batcher(self, keyspace: str, name: str, shard: str) -> TopicBatcher:
        """The topic's direct publishes from this process: one in flight, the next ones batched;
        one batcher per generation (its scripts lock the mark of that generation only)."""
        rt = self.runtimes.get((keyspace, name))
        generation = rt.info.generation if rt is not None else None
        key = (keyspace, name, shard, generation)
        b = self.batchers.get(key)
        if b is None:
            pools = self.proxy.pools

            def counted(publishers: int) -> None:
                rt = self.runtimes.get((keyspace, name))
                if rt is not None:
                    rt.counters.batches += 1
                    rt.counters.batched += publishers

            b = self.batchers[key] = TopicBatcher(
                name, lambda: pools.get(keyspace, shard), counted, _Feeding(self.runtimes, (keyspace, name)), generation
            )
        return b

    async def topic_info(self, keyspace: str, name: str) -> TopicInfo:
        ks = self._keyspace(keyspace)
        info = self.lookup(ks, name)
        if info is None:
            await self.refresh_on_miss(ks)
            info = self.lookup(ks, name)
        if info is None:
            raise TopicNotFound(ks, name)
        return info

    async def view_shard(self, keyspace: str | None, name: str) -> tuple[str, str] | None:
        """(keyspace, shard) of the view of topic ``name`` (where statements about its definition
        go: ``SHOW CREATE TABLE``, ``DESCRIBE``, ``SHOW INDEX``); None if it is no topic. A name
        that is no table of the keyspace either reads the registry again first (a topic created
        through another proxy)."""
        ks = self.proxy.vschema.keyspaces.get(keyspace) if keyspace is not None else None
        if keyspace is None or ks is None or keyspace not in self.proxy.config.keyspaces:
            return None
        info = self.lookup(keyspace, name)
        if info is None and name not in ks.tables:
            await self.refresh_on_miss(keyspace)
            info = self.lookup(keyspace, name)
        return None if info is None else (info.keyspace, info.shard)

    def runtime(self, info: TopicInfo) -> TopicRuntime:
        rt = self.runtimes.get((info.keyspace, info.name))
        if rt is None:
            raise TopicNotFound(info.keyspace, info.name)
        return rt

    # -- admin (SQL and REST) -------------------------------------------------------------------
    async def create_topic(
        self, keyspace: str | None, name: str, properties: dict[str, Any] | None = None, *,
        user_definitions: Sequence[str] = (), user_columns: Sequence[str] = (), if_not_exists: bool = False,
    ) -> TopicInfo | None:
        ks = self._keyspace(keyspace)
        check_name(name)
        ttl, props = statement.normalise_properties(dict(properties or {}))
        if name in self.proxy.vschema.keyspaces[ks].tables:
            raise TopicExists(ks, name)
        shard = self.placement(ks, name)
        row = await self.stores[(ks, shard)].create(name, ttl, props, user_definitions, user_columns, if_not_exists)
        if row is None:
            return None
        info = _info(ks, shard, row)
        await self._install(info)
        self.proxy.ddl_seen(ks)
        await self.proxy.live_vschema.announce(ks, f"create topic {name}")  # the other proxies refresh now
        return info

    async def drop_topic(self, keyspace: str | None, name: str, if_exists: bool = False) -> bool:
        ks = self._keyspace(keyspace)
        dropped = await self.store_for(ks, name).drop(name, if_exists)
        await self._uninstall(ks, name)
        if dropped:
            self.proxy.ddl_seen(ks)
            await self.proxy.live_vschema.announce(ks, f"drop topic {name}")
        return dropped

    async def get_topic(self, keyspace: str | None, name: str) -> TopicRow:
        ks = self._keyspace(keyspace)
        row = await self.store_for(ks, name).topic(name)
        if row is None or not row.live:
            raise TopicNotFound(ks, name)
        return row

    async def list_topics(self, keyspace: str | None) -> list[tuple[str, TopicRow]]:
        """(shard, row) of every live topic of ``keyspace``, by name."""
        ks = self._keyspace(keyspace)
        out: list[tuple[str, TopicRow]] = []
        for shard in self._shards(ks):
            for row in await self.stores[(ks, shard)].topics():
                if row.live and self.placement(ks, row.name) == shard:
                    out.append((shard, row))
        return sorted(out, key=lambda sr: sr[1].name)

    async def update_topic(self, keyspace: str | None, name: str, changes: dict[str, Any], replace: bool = False) -> TopicRow:
        """New properties: ``changes`` merged into the current ones (``replace``: instead of them,
        CDAP's ``PUT .../properties``; a missing TTL then falls back to the default)."""
        ks = self._keyspace(keyspace)
        current = await self.get_topic(ks, name)
        merged = dict(changes) if replace else {**current.properties, **changes}
        ttl, props = statement.normalise_properties(merged)
        row = await self.store_for(ks, name).set_properties(name, ttl, props)
        await self._install(_info(ks, self.placement(ks, name), row))
        await self.proxy.live_vschema.announce(ks, f"alter topic {name}")
        return row

    # -- publish / poll (REST, client) ----------------------------------------------------------
    async def publish(self, keyspace: str, name: str, payloads: Sequence[bytes]) -> int:
        """Non-transactional publish: durable when this returns; with its ids (a direct publish)
        from ``topics.direct_min_rows`` messages on, else (and when the direct publish's script
        would not go as one packet) at the pass it wakes."""
        info = await self.topic_info(keyspace, name)
        store = self.stores[(info.keyspace, info.shard)]
        marked = False
        insert = None
        if payloads and len(payloads) >= self.settings.direct_min_rows:
            insert = store.direct_insert(info.name, payloads)
        if insert is not None:
            res, marked = await self.batcher(info.keyspace, info.name, info.shard).publish(insert, ())
            count = res.affected_rows
        else:
            count = await store.insert(info.name, payloads)
        if marked:
            self.runtime(info).published()
        else:
            self.runtime(info).notify()
        return count

    async def store_payloads(self, keyspace: str, name: str, pointer: int, payloads: Sequence[bytes]) -> int:
        """CDAP ``store``: payloads kept under a transaction write pointer, invisible until published."""
        info = await self.topic_info(keyspace, name)
        return await self.stores[(info.keyspace, info.shard)].insert(info.name, payloads, pointer, pending=True)

    async def publish_pointer(self, keyspace: str, name: str, pointer: int, payloads: Sequence[bytes]) -> int:
        """CDAP's transactional publish (the commit marker): ``payloads`` and everything stored under
        ``pointer`` take their places in the order now, together."""
        info = await self.topic_info(keyspace, name)
        count = await self.stores[(info.keyspace, info.shard)].commit_pointer(info.name, pointer, payloads)
        self.runtime(info).notify()
        return count

    async def rollback_pointer(self, keyspace: str, name: str, pointer: int) -> int:
        info = await self.topic_info(keyspace, name)
        return await self.stores[(info.keyspace, info.shard)].rollback_pointer(info.name, pointer)

    async def poll(self, keyspace: str, name: str, start: StartPosition, limit: int = 1000) -> list[Message]:
        if limit <= 0:
            raise InvalidTopicRequest(f"limit must be a positive number of messages, got {limit}")
        # A poll is one chunk (CDAP's clients pass Integer.MAX_VALUE and continue from the last
        # id they got): a bigger limit reads MAX_POLL_LIMIT, as the byte cap cuts a poll short.
        limit = min(limit, MAX_POLL_LIMIT)
        info = await self.topic_info(keyspace, name)
        res = await self.stores[(info.keyspace, info.shard)].read(
            info.name, start.condition(), limit, self.settings.max_poll_bytes, "message_id, publish_time, payload")
        return [Message(r[0], int(r[1]), bytes(r[2])) for r in rows_of(res)]

    async def wait_sequenced(self, keyspace: str, name: str) -> None:
        """Run a sequencer pass now (tests, benchmarks, a publisher that wants its ids)."""
        info = await self.topic_info(keyspace, name)
        await self.runtime(info).drain()

    async def follow(self, info: TopicInfo, start: StartPosition, batch: int = FOLLOW_BATCH) -> AsyncIterator[Result]:
        """A broadcast subscription: the view's fields, then every message from ``start`` on, in
        order, as passes make them visible, until the consumer stops or the topic is dropped.

        Followers of a topic share one reader of its log (``proxy.topics.feed``): a follower at
        one of the feed's labels takes its chunks without a read; one elsewhere reads on its own
        up to the next label and joins there. Rows are relayed as the shard's packets, never
        decoded: only the last row's id is read, to continue from."""
        rt = self.runtime(info)
        store = self.stores[(info.keyspace, info.shard)]
        guard = generation_guard(info.name, info.generation)  # never the next generation's messages
        feed = rt.feed
        if feed is None:
            max_bytes = self.settings.max_poll_bytes

            def read(condition: str) -> Awaitable[Result]:
                return store.read(info.name, f"{condition} AND {guard}", FOLLOW_BATCH, max_bytes)

            feed = rt.feed = TopicFeed(f"{info.keyspace}.{info.name}", read, rt.changed, lambda: rt.last_id, _last_id)
        rt.followers += 1
        feed.join()
        logger.info("topic follower joined", extra={"keyspace": info.keyspace, "topic": info.name,
                                                   "start": start.after_id, "followers": rt.followers})
        shared = own = 0  # chunks taken from the feed, reads of its own (logged when it leaves)
        try:
            position = start
            sent_fields = False
            next_seq: int | None = None  # the packet sequence id the client expects next
            lost_since: float | None = None  # monotonic time of the first read since that lost the shard
            while True:
                if self.stopping:
                    raise ServiceStopping(info.keyspace, info.name)
                if self.runtimes.get((info.keyspace, info.name)) is not rt:
                    raise TopicNotFound(info.keyspace, info.name)
                serving = feed.serving
                chunk = feed.chunk_after(position.after_id) if serving and sent_fields and not position.inclusive else None
                if chunk is not None:
                    position = StartPosition(chunk.last, inclusive=False)
                    out, next_seq = _relayed(chunk.result, next_seq, chunk.renumbered)
                    shared += 1
                    yield out
                    continue
                waiter, changed = feed.waiter(), rt.changed()
                label = feed.label_from(position.after_id, position.inclusive) if serving else None
                if serving and sent_fields and label is None:  # at (or past) the feed's head
                    await _wait(waiter)
                    continue
                condition = f"{position.condition()} AND {guard}"
                if label is not None:  # read up to the label, to join the feed there
                    condition = f"{condition} AND message_id <= '{label}'"
                try:
                    res = await self._shared_read(rt, store, info.name, condition, batch, self.settings.max_poll_bytes)
                    own += 1
                except ProxyError as e:
                    if self.stopping:  # the read failed as the pools closed
                        raise ServiceStopping(info.keyspace, info.name) from e
                    if e.code == ER_NO_SUCH_TABLE:  # dropped before this process uninstalled it
                        raise TopicNotFound(info.keyspace, info.name) from e
                    if not _shard_lost(e):
                        raise
                    now = time.monotonic()
                    lost_since = now if lost_since is None else lost_since
                    if now - lost_since >= FOLLOW_SHARD_RETRY_S:
                        raise
                    logger.warning("topic follower lost its shard; reading again from its position", extra={
                        "keyspace": info.keyspace, "topic": info.name, "shard": info.shard,
                        "position": position.after_id, "error": e.message, "retry_s": FOLLOW_SHARD_BACKOFF_S})
                    await asyncio.sleep(FOLLOW_SHARD_BACKOFF_S)
                    continue
                lost_since = None
                if not sent_fields:
                    sent_fields = True
                    yield Result(fields=[dataclasses.replace(f, db=info.keyspace) for f in res.fields])
                count = res.block.count if res.block is not None else len(res.rows)
                if count:
                    position = StartPosition(_last_id(res), inclusive=False)
                    out, next_seq = _relayed(res, next_seq, None)
                    yield out
                    if label is not None or count >= batch or (rt.last_id is not None and position.after_id < rt.last_id):
                        continue  # more to read before the label (or a backlog, a read cut short by the byte cap)
                elif label is not None:
                    # Nothing visible up to the label, and everything up to it was visible when
                    # the feed read it: the follower is at the label.
                    position = StartPosition(label, inclusive=False)
                    continue
                await _wait(waiter if feed.serving else changed)
        finally:
            rt.followers -= 1
            feed.leave()
            logger.info("topic follower left", extra={"keyspace": info.keyspace, "topic": info.name,
                                                     "feed_chunks": shared, "own_reads": own, "followers": rt.followers})

    @staticmethod
    async def _shared_read(rt: TopicRuntime, store: ShardTopicStore, name: str, condition: str, batch: int,
                           max_bytes: int) -> Result:
        key = (condition, batch)
        reads = rt.shared_reads
        future = reads.get(key)
        if future is None:
            future = asyncio.ensure_future(store.read(name, condition, batch, max_bytes))
            reads[key] = future

            def forget(f: asyncio.Future[Result], k: tuple[str, int] = key) -> None:
                if reads.get(k) is f:
                    del reads[k]
                if not f.cancelled():
                    f.exception()  # retrieved: each reader re-raises it through the shield

            future.add_done_callback(forget)
        return await asyncio.shield(future)

    def mount_http(self, app: Any) -> None:
        """Add the REST routes (CDAP's paths) to an aiohttp application."""
        add_topic_routes(app, self)

    # -- planning -------------------------------------------------------------------------------
    async def catalog(self) -> tuple[VSchema, TrackedSchema]:
        """The proxy's vschema and tracked schema with every topic as a table: in a sharded
        keyspace pinned to its shard (the keyspace id ``place`` maps to it), with its view's
        columns. Statements that join topics with sharded tables (or topics of several shards)
        are planned against it: each topic becomes a route to its shard, reading the view.

        Rebuilt only when the vschema, the tracked schema or the set of topics changes: the
        plan cache keys plans by the vschema's identity and the schema's version."""
        base, tracked = self.proxy.vschema, self.proxy.schema
        infos = sorted((rt.info for rt in self.runtimes.values()), key=lambda i: (i.keyspace, i.name))
        key = (tracked.version, tuple((i.keyspace, i.name, i.shard, i.generation) for i in infos))
        cached = self._catalog
        if cached is not None and cached[0] is base and cached[1] == key:
            return cached[2]
        await self._load_view_columns(infos)
        keyspaces = dict(base.keyspaces)
        schemas = {ks: dict(tables) for ks, tables in tracked.keyspaces.items()}
        for info in infos:
            columns = self._view_columns.get((info.keyspace, info.name, info.generation))
            ks = keyspaces.get(info.keyspace)
            if columns is None or ks is None or info.name in ks.tables:
                continue  # not readable yet (the view is being created), or a vschema table wins
            pinned = keyspace_id(info.name) if ks.sharded else None
            table = Table(name=info.name, keyspace=info.keyspace, pinned=pinned)
            keyspaces[info.keyspace] = dataclasses.replace(ks, tables={**ks.tables, info.name: table})
            schemas.setdefault(info.keyspace, {})[info.name.lower()] = columns
        catalog = (VSchema(keyspaces, base.routing_rules), TrackedSchema(schemas))
        self._catalog = (base, key, catalog)
        return catalog

    async def _load_view_columns(self, infos: Sequence[TopicInfo]) -> None:
        """Read the view columns of the topics not read yet (one query per shard); forget those
        of dropped topics and old generations."""
        current = {(i.keyspace, i.name, i.generation) for i in infos}
        self._view_columns = {k: v for k, v in self._view_columns.items() if k in current}
        missing: dict[tuple[str, str], list[TopicInfo]] = {}
        for info in infos:
            if (info.keyspace, info.name, info.generation) not in self._view_columns:
                missing.setdefault((info.keyspace, info.shard), []).append(info)
        for where, group in missing.items():
            found = await self.stores[where].view_columns([i.name for i in group])
            for info in group:
                columns = found.get(info.name.lower())
                if columns is not None:
                    self._view_columns[(info.keyspace, info.name, info.generation)] = columns

    # -- SQL hooks ------------------------------------------------------------------------------
    async def route(self, session: ProxySession, sql: str, kw: str) -> Outcome | PlanWithTopics | None:
        """Run a statement about topics (topic DDL, or one that names a topic); None: not ours;
        ``PlanWithTopics``: the executor plans it with that catalog (topics joined with tables
        beyond the topic's shard)."""
        pattern = self._pattern
        if kw in routing.TABLE_DDL_KW:
            if statement.is_topic_ddl(sql):
                return await self._ddl(session, sql)
            if pattern is not None and session.target_shard is None and pattern.search(sql) is not None:
                routing.refuse_table_ddl(sql, kw, session.keyspace, self.lookup)
            return None
        if pattern is None or session.target_shard is not None or pattern.search(sql) is None:
            return None
        routed = routing.route(sql, kw, session.keyspace, self.lookup, self._sharded)
        if routed is None:
            return None
        if routed.planned:
            return PlanWithTopics(await self.catalog())
        if routed.insert_into is not None:
            insert = self.direct_insert(session, routed)
            if insert is not None:
                return await self._publish_direct(session, routed, insert)
            answer = self.keep(session, routed)
            if answer is not None:
                return answer
            await self.flush_kept(session)  # not kept: after the rows kept before it, in order
            # The after-write hook reads the topic from here (a topic INSERT is routed, never
            # planned: one reading beyond its shard is refused above).
            session.written_table = (routed.insert_into.keyspace, routed.insert_into.name)
        if kw in ("select", "with", "(", "table", "values"):
            return session.vcursor.stream_shard(routed.keyspace, routed.shard, routed.sql)
        try:
            return await session.vcursor.execute_shard(routed.keyspace, routed.shard, routed.sql)
        except ProxyError as e:
            if routed.insert_into is None:
                raise
            raise naming_the_topic(e, routed.insert_into.name) from None

    async def after_unknown_table(
        self, session: ProxySession, sql: str, kw: str
    ) -> Outcome | PlanWithTopics | None:
        """A statement failed with 1146: a topic created through another proxy may be it
        (answered as ``route`` answers)."""
        before = set(self.runtimes)
        for ks in ({session.keyspace} | set(re.findall(r"`?(\w+)`?\s*\.", sql))) & set(self.keyspaces):
            await self.refresh_on_miss(ks)  # type: ignore[arg-type]  # intersected with the keyspace names: a str
        if set(self.runtimes) == before:
            return None
        return await self.route(session, sql, kw)

    def fast_publish(self, session: ProxySession, sql: str) -> routing.Routed | None:
        """An ``INSERT INTO topic ... VALUES`` the fast path may send as it is routed here (no
        parse, no plan); None: the normal path runs it. Once it succeeded (committed, inside a
        transaction), ``published`` wakes the topic's sequencer, as the commit hook does on the
        normal path."""
        if session.target_shard is not None:
            return None
        try:
            return routing.route_publish(sql, session.keyspace, self.lookup)
        except ProxyError:
            return None  # REPLACE: the normal path refuses it

    def direct_insert(
        self, session: ProxySession, routed: routing.Routed, in_transaction: bool = False
    ) -> direct.DirectInsert | None:
        """The direct publish (``proxy.topics.direct``: ids assigned in the write) of a routed
        INSERT whose transaction the proxy owns: an autocommit one outside a client's transaction
        (an implicit transaction of the statement alone, twopc/multi mode, is the proxy's too),
        of at least ``topics.direct_min_rows`` messages. None: the deferred path (NULL ids, a
        pass) runs it: inside a client's transaction, into the view, fewer messages, or not
        rewritten exactly."""
        topic, target = routed.insert_into, routed.target
        if topic is None or target is None or in_transaction or not session.autocommit:
            return None
        tx = session.tx
        if tx is not None and not (tx.implicit and not tx.conns):
            return None
        settings = session.settings
        if settings and "sql_mode" in settings and any(c in routed.sql for c in ('"', "\\", "''")):
            return None  # ANSI_QUOTES / NO_BACKSLASH_ESCAPES: the scanner reads the default sql_mode
        minimum = self.settings.direct_min_rows
        if minimum > 1 and routed.sql.count("(", target[1]) < minimum + 1:
            # Fewer parentheses than the column list and ``minimum`` rows: fewer rows, for sure
            # (the one-message publish skips the script's ~5 us).
            return None
        insert = direct.read_direct(routed.sql, target[0], target[1], topic.name)
        return None if insert is None or insert.rows < self.settings.direct_min_rows else insert

    def keep(self, session: ProxySession, routed: routing.Routed) -> Result | None:
        """Keep the rows of ``routed`` (an INSERT into a topic inside a client's transaction) to
        the transaction's COMMIT when they cannot fail to insert (``proxy.topics.kept``) and
        are at least ``topics.direct_min_rows`` (as an autocommit publish's direct path): the
        INSERT's OK, answered here (affected rows, MariaDB's info text); None: it runs now (the
        caller first flushes what the transaction kept). autocommit=0 with no transaction
        open: this INSERT opens one, as any statement does."""
        topic, target = routed.insert_into, routed.target
        if topic is None or target is None or topic.columns or session.target_shard is not None:
            return None
        tx = session.tx
        if tx is None:
            if session.autocommit or session.transaction_mode == TWOPC:
                return None
        elif (tx.implicit or tx.mode == TWOPC or tx.touched or tx.savepoints or tx.aborted
              or "read only" in tx.begin_sql.lower()):
            return None
        settings = session.settings
        if settings and ("sql_mode" in settings and any(c in routed.sql for c in ('"', "\\", "''"))
                         or any("read_only" in k for k in settings)):
            return None  # the scanner reads the default sql_mode; a read-only session fails the INSERT
        minimum = self.settings.direct_min_rows
        if minimum > 1 and routed.sql.count("(", target[1]) < minimum + 1:
            return None  # fewer rows than a direct publish takes (direct_insert): as before
        insert = direct.read_direct(routed.sql, target[0], target[1], topic.name)
        if insert is None or insert.rows < minimum or not kept.literal_rows(insert):
            return None
        rows = tx.kept if tx is not None else None
        if rows is not None and ((rows.keyspace, rows.topic) != (topic.keyspace, topic.name) or not rows.fits(insert)):
            return None
        if tx is None:
            session.begin_transaction()
            tx = session.tx
            assert tx is not None
        if rows is None:
            rows = tx.kept = kept.KeptRows(topic.keyspace, topic.name, self._kept_publisher(session, topic, routed.shard))
        rows.add(routed, insert)
        n = insert.rows
        return Result(affected_rows=n, info=f"Records: {n}  Duplicates: 0  Warnings: 0" if n > 1 else "")

    def may_keep(self, sql: str) -> bool:
        """A cheap first test of ``keep`` (the fast path's, before it routes the INSERT again):
        enough parentheses for ``topics.direct_min_rows`` rows."""
        minimum = self.settings.direct_min_rows
        return minimum <= 1 or sql.count("(") >= minimum + 1

    def _kept_publisher(self, session: ProxySession, topic: TopicInfo, shard: str) -> kept.Publish:
        async def publish(insert: direct.DirectInsert) -> bool:
            settings: Settings = tuple(sorted(session.vcursor.settings().items()))
            _, marked = await self.batcher(topic.keyspace, topic.name, shard).publish(insert, settings)
            return marked

        return publish

    async def flush_kept(self, session: ProxySession) -> None:
        """Send the transaction's kept INSERTs as they were written, in order, in the
        transaction (the deferred path); it keeps no more rows after (a shard joined it). One
        that fails (the shard's error: its OK was already answered) rolls the whole
        transaction back, as MariaDB does on a deadlock, and the current statement reports it."""
        tx = session.tx
        rows = tx.kept if tx is not None else None
        if tx is None or rows is None:
            return
        tx.kept = None
        writing, tx.writing = tx.writing, True
        try:
            for routed in rows.routed:
                await session.vcursor.execute_shard(routed.keyspace, routed.shard, routed.sql)
                session.wrote(rows.keyspace, TopicWrite(rows.keyspace, rows.topic))
        except BaseException:
            await session.rollback()
            raise
        tx.writing = writing

    async def commit_kept(self, session: ProxySession) -> None:
        """At the COMMIT of a transaction that kept rows (and did nothing else): its rows as one
        direct publish, before anything of it commits. Failed: the transaction is over (nothing
        of it was written) and the COMMIT reports the shard's error."""
        tx = session.tx
        rows = tx.kept if tx is not None else None
        if tx is None or rows is None:
            return
        if tx.touched:  # never the case (any other statement flushed them): as written, then
            await self.flush_kept(session)
            return
        tx.kept = None
        try:
            marked = await rows.publish(rows.merged())
        except BaseException:
            session.tx, session.after_commit = None, []
            raise
        session.wrote(rows.keyspace, TopicWrite(rows.keyspace, rows.topic, direct=marked))

    async def before_statement(self, session: ProxySession, sql: str, kw: str) -> None:
        """Before any statement of a transaction that kept rows: flush them unless it is a
        plain COMMIT / ROLLBACK or an INSERT into a topic (``route`` keeps it or flushes)."""
        if kw in ("commit", "rollback") and _PLAIN_END.match(strip_leading_comments(sql).strip()):
            return
        if kw == "insert":
            try:
                if routing.route_publish(sql, session.keyspace, self.lookup) is not None:
                    return
            except ProxyError:
                pass
        await self.flush_kept(session)

    async def _publish_direct(self, session: ProxySession, routed: routing.Routed, insert: direct.DirectInsert) -> Result:
        """A direct publish on the normal path (``proxy.topics.batch``: alone, or with the
        topic's other direct publishes from this process), with the session's settings outside
        any transaction (the script is its own), told to the topic once its OK is in."""
        topic = routed.insert_into
        assert topic is not None
        settings: Settings = tuple(sorted(session.vcursor.settings().items()))
        res, marked = await self.batcher(topic.keyspace, topic.name, routed.shard).publish(insert, settings)
        session.wrote(topic.keyspace, TopicWrite(topic.keyspace, topic.name, direct=marked))
        return res

    def names_topic(self, sql: str) -> bool:
        """Whether ``sql`` may name a topic (then ``route``/``written`` must see it)."""
        return self._pattern is not None and self._pattern.search(sql) is not None

    def written(self, written_table: tuple[str, str] | None) -> TopicWrite | None:
        """The topic a successful write went to: its table as ``route`` (or the planner)
        recorded it, not read from the SQL again."""
        if written_table is None:
            return None
        info = self.lookup(*written_table)
        return None if info is None else TopicWrite(info.keyspace, info.name)

    def committed(self, write: TopicWrite) -> None:
        rt = self.runtimes.get((write.keyspace, write.name))
        if rt is not None:
            if write.direct:
                rt.published()
            else:
                rt.notify()

    async def stream(self, session: ProxySession, sql: str) -> Outcome | None:
        """``STREAM * FROM topic [WHERE ...]``; None if the table is not a topic. A table this
        process knows of neither as a topic nor as a table of the keyspace reads the registry
        again first: a topic created through another proxy is followed on first use, as it is
        read and published to (``after_unknown_table``)."""
        try:
            st = parse_stream(sql)
        except ProxyError:
            return None  # the message tables' STREAM reports it
        keyspace = st.keyspace or session.keyspace
        info = self.lookup(keyspace, st.table) if self.names_topic(sql) else None
        if info is None:
            ks = self.proxy.vschema.keyspaces.get(keyspace) if keyspace is not None else None
            if keyspace is None or ks is None or keyspace not in self.proxy.config.keyspaces or st.table in ks.tables:
                return None
            await self.refresh_on_miss(keyspace)
            info = self.lookup(keyspace, st.table)
            if info is None:
                return None
        if session.workload != "olap":
            raise ProxyError(ER_NOT_SUPPORTED_YET, "STREAM is supported only for OLAP workload: run SET WORKLOAD = OLAP first")
        if st.select != "*":  # a follower gets the view's columns: never other columns than it asked for
            raise ProxyError(ER_NOT_SUPPORTED_YET, f"STREAM on a topic supports only STREAM * (the topic's columns),"
                             f" not: STREAM {st.select[:80]}")
        return self.follow(info, statement.stream_start(st.where_sql))

    async def _ddl(self, session: ProxySession, sql: str) -> Result:
        if session.in_transaction:
            await session.commit()  # DDL commits an open transaction, as in MySQL
        head = sql.lstrip().split(None, 1)[0].lower()
        if head == "create":
            c = statement.parse_create(sql)
            created = await self.create_topic(
                c.keyspace or session.keyspace, c.name, c.properties, user_definitions=c.user_definitions,
                user_columns=c.user_columns, if_not_exists=c.if_not_exists)
            return Result(warnings=0 if created is not None else 1)
        if head == "drop":
            d = statement.parse_drop(sql)
            dropped = await self.drop_topic(d.keyspace or session.keyspace, d.name, d.if_exists)
            return Result(warnings=0 if dropped else 1)
        a = statement.parse_alter(sql)
        await self.update_topic(a.keyspace or session.keyspace, a.name, a.changes)
        return Result()

    async def table_listing(self, keyspace: str, res: Result, keep: Callable[[str], object]) -> Result:
        """``SHOW [FULL] TABLES`` of ``keyspace`` (``res``: one shard's answer) as users see
        topics: every live topic's view, from whichever shard holds it (as ``SHOW TOPICS`` lists
        them), and none of the tables behind them (``vschema.internal_tables``: ``information_schema``
        reads leave them out alike). ``keep``: the statement's LIKE."""
        rows = [r for r in res.rows if not is_internal((r[0] or b"").decode("utf-8", "replace"))]
        listed = {r[0] for r in rows}
        full = len(res.fields) > 1
        for _, row in await self.list_topics(keyspace):
            name = row.name.encode()
            if name not in listed and keep(row.name):
                rows.append((name, b"VIEW") if full else (name,))
        rows.sort(key=lambda r: r[0] or b"")  # MariaDB lists by name
        return Result(fields=res.fields, rows=rows)

    async def show(self, session: ProxySession, sql: str) -> Result:
        """``SHOW TOPICS [FROM ks] [LIKE 'pattern']``, read from the shards."""
        st = statement.parse_show(sql)
        keyspaces = [self._keyspace(st.keyspace)] if st.keyspace else self.keyspaces
        rows: list[tuple[Any, ...]] = []
        for ks in keyspaces:
            for shard, row in await self.list_topics(ks):
                if st.like is not None and not like(row.name, st.like):  # MySQL's LIKE: '\_' is a '_'
                    continue
                try:
                    oldest, newest, recent = await self.stores[(ks, shard)].recent_stats(row.name)
                except ProxyError as e:
                    if e.code != ER_NO_SUCH_TABLE:
                        raise
                    # Dropped since it was listed, or its view is gone (changed on its shard
                    # directly): listed without its times, rather than failing every topic's row.
                    logger.warning("topics: SHOW TOPICS cannot read a topic's view", extra={
                        "keyspace": ks, "shard": shard, "topic": row.name, "error": e.message})
                    oldest = newest = None
                    recent = 0
                rt = self.runtimes.get((ks, row.name))
                rows.append((ks, row.name, shard, row.generation, row.ttl_seconds, row.messages, row.bytes, oldest,
                             newest, round(recent / 60.0, 3), rt.followers if rt else 0, row.last_id))
        return local_result(SHOW_COLUMNS, rows, _SHOW_TYPES)
