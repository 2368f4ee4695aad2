"""One shard's binlog as an async stream of whole transactions, decoded in a process of its own.

``ShardBinlogReader`` has the shard's decoder process (``decoder_process.run_decoder``)
forked by the decoder zygote (``decoder_launcher``) and reads its frames from a socket pair
on the event loop. It owns the process: ``close()`` terminates it and waits until it is
gone; a decoder whose proxy went away stops at its next frame (heartbeats make one at least
every ``heartbeat_period``).

Flow control: frames read but not yet taken are capped (``max_pending_frames``); past that
the socket is no longer read, the decoder blocks in ``sendall`` and stops reading the
binlog, so a held-back consumer holds back the shard's reading, not the proxy's memory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import signal
import socket
from collections import deque
from collections.abc import AsyncIterator
from typing import cast

from proxy.cdc.binlog_decoder import (
    ALL_ROW_OPS,
    BinlogSource,
    DecoderSpec,
    DecoderStats,
    ShardEndpointLike,
    ShardItem,
)
from proxy.cdc.decoder_launcher import launcher
from proxy.cdc.decoder_process import END, FRAME_HEADER, ITEMS, LOG, StatsTuple
from proxy.cdc.errors import ShardStreamError
from proxy.cdc.positions import GtidPosition
from proxy.cdc.replica_ids import next_replica_server_id
from proxy.cdc.table_filter import TableFilter

logger = logging.getLogger(__name__)

_STOP_TIMEOUT = 5.0


class _FrameReceiver(asyncio.Protocol):
    """Cuts the decoder's byte stream into messages; log records are re-emitted at once,
    the rest wait in ``messages`` for the reader's consumer."""

    def __init__(self, max_pending: int) -> None:
        self.messages: deque[tuple] = deque()
        self.ended = False  # the connection closed
        self._max_pending = max_pending
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._paused = False
        self._discarding = False
        # The consumer waits for messages while close() may wait for the end: wake both.
        self._waiters: list[asyncio.Future[None]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not asserted to be an asyncio.Transport: uvloop's transports are not subclasses of it
        # (the assertion failed every decoder connection of a proxy on uvloop).
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        pos = 0
        size = len(buffer)
        messages = self.messages
        while size - pos >= FRAME_HEADER:
            length = int.from_bytes(buffer[pos : pos + FRAME_HEADER], "little")
            end = pos + FRAME_HEADER + length
            if end > size:
                break
            message = pickle.loads(buffer[pos + FRAME_HEADER : end])
            pos = end
            if message[0] == LOG:
                _emit(message[1])
            elif not self._discarding:
                messages.append(message)
        if pos:
            del buffer[:pos]
        if messages:
            if len(messages) >= self._max_pending and self._transport is not None:
                self._transport.pause_reading()
                self._paused = True
            self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self._wake()

    async def drain_until_closed(self) -> None:
        """Drop every message from now on and read until the peer closes (it is stopping)."""
        self._discarding = True
        self.messages.clear()
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        while not self.ended:
            await self._wait()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _wait(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    async def next_message(self) -> tuple | None:
        """The next message, or None once the connection closed and all were taken."""
        while not self.messages:
            if self.ended:
                return None
            await self._wait()
        message = self.messages.popleft()
        if self._paused and len(self.messages) <= self._max_pending // 2:
            self._paused = False
            assert self._transport is not None
            self._transport.resume_reading()
        return message


def _emit(fields: dict[str, object]) -> None:
    record = logging.makeLogRecord(fields)
    logging.getLogger(record.name).handle(record)


class ShardBinlogReader:
    def __init__(
        self,
        keyspace: str,
        shard: str,
        endpoint: ShardEndpointLike,
        start: GtidPosition,
        table_filter: TableFilter,
        *,
        heartbeat_period: float = 1.0,
        server_id: int | None = None,
        skip_before_timestamp: int | None = None,
        reconnect_timeout: float = 30.0,
        row_ops: frozenset[str] = ALL_ROW_OPS,
        row_images: bool = True,
        max_pending_frames: int = 16,
        skip_annotated: bytes = b"",
    ) -> None:
        """``row_ops``: which row changes to read; the others are skipped undecoded by the
        library, which is most of the cost of a busy table. ``row_images=False``: row events
        come without their rows (never decoded), for consumers that only need to know."""
        self.keyspace = keyspace
        self.shard = shard
        self.start_position = start
        # Drawn here, not in the decoder: processes forked from one zygote would all
        # count from the same base, and a duplicate id kicks the other reader off.
        self.server_id = server_id if server_id is not None else next_replica_server_id()
        self.spec = DecoderSpec(
            keyspace=keyspace,
            shard=shard,
            source=BinlogSource.of(endpoint),
            start=start,
            table_filter=table_filter,
            server_id=self.server_id,
            heartbeat_period=heartbeat_period,
            skip_before_timestamp=skip_before_timestamp,
            reconnect_timeout=reconnect_timeout,
            row_ops=row_ops,
            row_images=row_images,
            skip_annotated=skip_annotated,
            lookup_server_id=next_replica_server_id(),
        )
        self.stats = DecoderStats()
        self._position = start
        self._max_pending = max_pending_frames
        self._pid: int | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._receiver: _FrameReceiver | None = None
        self._closed = False

    @property
    def position(self) -> GtidPosition:
        """The position after the last whole transaction handed out (delivered or filtered)."""
        return self._position

    @property
    def duplicates_skipped(self) -> int:
        """Transactions dropped because the position already included their GTID."""
        return self.stats.duplicates_skipped

    @property
    def partial_transactions_discarded(self) -> int:
        """Transactions cut by a lost connection and dropped (they came again, whole)."""
        return self.stats.partial_transactions_discarded

    @property
    def pid(self) -> int | None:
        return self._pid

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        level = logging.getLogger().getEffectiveLevel()

        def launch() -> int:
            # Their end is closed by the thread that hands it over, when it is done with it: a
            # start cancelled meanwhile (a stream closed as it opens) must not close it under
            # the launcher, which would take the failed send for a dead zygote and restart it.
            # A decoder launched for a cancelled start finds our end closed and stops.
            try:
                return launcher.launch(self.spec, theirs, level)
            finally:
                theirs.close()

        try:
            # The first start launches the zygote (a fraction of a second): not on the loop.
            self._pid = await loop.run_in_executor(None, launch)
        except BaseException:
            ours.close()
            raise
        try:
            self._transport, self._receiver = await loop.connect_accepted_socket(
                lambda: _FrameReceiver(self._max_pending), ours
            )
        except BaseException:
            ours.close()
            await self._stop_decoder()
            raise
        logger.debug(
            "binlog decoder started",
            extra={"keyspace": self.keyspace, "shard": self.shard, "pid": self._pid},
        )

    async def batches(self) -> AsyncIterator[list[ShardItem]]:
        """Items in binlog order, in batches; raises the stream's error when it fails."""
        receiver = self._receiver
        assert receiver is not None, "start() first"
        while True:
            message = await receiver.next_message()
            if message is None:
                if self._closed:
                    return
                raise ShardStreamError(
                    self.keyspace,
                    self.shard,
                    f"binlog decoder process {self._pid} ended without a word",
                )
            kind = message[0]
            if kind == ITEMS:
                self._take_stats(message[2])
                items: list[ShardItem] = message[1]
                self._position = items[-1].position
                yield items
            elif kind == END:
                self._take_stats(message[2])
                error = message[1]
                if error is not None:
                    raise error
                return

    def _take_stats(self, values: StatsTuple) -> None:
        stats = self.stats
        (
            stats.connections,
            stats.transactions,
            stats.heartbeats,
            stats.duplicates_skipped,
            stats.partial_transactions_discarded,
        ) = values

    async def close(self) -> None:
        """Stop the decoder process and wait until it is gone; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        await self._stop_decoder()

    async def _stop_decoder(self) -> None:
        pid, receiver = self._pid, self._receiver
        try:
            if pid is not None and not (receiver is not None and receiver.ended):
                _signal(pid, signal.SIGTERM)
                if receiver is not None:
                    # The decoder holds its end of the socket until it exits: EOF is its end.
                    try:
                        async with asyncio.timeout(_STOP_TIMEOUT):
                            await receiver.drain_until_closed()
                    except TimeoutError:
                        logger.error(
                            "binlog decoder did not stop; killing it",
                            extra={"keyspace": self.keyspace, "shard": self.shard, "pid": pid},
                        )
                        _signal(pid, signal.SIGKILL)
        finally:
            if self._transport is not None:
                self._transport.close()


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass  # already gone (and reaped by the zygote)
