"""VStream: one change stream over many shards, as Vitess's vtgate offers.

::

    async with VStream(endpoints, ["commerce.customer"], start="current") as stream:
        async for group in stream:          # one shard transaction at a time
            handle(group.events)
            save(group.vgtid.to_json())     # resume point: after this group

Each shard has a binlog reader (its decoder runs in a process of its own) and a pump task. The pump applies the artificial
per-shard delay if one was configured (tests use it to make a shard lag), then skew
alignment, and enqueues whole transactions; the consumer side appends the VGTID, so the
VGTID carries exactly the shards' positions of what was handed out before it, whatever
order the pumps ran in. A transaction is never interleaved with another shard's.

Positions advance silently over transactions the table filter drops (carried by the next
transaction or heartbeat of that shard), so a saved VGTID never re-reads them.

Shard heartbeats (every ``shard_heartbeat_period`` s from an idle shard) are never
forwarded; they feed skew alignment and position tracking. With ``heartbeat_interval``
set, the stream itself yields a HEARTBEAT group after that many seconds without a group.

Across a resharding switch (proxy/resharding): a source shard's reader passes the switch's
journal row through; that shard's stream ends there (its VGTID position stays before the
journal, so a saved VGTID reads it again), and once every participant of the journal reached it
the participants leave the stream and the journal's targets join it at the GTID positions it
names (Vitess's vstream_manager). ``include_reshard_journal_events`` forwards a ``JOURNAL, VGTID``
group at that moment; ``stop_on_reshard`` ends the stream there instead; a journal naming a
participant the stream lacks fails it (Vitess: "not all journaling participants are in the
stream"). Shards the stream was not given (a VGTID's retired sources, a journal's targets) are
found with ``shard_locator``.

Always close the stream (``async with`` or ``aclose()``): its decoder processes run until
then, even if the caller stops iterating.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType

from proxy.cdc.binlog_decoder import ALL_ROW_OPS, ShardEndpointLike
from proxy.cdc.binlog_reader import ShardBinlogReader
from proxy.cdc.errors import CdcError, InvalidPositionError
from proxy.cdc.events import EventGroup, HeartbeatEvent, JournalEvent, VgtidEvent
from proxy.cdc.positions import GTID_BEGINNING, GTID_CURRENT, GTID_SNAPSHOT, GtidPosition, Vgtid
from proxy.cdc.skew import DEFAULT_MAX_HOLD, DEFAULT_MAX_SKEW, SkewAligner
from proxy.cdc.start_positions import ResolvedStart, ShardKey, resolve_start
from proxy.cdc.table_copy import TableCopy
from proxy.cdc.table_filter import TableFilter
from proxy.cdc.transaction_assembler import ShardHeartbeat, ShardTransaction
from proxy.resharding.journal import Journal

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _PositionAdvance:
    """A shard moved past filtered-out transactions (learned from a heartbeat)."""

    position: GtidPosition


@dataclass(slots=True)
class _Failure:
    error: BaseException


_Payload = ShardTransaction | _PositionAdvance
# Where a shard the stream was not given listens (None: unknown).
ShardLocator = Callable[[ShardKey], Awaitable[ShardEndpointLike | None]]
# A shard's items in binlog order, or the failure that ends the stream.
_QueueItem = tuple[ShardKey, list[_Payload]] | _Failure


class VStream:
    def __init__(
        self,
        endpoints: Mapping[ShardKey, ShardEndpointLike],
        tables: Iterable[str] | None = None,
        start: str | Vgtid = "current",
        *,
        since: float | datetime | None = None,
        minimize_skew: bool = False,
        heartbeat_interval: float = 0.0,
        max_skew: float = DEFAULT_MAX_SKEW,
        max_skew_hold: float = DEFAULT_MAX_HOLD,
        shard_delays: Mapping[ShardKey, float] | None = None,
        shard_heartbeat_period: float = 1.0,
        queue_size: int = 16,
        row_ops: frozenset[str] = ALL_ROW_OPS,
        row_images: bool = True,
        include_reshard_journal_events: bool = False,
        stop_on_reshard: bool = False,
        shard_locator: ShardLocator | None = None,
        end_shards_at_journal: bool = False,
        skip_annotated: bytes = b"",
    ) -> None:
        """
        endpoints: every shard of the cluster, by (keyspace, shard).
        tables: filter entries (``ks.table``, ``ks.*``, ``table``, ``*``); None = all.
        start: ``"current"``, ``"beginning"``, a Vgtid or its JSON, or ``"snapshot"``: first
            every current row of the tables (copied, see ``table_copy``), then the changes
            committed after that copy.
        since: start at this time instead (epoch seconds or datetime; whole-second
            granularity, rounding down).
        minimize_skew: hold shards more than ``max_skew`` s ahead of the slowest.
        heartbeat_interval: if > 0, yield a HEARTBEAT group after this many idle seconds.
        shard_delays: artificial lag per shard (testing skew): each item of that shard is
            released this many seconds after it was read.
        row_ops: the row changes wanted ("insert", "update", "delete"); others are not decoded.
        row_images: False: ROW events without their rows (``changes`` empty) and no FIELD
            events; nothing is decoded beyond which table changed how (``TableChangeFeed.touches``).
        include_reshard_journal_events: forward a resharding switch's JOURNAL event (a group
            ``JOURNAL, VGTID``) when the stream moves to the new shards (Vitess's option).
        stop_on_reshard: end the stream at such a journal instead (after forwarding it).
        shard_locator: finds the endpoint of a shard that ``endpoints`` lacks: one a VGTID
            names (the sources of a switched reshard, before ``complete``) or a journal's
            target (proxy/resharding/topology.py ``shard_locator`` reads the stored topology).
            Without one, such a shard ends the stream with an error naming it.
        end_shards_at_journal: each shard's stream just ends at its journal (no participant
            check, no move to the targets; ``journals`` says which shard met which); the stream
            ends when every shard did. For readers of fixed per-shard ranges (the Spark source).
        skip_annotated: the rows of statements whose text holds these bytes are not read
            (``DecoderSpec.skip_annotated``; with ``row_images=False`` only).
        """
        self._endpoints = dict(endpoints)
        self._filter = TableFilter(tables)
        self._start = start
        self._since = since
        self._heartbeat_interval = heartbeat_interval
        self._shard_delays = dict(shard_delays or {})
        self._shard_heartbeat_period = shard_heartbeat_period
        self._row_ops = row_ops
        self._row_images = row_images
        self._skip_annotated = skip_annotated
        self._minimize_skew = minimize_skew
        self._max_skew = max_skew
        self._max_skew_hold = max_skew_hold
        self.aligner: SkewAligner | None = None
        self._queue: asyncio.Queue[_QueueItem] = asyncio.Queue(maxsize=queue_size)
        self._pending: deque[_Payload] = deque()
        self._pending_key: ShardKey = ("", "")
        self._readers: dict[ShardKey, ShardBinlogReader] = {}
        self._pumps: dict[ShardKey, asyncio.Task[None]] = {}
        # Resharding (see _journal_reached): shards whose stream ended at a journal, and the
        # participants that reached each journal so far.
        self._include_journal = include_reshard_journal_events
        self._stop_on_reshard = stop_on_reshard
        self._locator = shard_locator
        self._end_at_journal = end_shards_at_journal
        self._ended: set[ShardKey] = set()
        self.journals: dict[ShardKey, Journal] = {}  # the journal each ended shard met
        self._journal_participants: dict[int, set[ShardKey]] = {}
        self._stopped = False
        self._positions: dict[ShardKey, GtidPosition] = {}
        self._vgtid: Vgtid | None = None
        self._opened = False
        self._closed = False
        self._last_sent = 0.0
        self._copy: TableCopy | None = None
        self._copy_groups: AsyncIterator[tuple[EventGroup, bool]] | None = None

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        if self._opened:
            return
        if self._closed:
            raise CdcError("the stream is closed")
        self._opened = True
        if self._start == GTID_SNAPSHOT:
            if self._since is not None:
                raise InvalidPositionError("give either start='snapshot' or since=, not both")
            self._copy = await TableCopy.take(self._endpoints, self._filter)
            self._copy_groups = self._copy.groups()
            resolved = ResolvedStart(self._copy.positions)
        else:
            await self._locate_named_shards()
            resolved = await resolve_start(self._endpoints, self._filter, self._start, self._since)
        self._positions = dict(resolved.positions)
        self._vgtid = Vgtid.from_positions(self._positions)
        if self._minimize_skew:
            self.aligner = SkewAligner(
                self._positions, max_skew=self._max_skew, max_hold=self._max_skew_hold
            )
        try:
            await self._start_readers(resolved.positions, resolved.skip_before_timestamp)
        except BaseException:
            await self.aclose()
            raise
        self._last_sent = time.monotonic()
        logger.info(
            "vstream opened",
            extra={"start_vgtid": self._vgtid.to_json(), "skew": self.aligner is not None},
        )

    async def _start_readers(self, positions: Mapping[ShardKey, GtidPosition], skip_before: int | None) -> None:
        readers = {
            key: ShardBinlogReader(
                key[0],
                key[1],
                self._endpoints[key],
                position,
                self._filter,
                heartbeat_period=self._shard_heartbeat_period,
                skip_before_timestamp=skip_before,
                row_ops=self._row_ops,
                row_images=self._row_images,
                skip_annotated=self._skip_annotated,
            )
            for key, position in positions.items()
        }
        self._readers.update(readers)
        # Every start runs to its end before any failure is raised, so aclose() finds
        # each reader either started (and stops it) or not started at all.
        started = await asyncio.gather(*(reader.start() for reader in readers.values()), return_exceptions=True)
        for result in started:
            if isinstance(result, BaseException):
                raise result
        for key, reader in readers.items():
            self._pumps[key] = asyncio.create_task(self._pump(key, reader), name=f"vstream-pump-{key}")

    async def _locate(self, key: ShardKey) -> bool:
        """Make sure ``key`` has an endpoint (asking the locator); False if none is found."""
        if key in self._endpoints:
            return True
        endpoint = await self._locator(key) if self._locator is not None else None
        if endpoint is None:
            return False
        self._endpoints[key] = endpoint
        return True

    async def _locate_named_shards(self) -> None:
        """A VGTID start may name shards that no longer serve (a reshard's sources)."""
        start = self._start
        if isinstance(start, str) and start in (GTID_CURRENT, GTID_BEGINNING):
            return
        vgtid = start if isinstance(start, Vgtid) else Vgtid.from_json(start)
        for entry in vgtid.shard_gtids:
            if entry.shard:
                await self._locate((entry.keyspace, entry.shard))

    async def _stop_shard(self, key: ShardKey) -> None:
        task = self._pumps.pop(key, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        reader = self._readers.pop(key, None)
        if reader is not None:
            await reader.close()

    async def aclose(self) -> None:
        """Stop every pump and reader; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        pumps = list(self._pumps.values())
        for task in pumps:
            task.cancel()
        for task in pumps:
            try:
                await task
            except asyncio.CancelledError:
                if task.cancelled():
                    continue
                raise
        await asyncio.gather(*(reader.close() for reader in self._readers.values()))
        await self._end_copy()

    async def __aenter__(self) -> VStream:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- state ---------------------------------------------------------------------------

    @property
    def vgtid(self) -> Vgtid:
        """The position after the last group handed out (the start before the first)."""
        if self._vgtid is None:
            raise CdcError("the stream is not open yet")
        return self._vgtid

    @property
    def copying(self) -> bool:
        """A ``snapshot`` start's table copy is still being delivered (its groups carry no
        VGTID: a copy cannot be resumed halfway)."""
        return self._copy is not None

    @property
    def readers(self) -> Mapping[ShardKey, ShardBinlogReader]:
        return self._readers

    # -- iteration -----------------------------------------------------------------------

    def __aiter__(self) -> VStream:
        return self

    async def __anext__(self) -> EventGroup:
        if not self._opened:
            await self.open()
        if self._closed or self._stopped:
            raise StopAsyncIteration
        if self._copy_groups is not None:
            copied = await self._next_copied()
            if copied is not None:
                return copied
        pending = self._pending
        while True:
            if not pending:
                item = await self._next_or_heartbeat()
                if item is None:
                    return self._heartbeat_group()
                if isinstance(item, _Failure):
                    await self.aclose()
                    raise item.error
                self._pending_key, batch = item
                pending.extend(batch)
                continue
            key = self._pending_key
            if key in self._ended:  # a source shard past its journal: nothing after it counts
                pending.clear()
                continue
            payload = pending.popleft()
            if isinstance(payload, ShardTransaction) and payload.journal is not None:
                pending.clear()
                group = await self._journal_reached(key, payload)
                if group is not None:
                    return group
                if self._stopped:
                    raise StopAsyncIteration
                continue
            self._positions[key] = payload.position
            if isinstance(payload, _PositionAdvance):
                self._vgtid = Vgtid.from_positions(self._positions)
                continue
            return self._deliver(key, payload)

    async def _journal_reached(self, key: ShardKey, txn: ShardTransaction) -> EventGroup | None:
        """Shard ``key`` reached a resharding journal: its stream ends there (its position stays
        *before* the journal, so a VGTID saved meanwhile reads the journal again on resume).
        Once every participant reached it, the participants leave the stream and the journal's
        target shards join it at the positions it names: everything before the journal came
        from the sources, everything after it comes from the targets (Vitess's VStream)."""
        journal = txn.journal
        assert journal is not None
        self._ended.add(key)
        self.journals[key] = journal
        await self._stop_shard(key)
        if self._end_at_journal:
            self._stopped = not self._readers
            return None
        participants = {(p.keyspace, p.shard) for p in journal.participants}
        missing = sorted(participants - set(self._positions))
        if missing:
            await self.aclose()
            raise CdcError(
                f"not all journaling participants are in the stream: journal {journal.id} names "
                f"{', '.join(f'{k}/{s}' for k, s in sorted(participants))}; the stream lacks "
                f"{', '.join(f'{k}/{s}' for k, s in missing)}"
            )
        reached = self._journal_participants.setdefault(journal.id, set())
        reached.add(key)
        logger.info("vstream shard reached a resharding journal",
                    extra={"keyspace": key[0], "shard": key[1], "journal_id": journal.id,
                           "participants_reached": len(reached), "participants": len(participants)})
        if reached != participants:
            return None
        if self._stop_on_reshard:
            self._stopped = True
            logger.info("vstream stops at the resharding journal", extra={"journal_id": journal.id})
            return self._journal_group(key, txn)
        targets = {(g.keyspace, g.shard): GtidPosition.parse(g.gtid) for g in journal.shard_gtids}
        for target in sorted(targets):
            if not await self._locate(target):
                await self.aclose()
                raise CdcError(
                    f"resharding journal {journal.id} moves the stream to shard {target[0]}/{target[1]}, "
                    "whose endpoint is unknown here (pass its endpoint, or a shard_locator)"
                )
        for participant in participants:
            self._positions.pop(participant, None)
        self._positions.update(targets)
        # A target may be a shard that ended at an earlier journal (a reverse switch hands the
        # keyspace back to the sources): from the journal's position on it is streamed again.
        self._ended -= set(targets)
        for target in targets:
            self.journals.pop(target, None)
        self._vgtid = Vgtid.from_positions(self._positions)
        if self.aligner is not None:
            self.aligner.replace_streams(participants, targets)
        try:
            await self._start_readers(targets, None)
        except BaseException:
            await self.aclose()
            raise
        logger.info("vstream moved to the new shards of a reshard",
                    extra={"journal_id": journal.id, "vgtid": self._vgtid.to_json()})
        if self._include_journal:
            return self._journal_group(key, txn)
        return None

    def _journal_group(self, key: ShardKey, txn: ShardTransaction) -> EventGroup:
        assert self._vgtid is not None
        journal = next(e for e in txn.events if isinstance(e, JournalEvent))
        self._last_sent = time.monotonic()
        return EventGroup(
            keyspace=key[0],
            shard=key[1],
            events=[journal, VgtidEvent(keyspace=key[0], shard=key[1], timestamp=txn.timestamp, vgtid=self._vgtid)],
            commit_time=txn.commit_time,
            received_at=txn.received_at,
            vgtid=self._vgtid,
        )

    async def _next_copied(self) -> EventGroup | None:
        assert self._copy_groups is not None
        try:
            group, last = await anext(self._copy_groups)
        except StopAsyncIteration:
            await self._end_copy()  # nothing was copied
            return None
        except BaseException:
            await self.aclose()
            raise
        self._last_sent = time.monotonic()
        if last:
            # The end of the copy: from here on the stream is resumable, at the snapshot.
            group.vgtid = self._vgtid
            group.events.append(
                VgtidEvent(
                    keyspace=group.keyspace,
                    shard=group.shard,
                    timestamp=int(group.commit_time),
                    vgtid=group.vgtid,  # type: ignore[arg-type]  # set once the stream has started
                )
            )
            await self._end_copy()
        return group

    async def _end_copy(self) -> None:
        copy, self._copy = self._copy, None
        groups, self._copy_groups = self._copy_groups, None
        if groups is not None:
            await groups.aclose()  # type: ignore[attr-defined]
        if copy is not None:
            await copy.close()

    async def _next_or_heartbeat(self) -> _QueueItem | None:
        queue = self._queue
        if not queue.empty():
            return queue.get_nowait()
        if self._heartbeat_interval <= 0:
            return await queue.get()
        remaining = self._last_sent + self._heartbeat_interval - time.monotonic()
        if remaining <= 0:
            return None
        try:
            async with asyncio.timeout(remaining):
                return await self._queue.get()
        except TimeoutError:
            return None

    def _heartbeat_group(self) -> EventGroup:
        now = time.time()
        self._last_sent = time.monotonic()
        return EventGroup(
            keyspace="",
            shard="",
            events=[HeartbeatEvent(keyspace="", shard="", timestamp=int(now))],
            commit_time=now,
            received_at=now,
            vgtid=self._vgtid,
        )

    def _deliver(self, key: ShardKey, txn: ShardTransaction) -> EventGroup:
        vgtid = Vgtid.from_positions(self._positions)
        self._vgtid = vgtid
        events = txn.events
        events.append(
            VgtidEvent(keyspace=key[0], shard=key[1], timestamp=txn.timestamp, vgtid=vgtid)
        )
        self._last_sent = time.monotonic()
        return EventGroup(
            keyspace=key[0],
            shard=key[1],
            events=events,
            commit_time=txn.commit_time,
            received_at=txn.received_at,
            vgtid=vgtid,
            row_count=txn.row_count,
        )

    # -- per-shard pump ------------------------------------------------------------------

    async def _pump(self, key: ShardKey, reader: ShardBinlogReader) -> None:
        try:
            if self.aligner is None and self._shard_delays.get(key, 0.0) <= 0:
                await self._pump_batches(key, reader)
            else:
                await self._pump_each(key, reader)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # handed to the consumer, who raises it
            logger.error(
                "shard stream failed",
                extra={"keyspace": key[0], "shard": key[1], "error": str(exc)},
            )
            await self._queue.put(_Failure(exc))
            return
        # A reader only ends cleanly when closed; if it ends otherwise, say so.
        if not self._closed:
            await self._queue.put(_Failure(CdcError(f"{key[0]}/{key[1]}: binlog stream ended")))

    async def _pump_batches(self, key: ShardKey, reader: ShardBinlogReader) -> None:
        """No alignment, no delay: hand over whatever the reader has, in one queue item."""
        queue = self._queue
        last_position = reader.start_position
        async for batch in reader.batches():
            ready: list[_Payload] = []
            for item in batch:
                if isinstance(item, ShardHeartbeat):
                    if item.position != last_position:
                        last_position = item.position
                        ready.append(_PositionAdvance(item.position))
                    continue
                last_position = item.position
                ready.append(item)
            if ready:
                await queue.put((key, ready))

    async def _pump_each(self, key: ShardKey, reader: ShardBinlogReader) -> None:
        """Item by item: the artificial delay and skew alignment apply per transaction."""
        queue = self._queue
        aligner = self.aligner
        delay = self._shard_delays.get(key, 0.0)
        last_position = reader.start_position
        async for batch in reader.batches():
            for item in batch:
                if delay > 0:
                    wait = item.received_at + delay - time.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                if isinstance(item, ShardHeartbeat):
                    if aligner is not None:
                        aligner.update(key, item.received_at)
                    if item.position != last_position:
                        last_position = item.position
                        await queue.put((key, [_PositionAdvance(item.position)]))
                    continue
                if aligner is not None:
                    await aligner.wait_for_turn(key, item.commit_time, key)
                last_position = item.position
                await queue.put((key, [item]))
