"""One shard's binlog, read and decoded by python-mysql-replication: the blocking part.

``BinlogDecoder.run()`` reads the binlog with the (blocking) library, assembles whole
transactions (``TransactionAssembler``) and hands each to a ``DecodedSink`` until the sink
is closed or the stream fails; it runs in the shard's decoder process (see
``decoder_process``), so it never shares a GIL with the proxy or another shard.

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

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from proxy import pymysql_internals
from proxy.addresses import is_loopback, socket_refused, usable_socket, warn_unusable_socket
from proxy.cdc import socket_reader
from proxy.cdc.errors import (
    PositionPurgedError,
    PositionUnknownError,
    ShardStreamError,
    ShardUnavailableError,
)
from proxy.cdc.group_skipper import ROW_EVENT_TYPES, GroupSkipper
from proxy.cdc.positions import GtidPosition
from proxy.cdc.replica_ids import next_replica_server_id
from proxy.cdc.socket_reader import BufferedSocketReader
from proxy.cdc.table_filter import TableFilter
from proxy.cdc.transaction_assembler import (
    ShardHeartbeat,
    ShardTransaction,
    TransactionAssembler,
)
from proxy.cdc.xa_branch_reader import PreparedGroupReader
from proxy.errors import (
    CR_CONN_HOST_ERROR,
    CR_CONNECTION_ERROR,
    CR_SERVER_GONE_ERROR,
    CR_SERVER_LOST,
    CR_SERVER_LOST_EXTENDED,
    ER_MASTER_FATAL_ERROR_READING_BINLOG,
)
from proxy.resharding.journal import JOURNAL_TABLES
from proxy.sidecar_tables import SIDECAR_DB

logger = logging.getLogger(__name__)

_CONNECTION_ERRORS = frozenset({CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR, CR_SERVER_GONE_ERROR, CR_SERVER_LOST, CR_SERVER_LOST_EXTENDED})
_CONTROL_EVENTS = [MariadbGtidEvent, QueryEvent, XidEvent, XAPrepareEvent, HeartbeatLogEvent]
ROW_EVENTS_BY_OP = {"insert": WriteRowsEvent, "update": UpdateRowsEvent, "delete": DeleteRowsEvent}
ALL_ROW_OPS = frozenset(ROW_EVENTS_BY_OP)

ShardItem = ShardTransaction | ShardHeartbeat


class ShardEndpointLike(Protocol):
    # Read-only: endpoints are frozen dataclasses (proxy.config.ShardEndpoint, BinlogSource).
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def user(self) -> str: ...
    @property
    def password(self) -> str: ...
    @property
    def database(self) -> str: ...
    @property
    def socket(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class BinlogSource:
    """Where a decoder reads from: a shard endpoint reduced to plain (picklable) values."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str
    socket: str | None = None

    @classmethod
    def of(cls, endpoint: ShardEndpointLike) -> BinlogSource:
        return cls(
            str(endpoint.host),
            int(endpoint.port),
            str(endpoint.user),
            str(endpoint.password or ""),
            str(endpoint.database),
            endpoint.socket,
        )


@dataclass(frozen=True, slots=True)
class DecoderSpec:
    """Everything a decoder needs, sent to its process when it starts."""

    keyspace: str
    shard: str
    source: BinlogSource
    start: GtidPosition
    table_filter: TableFilter
    server_id: int
    heartbeat_period: float = 1.0
    skip_before_timestamp: int | None = None
    reconnect_timeout: float = 30.0
    row_ops: frozenset[str] = ALL_ROW_OPS
    # False: row events carry no row images (``changes`` empty, no FIELD events): the rows
    # are never decoded, for consumers that only need to know a table changed.
    row_images: bool = True
    # Non-empty: ANNOTATE_ROWS events are asked for, and the row events of a statement whose
    # text holds these bytes are dropped undecoded (``GroupSkipper``; messaging's watch skips
    # the proxy's own inserts, proxy/messaging/own_mark.py). Only for consumers of touches.
    skip_annotated: bytes = b""
    # The replica id of the second binlog connection that reads prepared XA branches back
    # (see xa_branch_reader); drawn by the proxy like ``server_id``.
    lookup_server_id: int | None = None


@dataclass(slots=True)
class DecoderStats:
    connections: int = 0
    transactions: int = 0
    heartbeats: int = 0
    duplicates_skipped: int = 0  # transactions the position already included
    partial_transactions_discarded: int = 0  # cut by a lost connection; came again whole


class SinkClosed(Exception):
    """The consumer went away; the decoder must stop."""


class DecodedSink(Protocol):
    """Where a decoder's items go. ``put`` may block (backpressure) and raises SinkClosed."""

    def put(self, item: ShardItem, stats: DecoderStats) -> None: ...

    def idle(self) -> None:
        """Nothing more is buffered: the next read will block, so deliver what is held."""

    def finish(self, error: ShardStreamError | None, stats: DecoderStats) -> None: ...


def connection_kwargs(endpoint: ShardEndpointLike) -> dict[str, Any]:
    return {
        "host": endpoint.host,
        "port": int(endpoint.port),
        # The shard's Unix socket when it is there (PyMySQL then ignores host and port): no TCP
        # stack on either end of the binlog stream.
        "unix_socket": usable_socket(endpoint.socket, endpoint.host, int(endpoint.port)),
        "user": endpoint.user,
        "password": endpoint.password or "",
        "connect_timeout": 5,
        # PyMySQL otherwise prefers TLS and builds a fresh SSL context (loading the system's
        # CA store, ~0.1 s) on every connect; over loopback TLS protects nothing.
        "ssl_disabled": is_loopback(endpoint.host),
    }


def connect_shard(**kwargs: Any) -> pymysql.Connection[Any]:
    """``pymysql.connect(**kwargs)`` (``connection_kwargs`` and more); a ``unix_socket`` nobody
    listens on (a socket file left where the server no longer listens) is warned about and left
    for TCP."""
    try:
        return pymysql.connect(**kwargs)
    except pymysql.err.OperationalError as e:
        path = kwargs.get("unix_socket")
        if path is None or not socket_refused(e):
            raise
        warn_unusable_socket(path, kwargs["host"], kwargs["port"], str(e))
        return pymysql.connect(**{**kwargs, "unix_socket": None})


class BinlogDecoder:
    def __init__(self, spec: DecoderSpec, sink: DecodedSink) -> None:
        """``spec.row_ops``: which row changes to read; the others are skipped undecoded by
        the library, which is most of the cost of a busy table."""
        self.spec = spec
        self.keyspace = spec.keyspace
        self.shard = spec.shard
        self.source = spec.source
        self.server_id = spec.server_id
        self.clock_offset = 0.0  # shard clock minus ours, seconds
        self.stats = DecoderStats()
        self._sink = sink
        self._heartbeat_period = spec.heartbeat_period
        self._reconnect_timeout = spec.reconnect_timeout
        self._only_tables = spec.table_filter.explicit_tables(spec.keyspace)
        # Inserts are read whatever row_ops says: a resharding journal is one (the assembler
        # drops the others).
        row_events = [ROW_EVENTS_BY_OP[op] for op in sorted(spec.row_ops | {"insert"})]
        self._events = _CONTROL_EVENTS + row_events
        self.prepared_groups = PreparedGroupReader(
            spec.keyspace,
            spec.shard,
            connection_kwargs(spec.source),
            spec.lookup_server_id or next_replica_server_id(),
            spec.source.database,
            self._only_tables,
            row_events,
            connect=_connect_plain,
        )
        self._assembler = TransactionAssembler(
            spec.keyspace,
            spec.shard,
            spec.source.database,
            spec.table_filter,
            spec.start,
            skip_before_timestamp=spec.skip_before_timestamp,
            load_prepared_group=self.prepared_groups.read,
            row_images=spec.row_images,
            row_ops=spec.row_ops,
        )
        self._stream: BinLogStreamReader | None = None
        # Row events of the kinds not read: whole transactions made only of them are dropped
        # under the library (``group_skipper``), on the connection ``_skipper`` serves.
        self._unwanted = frozenset().union(
            *(types for op, types in ROW_EVENT_TYPES.items() if op not in spec.row_ops | {"insert"})
        )
        self._skip_annotated = spec.skip_annotated
        self._skipper: GroupSkipper | None = None
        self._skipped_conn: object = None

    @property
    def position(self) -> GtidPosition:
        """The position after the last whole transaction read (delivered or filtered)."""
        return self._assembler.position

    def _sync_stats(self) -> DecoderStats:
        stats = self.stats
        stats.duplicates_skipped = self._assembler.duplicates_skipped
        stats.partial_transactions_discarded = self._assembler.partial_transactions_discarded
        return stats

    def run(self) -> None:
        """Stream until the sink closes or the stream fails; the sink always gets ``finish``
        unless it closed (then there is nobody to tell)."""
        error: ShardStreamError | None = None
        try:
            self._stream_with_retries()
        except SinkClosed:
            return
        except ShardStreamError as exc:
            error = exc
        except Exception as exc:  # any other failure ends the stream, named by shard
            logger.exception(
                "binlog reader failed", extra={"keyspace": self.keyspace, "shard": self.shard}
            )
            error = ShardStreamError(self.keyspace, self.shard, f"binlog reader failed: {exc!r}")
            error.__cause__ = exc
        self._sink.finish(error, self._sync_stats())

    def _stream_with_retries(self) -> None:
        first_failure: float | None = None
        backoff = 0.2
        while True:
            try:
                self._measure_clock_offset()
                self._stream_until_failure()
                return
            except pymysql.OperationalError as exc:
                code = exc.args[0] if exc.args else None
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
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            else:
                first_failure = None

    def _position_error(self, message: str) -> ShardStreamError:
        position = str(self.position)
        if "purged" in message.lower():
            return PositionPurgedError(self.keyspace, self.shard, position, message)
        return PositionUnknownError(self.keyspace, self.shard, position, message)

    def _measure_clock_offset(self) -> None:
        conn = self._connect(**connection_kwargs(self.source))
        try:
            with conn.cursor() as cur:
                before = time.time()
                cur.execute("SELECT UNIX_TIMESTAMP(NOW(6))")
                after = time.time()
                (shard_now,) = cur.fetchone()  # type: ignore[misc]  # pymysqlreplication is untyped
            self.clock_offset = float(shard_now) - (before + after) / 2
            self._assembler.clock_offset = self.clock_offset
        finally:
            conn.close()

    def _connect(self, **kwargs: Any) -> pymysql.Connection:
        """Every connection the library opens comes through here (``pymysql_wrapper``)."""
        stream = self._stream
        if stream is not None:
            # Resume from our own position, never from the one the library started with.
            stream.auto_position = str(self.position)
        if "db" in kwargs:  # the library still uses PyMySQL's deprecated spelling
            kwargs["database"] = kwargs.pop("db")
        conn = connect_shard(**kwargs)
        socket_reader.install(conn)
        self.stats.connections += 1
        return conn

    def _stream_until_failure(self) -> None:
        sink = self._sink
        assembler = self._assembler
        settings = connection_kwargs(self.source)
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
            # The sidecar database too: a resharding switch's journal row is there.
            only_schemas=[self.source.database, SIDECAR_DB],
            only_tables=None if self._only_tables is None else [*self._only_tables, *JOURNAL_TABLES],
            slave_heartbeat=self._heartbeat_period,
            pymysql_wrapper=self._connect,
            enable_logging=False,
            # Without row images only a row event's table name is used: the library may skip
            # re-parsing the table map of a table id it knows (the table name of an id never
            # changes; a DDL gives the table a new id). Parsing every transaction's table map
            # was half of such a decoder's CPU (bench_messaging, binlog watch).
            freeze_schema=not self.spec.row_images,
            annotate_rows_event=bool(self._skip_annotated),
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
            stats = self.stats
            skipping = bool(self._unwanted or self._skip_annotated)
            while True:
                if skipping:
                    self._skip_unwanted_groups(stream)
                event = fetch()
                if event is None:
                    # The server ended the dump (shutdown): reconnect like a lost link.
                    raise pymysql.OperationalError(CR_SERVER_LOST, "binlog dump ended by the server")
                item = assembler.on_event(event, clock())
                if item is not None:
                    if isinstance(item, ShardHeartbeat):
                        stats.heartbeats += 1
                    else:
                        stats.transactions += 1
                    sink.put(item, self._sync_stats())
                    if not _more_to_read(stream, self._skipper):
                        sink.idle()
        finally:
            self._stream = None
            self._skipper = self._skipped_conn = None
            stream.close()

    def _skip_unwanted_groups(self, stream: BinLogStreamReader) -> None:
        """Put a ``GroupSkipper`` under the library on its binlog connection, once it has one
        (the library opens it inside its first read, and again when it reconnects: until the
        next read, events go to the library unfiltered, as without a skipper)."""
        conn = getattr(stream, "_stream_connection", None)
        if conn is None or conn is self._skipped_conn:
            return
        reader = pymysql_internals.buffered_reader(conn)
        if not isinstance(reader, BufferedSocketReader):
            return
        sink, assembler = self._sink, self._assembler

        def wrap(read_packet: Callable[[], Any]) -> Callable[[], Any]:
            skipper = GroupSkipper(
                read_packet, reader, self._unwanted, assembler.skipped, sink.idle, self._skip_annotated
            )
            self._skipper = skipper
            return skipper.read_packet

        pymysql_internals.intercept_packets(conn, wrap)
        self._skipped_conn = conn


def _connect_plain(**kwargs: Any) -> pymysql.Connection:
    """Connections of the prepared-branch reader (its own binlog dump and queries)."""
    if "db" in kwargs:  # the library still uses PyMySQL's deprecated spelling
        kwargs["database"] = kwargs.pop("db")
    return connect_shard(**kwargs)


def _more_to_read(stream: BinLogStreamReader, skipper: GroupSkipper | None = None) -> bool:
    """Whether the next read will return at once (bytes already buffered): then the consumer
    need not be woken yet, the next transaction will join this batch. Answered from memory:
    asking the socket as well (``select``) costs a syscall per transaction."""
    if skipper is not None and skipper.pending:
        return True
    conn = getattr(stream, "_stream_connection", None)
    reader = getattr(conn, "_rfile", None)
    return isinstance(reader, BufferedSocketReader) and reader.buffered > 0
