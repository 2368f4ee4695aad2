"""One shard's binlog, read by python-mysql-replication in its own thread.

The library is blocking, so each shard gets a thread that reads, assembles transactions
(``TransactionAssembler``) and hands them to the loop through a bounded channel. The
reader owns an asyncio task that completes when the thread ends; ``close()`` stops the
thread (by breaking its socket, since the library blocks in ``recv``) and joins it.

Position handling works around the library: on a dropped connection it reconnects by
itself from the position it was *created* with and would replay everything since. Every
connection it opens goes through our connection factory, which first points it at the
position we track (the last whole transaction); the assembler also skips any GTID the
position already includes. Connection failures the library does not handle (the shard is
down) are retried here for ``reconnect_timeout`` seconds from the tracked position.

Commit times for skew: binlog timestamps are whole seconds, so a transaction's commit time
is estimated as the moment we read it, clamped into ``[ts, ts + 1)`` of its binlog second
(converted to this host's clock with an offset measured at start). Streaming live, that
is the receipt time (sub-second, within a millisecond or so of the commit); catching up
on a backlog, it is the end of the binlog second (at most 1 s late).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from proxy.addresses import is_loopback
from proxy.cdc import socket_reader
from proxy.cdc.channel import ChannelClosed, ThreadToLoopChannel
from proxy.cdc.errors import (
    PositionPurgedError,
    PositionUnknownError,
    ShardStreamError,
    ShardUnavailableError,
)
from proxy.cdc.positions import GtidPosition
from proxy.cdc.replica_ids import next_replica_server_id
from proxy.cdc.socket_reader import BufferedSocketReader
from proxy.cdc.table_filter import TableFilter
from proxy.cdc.transaction_assembler import (
    ShardHeartbeat,
    ShardTransaction,
    TransactionAssembler,
)

logger = logging.getLogger(__name__)

ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
_CONNECTION_ERRORS = frozenset({2002, 2003, 2006, 2013, 2055})
_CONTROL_EVENTS = [MariadbGtidEvent, QueryEvent, XidEvent, HeartbeatLogEvent]
ROW_EVENTS_BY_OP = {"insert": WriteRowsEvent, "update": UpdateRowsEvent, "delete": DeleteRowsEvent}
ALL_ROW_OPS = frozenset(ROW_EVENTS_BY_OP)

ShardItem = ShardTransaction | ShardHeartbeat


class _StoppingReaderFilter(logging.Filter):
    """Close() breaks the reader's socket on purpose; the library then logs a warning about
    a lost connection before it gives up. Drop that record for readers being closed."""

    def __init__(self) -> None:
        super().__init__()
        self.stopping_threads: set[int] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread not in self.stopping_threads


_stopping_filter = _StoppingReaderFilter()
logging.getLogger("pymysqlreplication").addFilter(_stopping_filter)


class ShardEndpointLike(Protocol):
    host: str
    port: int
    user: str
    password: str
    database: str


class _Stopping(Exception):
    """Raised inside the reader thread when close() was requested."""


@dataclass(slots=True)
class ReaderStats:
    connections: int = 0
    transactions: int = 0
    heartbeats: int = 0


def connection_kwargs(endpoint: ShardEndpointLike) -> dict[str, Any]:
    return {
        "host": endpoint.host,
        "port": int(endpoint.port),
        "user": endpoint.user,
        "password": endpoint.password or "",
        "connect_timeout": 5,
        # PyMySQL otherwise prefers TLS and builds a fresh SSL context (loading the system's
        # CA store, ~0.1 s) on every connect; over loopback TLS protects nothing.
        "ssl_disabled": is_loopback(endpoint.host),
    }


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
        capacity: int = 2048,
        reconnect_timeout: float = 30.0,
        row_ops: frozenset[str] = ALL_ROW_OPS,
    ) -> None:
        """``row_ops``: which row changes to read; the others are skipped undecoded by the
        library, which is most of the cost of a busy table."""
        self.keyspace = keyspace
        self.shard = shard
        self.endpoint = endpoint
        self.start_position = start
        self.server_id = server_id if server_id is not None else next_replica_server_id()
        self.clock_offset = 0.0  # shard clock minus ours, seconds
        self.stats = ReaderStats()
        self._heartbeat_period = heartbeat_period
        self._reconnect_timeout = reconnect_timeout
        self._capacity = capacity
        self._assembler = TransactionAssembler(
            keyspace,
            shard,
            endpoint.database,
            table_filter,
            start,
            skip_before_timestamp=skip_before_timestamp,
        )
        self._only_tables = table_filter.explicit_tables(keyspace)
        self._events = _CONTROL_EVENTS + [ROW_EVENTS_BY_OP[op] for op in sorted(row_ops)]
        self._stop = threading.Event()
        self._connections: list[pymysql.Connection] = []
        self._connections_lock = threading.Lock()
        self._stream: BinLogStreamReader | None = None
        self._channel: ThreadToLoopChannel[ShardItem] | None = None
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def position(self) -> GtidPosition:
        """The position after the last whole transaction read (delivered or filtered)."""
        return self._assembler.position

    @property
    def duplicates_skipped(self) -> int:
        """Transactions dropped because the position already included their GTID."""
        return self._assembler.duplicates_skipped

    @property
    def partial_transactions_discarded(self) -> int:
        """Transactions cut by a lost connection and dropped (they came again, whole)."""
        return self._assembler.partial_transactions_discarded

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._channel = ThreadToLoopChannel(loop, self._capacity)
        done: asyncio.Future[None] = loop.create_future()

        def run() -> None:
            try:
                self._run()
            finally:
                try:
                    loop.call_soon_threadsafe(_resolve, done)
                except RuntimeError:
                    # The loop closed before the thread finished; nobody awaits it.
                    logger.debug("binlog reader finished after its loop closed")

        self._thread = threading.Thread(
            target=run, name=f"binlog-{self.keyspace}/{self.shard}", daemon=True
        )
        self._thread.start()
        self._task = loop.create_task(_await(done), name=f"binlog-{self.keyspace}/{self.shard}")

    async def batches(self) -> AsyncIterator[list[ShardItem]]:
        """Items in binlog order, in batches; raises the stream's error when it fails."""
        assert self._channel is not None, "start() first"
        while True:
            batch = await self._channel.get_batch()
            if not batch:
                return
            yield batch

    async def close(self) -> None:
        """Stop the thread and wait for it; safe to call more than once."""
        self._stop.set()
        if self._thread is not None and self._thread.ident is not None:
            _stopping_filter.stopping_threads.add(self._thread.ident)
        if self._channel is not None:
            self._channel.close()
        self._break_connections()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=10)
            except TimeoutError:
                logger.error(
                    "binlog reader thread did not stop",
                    extra={"keyspace": self.keyspace, "shard": self.shard},
                )
        if self._thread is not None:
            self._thread.join(timeout=0.5)
            if not self._thread.is_alive() and self._thread.ident is not None:
                _stopping_filter.stopping_threads.discard(self._thread.ident)

    # -- the thread ----------------------------------------------------------------------

    def _run(self) -> None:
        assert self._channel is not None
        error: BaseException | None = None
        try:
            self._stream_with_retries()
        except (_Stopping, ChannelClosed):
            pass
        except ShardStreamError as exc:
            error = exc
        except Exception as exc:  # any other failure ends the stream, named by shard
            logger.exception(
                "binlog reader failed", extra={"keyspace": self.keyspace, "shard": self.shard}
            )
            error = ShardStreamError(self.keyspace, self.shard, f"binlog reader failed: {exc!r}")
            error.__cause__ = exc
        finally:
            self._channel.finish(error)

    def _stream_with_retries(self) -> None:
        first_failure: float | None = None
        backoff = 0.2
        while not self._stop.is_set():
            try:
                self._measure_clock_offset()
                self._stream_until_failure()
                return
            except pymysql.OperationalError as exc:
                code = exc.args[0] if exc.args else None
                if self._stop.is_set():
                    raise _Stopping from exc
                if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
                    raise self._position_error(str(exc.args[1])) from exc
                if code not in _CONNECTION_ERRORS:
                    raise
                now = time.monotonic()
                first_failure = first_failure if first_failure is not None else now
                if now - first_failure > self._reconnect_timeout:
                    raise ShardUnavailableError(
                        self.keyspace,
                        self.shard,
                        f"binlog connection lost and not re-established within "
                        f"{self._reconnect_timeout:.0f} s: {exc.args}",
                    ) from exc
                logger.warning(
                    "binlog connection failed, retrying",
                    extra={
                        "keyspace": self.keyspace,
                        "shard": self.shard,
                        "error": str(exc),
                        "position": str(self.position),
                    },
                )
                if self._stop.wait(backoff):
                    raise _Stopping from exc
                backoff = min(backoff * 2, 2.0)
            else:
                first_failure = None

    def _position_error(self, message: str) -> ShardStreamError:
        position = str(self.position)
        if "purged" in message.lower():
            return PositionPurgedError(self.keyspace, self.shard, position, message)
        return PositionUnknownError(self.keyspace, self.shard, position, message)

    def _measure_clock_offset(self) -> None:
        conn = self._connect(**connection_kwargs(self.endpoint))
        try:
            with conn.cursor() as cur:
                before = time.time()
                cur.execute("SELECT UNIX_TIMESTAMP(NOW(6))")
                after = time.time()
                (shard_now,) = cur.fetchone()
            self.clock_offset = float(shard_now) - (before + after) / 2
            self._assembler.clock_offset = self.clock_offset
        finally:
            conn.close()

    def _connect(self, **kwargs: Any) -> pymysql.Connection:
        """Every connection the library opens comes through here (``pymysql_wrapper``)."""
        if self._stop.is_set():
            raise _Stopping
        stream = self._stream
        if stream is not None:
            # Resume from our own position, never from the one the library started with.
            stream.auto_position = str(self.position)
        if "db" in kwargs:  # the library still uses PyMySQL's deprecated spelling
            kwargs["database"] = kwargs.pop("db")
        conn = pymysql.connect(**kwargs)
        socket_reader.install(conn)
        with self._connections_lock:
            self._connections = [c for c in self._connections if c.open]
            self._connections.append(conn)
        self.stats.connections += 1
        if self._stop.is_set():
            conn.close()
            raise _Stopping
        return conn

    def _break_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            sock = getattr(conn, "_sock", None)
            if sock is None:
                continue
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError as exc:
                # Already closed by its thread: nothing left to interrupt.
                logger.debug("socket already closed", extra={"error": str(exc)})

    def _stream_until_failure(self) -> None:
        assert self._channel is not None
        channel = self._channel
        assembler = self._assembler
        settings = connection_kwargs(self.endpoint)
        # The shard sends a heartbeat every period when idle, so a silent socket for several
        # periods is a dead link (no RST came): time the read out and reconnect.
        settings["read_timeout"] = max(10.0, 5 * self._heartbeat_period)
        stream = BinLogStreamReader(
            connection_settings=settings,
            server_id=self.server_id,
            blocking=True,
            is_mariadb=True,
            auto_position=str(self.position),
            only_events=self._events,
            only_schemas=[self.endpoint.database],
            only_tables=self._only_tables,
            slave_heartbeat=self._heartbeat_period,
            pymysql_wrapper=self._connect,
            enable_logging=False,
        )
        self._stream = stream
        logger.info(
            "binlog stream starting",
            extra={
                "keyspace": self.keyspace,
                "shard": self.shard,
                "position": str(self.position),
                "server_id": self.server_id,
            },
        )
        try:
            fetch = stream.fetchone
            clock = time.time
            stop = self._stop
            while True:
                event = fetch()
                if stop.is_set():
                    raise _Stopping
                if event is None:
                    # The server ended the dump (shutdown): reconnect like a lost link.
                    raise pymysql.OperationalError(2013, "binlog dump ended by the server")
                item = assembler.on_event(event, clock())
                if item is not None:
                    if isinstance(item, ShardHeartbeat):
                        self.stats.heartbeats += 1
                    else:
                        self.stats.transactions += 1
                    channel.put(item)
                    if not _more_to_read(stream):
                        channel.announce()
        finally:
            self._stream = None
            stream.close()


def _more_to_read(stream: BinLogStreamReader) -> bool:
    """Whether the next read will return at once (bytes already buffered): then the consumer
    need not be woken yet, the next transaction will join this batch. Answered from memory:
    asking the socket as well (``select``) woke the consumer less often but released the GIL
    once more per transaction, which tripled the hand-off's p99 under load."""
    conn = getattr(stream, "_stream_connection", None)
    reader = getattr(conn, "_rfile", None)
    return isinstance(reader, BufferedSocketReader) and reader.buffered > 0


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _await(future: asyncio.Future[None]) -> None:
    await future
