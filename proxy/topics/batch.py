"""Group commit of a topic's direct publishes (``proxy.topics.direct``) within one proxy process.

A direct publish holds its topic's mark row lock from its first statement to its COMMIT, so
on the shard the direct publishes of a topic run one at a time, each paying the script's own
cost (the lock, the mark UPDATE, the COMMIT: ~200 us of shard CPU). Here, while one direct
publish (or batch) of a topic is in flight from this process, the next ones (any session, fast
path or normal path, REST) queue; when it ends, the queued ones go as ONE script
(``direct.publish_script``): one mark lock, each publisher's INSERT its own statement (its own
OK: affected rows, insert id, warnings), one mark UPDATE, one COMMIT.
Each publisher gets its own INSERT's result after that COMMIT (durable at OK); their rows take
one contiguous id range in queue order (one script: commit order, no late arrivals, as any
direct publish). CDAP's messaging service does the same (its ConcurrentMessageWriter).

Every direct publish goes through here, on a connection of the proxy's pools with its
publisher's session settings (the fast path too: sending the first on the session's own link,
the rest queued behind it, measured slower, BENCHMARKS.md "topicbatch"). Only publishes of
equal settings share a script (``sql_mode`` decides whether a too-long value
fails or is truncated with a warning). When a merged script fails with a statement's error
(nothing committed: a multi-statement stops at its first error, the batch rolls back), each
publish runs again alone, so each publisher gets exactly its own error or its OK, never
another's. When the connection is lost instead, the COMMIT may have run: every publisher of
the batch gets that error (in doubt, as a publish alone would).

When the topic has STREAM followers in this process, a script also reads its rows back for
their feed (``Feeding``, ``proxy.topics.feed``) after its COMMIT: one SELECT at the end of the
script, whatever the number of publishes it carries. Only for publishers whose session settings
cannot change how a row reads (``_PLAIN_SETTINGS``): the feed's reads run with none of theirs.

The topics service owns the batchers (one per topic), and cancels their tasks at stop.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from proxy.engine.result import Result
from proxy.errors import ProxyError, ShardError
from proxy.pools import ShardPool
from proxy.topics import direct
from proxy.topics.errors import naming_the_topic
from proxy.topics.store import execute_direct

logger = logging.getLogger(__name__)

Settings = tuple[tuple[str, str], ...]
# Session settings that leave a row's text as the feed's reads get it (not sql_mode:
# PAD_CHAR_TO_FULL_LENGTH pads CHAR values; not time_zone, names, ...).
_PLAIN_SETTINGS = frozenset({"tx_isolation", "innodb_lock_wait_timeout", "lock_wait_timeout"})


class Feeding(Protocol):
    """The way from a topic's direct publishes to its followers' feed (``proxy.topics.feed``)."""

    def rows(self) -> direct.FeedRows | None:
        """What the next script adds for the feed; None: the feed takes no rows now."""
        ...

    def committed(self, asked: direct.FeedRows | None, rows: Result | None, count: int) -> None:
        """A script's ``count`` rows took their ids (or may have: ``rows`` None), and, when it
        ``asked`` for them, ``rows`` are what it read back."""
        ...


def _plain(settings: Settings) -> bool:
    return all(name in _PLAIN_SETTINGS for name, _ in settings)


@dataclass(slots=True)
class _Queued:
    insert: direct.DirectInsert
    settings: Settings
    done: asyncio.Future[tuple[Result, bool]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class TopicBatcher:
    """The direct publishes of one topic from this process: one in flight at a time, the
    others queued and then sent together."""

    def __init__(
        self, topic: str, pool: Callable[[], ShardPool], counted: Callable[[int], None],
        feeding: Feeding | None = None, generation: int | None = None,
    ) -> None:
        self.topic = topic
        self.generation = generation  # the topic's generation its scripts write (direct.publish_script)
        self._pool = pool
        self._counted = counted  # a script of several publishes was sent: how many
        self._feeding = feeding
        self._busy = False  # a direct publish (or batch) of this topic is in flight
        self._queue: list[_Queued] = []
        self._task: asyncio.Task[None] | None = None

    async def publish(self, insert: direct.DirectInsert, settings: Settings) -> tuple[Result, bool]:
        """Publish ``insert`` (with a session's ``settings``): its INSERT's result and whether
        its rows took their ids; alone at once when nothing is in flight, else in the next batch.
        Its error names the topic, never its log table."""
        try:
            return await self._publish(insert, settings)
        except ProxyError as e:
            raise naming_the_topic(e, self.topic) from None

    async def _publish(self, insert: direct.DirectInsert, settings: Settings) -> tuple[Result, bool]:
        if not self._busy and not self._queue:
            self._busy = True
            try:
                return await self._run_alone(insert, settings)
            finally:
                self._busy = False
                if self._queue and self._task is None:
                    self._start()
        queued = _Queued(insert, settings)
        self._queue.append(queued)
        if not self._busy and self._task is None:
            self._start()
        try:
            return await asyncio.shield(queued.done)
        except asyncio.CancelledError:
            if queued in self._queue:  # not sent yet: it never will be
                self._queue.remove(queued)
            raise

    def _start(self) -> None:
        # A context of its own: the batch is no statement's (a KILL of one publisher must not
        # interrupt the others' script; running_statement reads the context).
        self._busy = True
        self._task = asyncio.get_running_loop().create_task(
            self._drain(), name=f"topic-batch:{self.topic}", context=contextvars.Context()
        )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for queued in self._queue:
            if not queued.done.done():
                queued.done.cancel()
        self._queue.clear()

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch = self._take()
                try:
                    await self._run_batch(batch)
                except Exception as e:
                    # The batch's publishers get it (the connection lost: in doubt, the COMMIT
                    # may have run, as for a publish alone).
                    for q in batch:
                        _fail(q, e)
                except BaseException:  # cancelled (stop): so are its publishers
                    for q in batch:
                        q.done.cancel()
                    raise
        finally:
            self._task = None
            self._busy = False

    def _take(self) -> list[_Queued]:
        """The queue's head and every later publish of its settings that fits one packet (and
        ``direct.MAX_ROWS`` rows: a script's rows share one millisecond)."""
        settings = self._queue[0].settings
        budget = direct.SAFE_SCRIPT_CHARS
        rows = direct.MAX_ROWS
        batch: list[_Queued] = []
        rest: list[_Queued] = []
        for q in self._queue:
            size = q.insert.size
            if q.settings == settings and (not batch or (size <= budget and q.insert.rows <= rows)):
                batch.append(q)
                budget -= size
                rows -= q.insert.rows
            else:
                rest.append(q)
        self._queue = rest
        return batch

    async def _run_alone(
        self, insert: direct.DirectInsert, settings: Settings
    ) -> tuple[Result, bool]:
        (res,), marked = await self._run((insert,), settings)
        return res, marked

    async def _run(self, inserts: Sequence[direct.DirectInsert], settings: Settings) -> tuple[list[Result], bool]:
        """One script of ``inserts``: their INSERTs' results and whether the rows took ids; the
        feed told at once (no other script of the topic from here runs before it is)."""
        async with self._pool().connection() as sc:
            await sc.apply_settings(_mapping(settings))
            feeding = self._feeding
            feed = feeding.rows() if feeding is not None and _plain(settings) else None
            count = sum(ins.rows for ins in inserts)
            try:
                answers, marked, rows = await execute_direct(
                    sc, direct.publish_script(inserts, feed, self.generation), inserts[0].quoted_log, len(inserts), feed is not None
                )
            except BaseException:
                if feeding is not None:
                    feeding.committed(None, None, count)  # the COMMIT may have run
                raise
            if marked and feeding is not None:
                feeding.committed(feed, rows, count)
        return answers, marked

    async def _run_batch(self, batch: list[_Queued]) -> None:
        if len(batch) == 1:
            q = batch[0]
            _answer(q, await self._run_alone(q.insert, q.settings))
            return
        self._counted(len(batch))
        try:
            answers, marked = await self._run([q.insert for q in batch], batch[0].settings)
        except ShardError as e:
            # A statement's error: the script stopped there and was rolled back. Each alone
            # now, so that only the publisher whose INSERT failed gets that error.
            logger.info(
                "topic batch failed: each publish alone",
                extra={"topic": self.topic, "publishers": len(batch), "error": e.message},
            )
            for q in batch:
                try:
                    _answer(q, await self._run_alone(q.insert, q.settings))
                except ProxyError as alone:
                    _fail(q, alone)
            return
        for q, res in zip(batch, answers, strict=True):
            _answer(q, (res, marked))


def _answer(q: _Queued, result: tuple[Result, bool]) -> None:
    if not q.done.done():
        q.done.set_result(result)


def _fail(q: _Queued, error: Exception) -> None:
    if not q.done.done():
        q.done.set_exception(error)
        q.done.exception()  # retrieved here: its publisher re-raises it (or has gone)


def _mapping(settings: Settings) -> Mapping[str, str]:
    return dict(settings)
