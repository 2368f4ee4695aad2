"""One reader of a topic's log shared by all of this process's STREAM followers of the topic.

Without it every follower read the shard on every wake-up: with 8 followers, 8 capped reads
(each with its window-function subquery) per sequencer pass, and publishers lost 21-26% of
their rate to the shard and proxy CPU that cost (``python -m tests.benchmarks topics``). The
feed reads once per wake-up, after its own position, and keeps the rows as a short, bounded
list of chunks, each labelled with the exclusive position it was read after; a follower whose
position is a chunk's label takes the chunk (and then the next one) without a read. A follower
elsewhere (starting from an older position, or slow enough that its chunk was dropped) reads on
its own, bounded above by the next chunk label, so that it lands exactly on one and joins.

Every label is an id at or below a committed high-water mark (the mark the feed started from,
or the last id of a read), so everything up to it was visible when it was read (no late
arrivals, see ``proxy.topics.sequencer``): a bounded read that finds nothing up to a label
may move the follower's position to the label, skipping nothing. The feed never waits for a
follower: a slow one falls behind the buffer and reads on its own.

A direct publish through this process feeds its rows without a read (``offer``): its script
(``proxy.topics.direct.feed_rows_sql``) reads them back after its COMMIT, as the view shows
them, when the mark it locked was the feed's position; no other id lies between (ids are
taken under that lock), so they are the next chunk, labelled with that position. Reading them
back with the feed's capped read cost the topic's shard 18-19 us a message against 11 without
followers (the cap's window subquery and the outer read each visit every row through the
``message_id`` index, BENCHMARKS.md "feedpace"). The feed then reads only when something else
moved the mark: a change whose mark (``last_id``) is past its position, or a direct publish of
this process it was not fed (``missed``), and at least every ``FEED_WAIT_S``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from mysql_mimic.types import ColumnDefinition

from proxy.engine.result import PacketBlock, Result
from proxy.errors import ProxyError

logger = logging.getLogger(__name__)

# Bounds of the buffer: enough for a follower a few wake-ups behind; a slower one reads alone.
FEED_MAX_CHUNKS = 64
FEED_MAX_BYTES = 8 * 1024 * 1024
# A chunk older than this is not handed out (a buffered message may have expired since; a
# follower that old reads the view itself, which hides expired ones).
FEED_MAX_AGE_S = 1.0
FEED_WAIT_S = 1.0  # a read at least this often even when no change was signalled
FEED_ERROR_BACKOFF_S = 1.0


@dataclass(slots=True)
class Chunk:
    """Rows the feed read after ``after`` (exclusive), up to ``last`` (its last row's id)."""

    after: str
    last: str
    result: Result
    count: int
    size: int
    read_at: float
    # Copies of the block renumbered to go on at a packet sequence id: followers whose
    # connections agree share one copy.
    renumbered: dict[int, PacketBlock] = field(default_factory=dict)


class TopicFeed:
    """The shared reader of one topic (in one process): runs while followers use it."""

    def __init__(
        self,
        where: str,
        read: Callable[[str], Awaitable[Result]],
        changed: Callable[[], asyncio.Event],
        last_id: Callable[[], str | None],
        last_of: Callable[[Result], str],
    ) -> None:
        self.where = where
        self._read = read
        self._changed = changed
        self._last_id = last_id
        self._last_of = last_of
        self.position: str | None = None  # the label the next chunk will carry
        self.fields: list[ColumnDefinition] | None = None
        self.failed = False  # the last read failed: followers read on their own meanwhile
        # A direct publish of this process moved the mark and was not fed: read at the next wake.
        self._behind = True
        self._fields_key: tuple[tuple[str, int], ...] | None = None
        self.reads = self.fed = 0  # reads made, chunks fed (logged when the feed stops)
        self.users = 0
        self._chunks: deque[Chunk] = deque()
        self._by_after: dict[str, Chunk] = {}
        self._bytes = 0
        self._new = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- users --------------------------------------------------------------------------------
    def join(self) -> None:
        self.users += 1
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"topic-feed:{self.where}")
            self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:  # followers read on their own now
            logger.error("topic feed stopped", extra={"topic": self.where, "error": repr(task.exception())})
            self._wake()

    def leave(self) -> None:
        """A follower is gone; the last one stops the reader (without waiting: this runs in
        the follower's ``finally``, where an abandoned generator cannot await)."""
        self.users -= 1
        if self.users <= 0:
            self._halt()

    async def stop(self) -> None:
        task = self._task
        self._halt()
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    def _halt(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            logger.info("topic feed stopped", extra={"topic": self.where, "reads": self.reads, "fed": self.fed})
            self.reads = self.fed = 0
        self.position, self.fields, self.failed = None, None, False
        self._behind, self._fields_key = True, None
        self._chunks.clear()
        self._by_after.clear()
        self._bytes = 0
        self._wake()

    # -- what followers ask -------------------------------------------------------------------
    def waiter(self) -> asyncio.Event:
        """Set at the feed's next change (take it before looking)."""
        return self._new

    @property
    def serving(self) -> bool:
        task = self._task
        return task is not None and not task.done() and self.position is not None and not self.failed

    def chunk_after(self, position: str) -> Chunk | None:
        chunk = self._by_after.get(position)
        if chunk is not None and time.monotonic() - chunk.read_at > FEED_MAX_AGE_S:
            return None
        return chunk

    def label_from(self, position: str, inclusive: bool) -> str | None:
        """The first label at or past ``position`` (past it if exclusive): where a follower's
        own read stops to join the feed. None: the follower is at or past the feed's head."""
        head = self.position
        if head is None:
            return None
        for chunk in self._chunks:  # oldest first; labels increase
            if chunk.after > position or (inclusive and chunk.after == position):
                return chunk.after
        if head > position or (inclusive and head == position):
            return head
        return None

    # -- direct publishes of this process ----------------------------------------------------
    def wants_rows(self) -> str | None:
        """The position a direct publish's rows must follow to be fed (``offer``); None: the
        feed takes none now (not serving, or it has not read the view's columns yet)."""
        return self.position if self.serving and self._fields_key is not None else None

    def offer(self, after: str, rows: Result, expected: int) -> str | None:
        """A committed direct publish's ``expected`` rows (``direct.feed_rows_sql``), read after
        its COMMIT, whose ids follow ``after``, the mark it locked: appended as the next chunk
        when ``after`` is still the feed's position, and they are all there, with the view's
        columns. Their last id, or None (nothing appended: the feed reads them, ``missed``)."""
        block = rows.block
        if (
            block is None
            or block.count != expected
            or after != self.position
            or not self.serving
            or _fields_key(rows.fields) != self._fields_key
        ):
            self.missed()
            return None
        last = self._last_of(rows)
        self._append(Chunk(after, last, Result(block=block), block.count, len(block.data), time.monotonic()))
        self.position = last
        self.fed += 1
        self._wake()
        return last

    def missed(self) -> None:
        """A direct publish of this process moved the mark without feeding its rows."""
        self._behind = True

    # -- the reader ---------------------------------------------------------------------------
    def _wake(self) -> None:
        event, self._new = self._new, asyncio.Event()
        event.set()

    def _append(self, chunk: Chunk) -> None:
        self._chunks.append(chunk)
        self._by_after[chunk.after] = chunk
        self._bytes += chunk.size
        while len(self._chunks) > FEED_MAX_CHUNKS or (self._bytes > FEED_MAX_BYTES and len(self._chunks) > 1):
            old = self._chunks.popleft()
            del self._by_after[old.after]
            self._bytes -= old.size

    def _read_due(self, timed_out: bool) -> bool:
        """Whether this wake-up needs a read: fed chunks may have taken what changed."""
        if timed_out or self._behind:
            return True
        mark = self._last_id()
        return mark is not None and self.position is not None and mark > self.position

    async def _run(self) -> None:
        timed_out = True
        while True:
            changed = self._changed()
            more = False
            if self.position is None:
                mark = self._last_id()
                if mark is not None:  # the start: everything up to the mark is visible
                    self.position = mark
                    self._wake()
                    more = True
            elif self._read_due(timed_out):
                after = self.position
                self._behind = False
                self.reads += 1
                try:
                    res = await self._read(f"message_id > '{after}'")
                except ProxyError as e:
                    if not self.failed:
                        logger.warning("topic feed read failed; followers read on their own", extra={
                            "topic": self.where, "error": e.message, "retry_s": FEED_ERROR_BACKOFF_S})
                    self.failed = True
                    self._behind = True
                    self._wake()
                    await asyncio.sleep(FEED_ERROR_BACKOFF_S)
                    continue
                self.failed = False
                if self.fields is None:
                    self.fields = list(res.fields)
                    self._fields_key = _fields_key(self.fields)
                if self.position != after:
                    # A publish fed rows meanwhile, which this read may hold too: read again after them.
                    self._behind = True
                    continue
                block = res.block
                count = block.count if block is not None else len(res.rows)
                if count:
                    last = self._last_of(res)
                    size = len(block.data) if block is not None else 256 * count  # rows: an estimate
                    self._append(Chunk(self.position, last, res, count, size, time.monotonic()))
                    self.position = last
                    self._wake()
                    mark = self._last_id()
                    more = mark is not None and last < mark
            if more:
                timed_out = True  # read on, whatever signalled
                continue  # a backlog (or a read cut short by the byte cap): read on at once
            timed_out = False
            try:
                async with asyncio.timeout(FEED_WAIT_S):
                    await changed.wait()
            except TimeoutError:
                timed_out = True


def _fields_key(fields: Sequence[ColumnDefinition]) -> tuple[tuple[str, int], ...]:
    """What decides how a row of these columns reads as a text-protocol packet (a fed chunk's
    rows come from the log table, the feed's reads from the view over it)."""
    return tuple((f.name, int(f.type)) for f in fields)
