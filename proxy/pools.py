"""Per-shard connection pools (aiomysql) that return text-protocol results.

Connections are opened with no value converters and ``use_unicode=False`` so rows
arrive as the raw bytes the shard sent (see ``proxy.engine.result``): nothing is
decoded unless a primitive needs to compare or compute.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiomysql
import pymysql
from pymysql.protocol import FieldDescriptorPacket, OKPacketWrapper

from proxy import aiomysql_wire, row_packets, running_statement
from proxy.addresses import socket_refused, usable_socket, warn_unusable_socket
from proxy.config import ShardEndpoint
from proxy.engine.result import Field, PacketBlock, Result
from proxy.errors import (
    CR_COMMANDS_OUT_OF_SYNC,
    CR_CONN_HOST_ERROR,
    CR_CONNECTION_ERROR,
    CR_SERVER_GONE_ERROR,
    CR_SERVER_LOST,
    CR_SERVER_LOST_EXTENDED,
    ER_CONNECTION_KILLED,
    ER_NO_SUCH_THREAD,
    ER_QUERY_INTERRUPTED,
    ER_UNKNOWN_ERROR,
    ProxyError,
    ShardError,
    ShardUnavailable,
)
from proxy.row_packets import Stop

logger = logging.getLogger(__name__)

# Client-side codes meaning "the connection, not the statement, failed".
_CONNECTION_ERRORS = {
    CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR, CR_SERVER_GONE_ERROR, CR_SERVER_LOST, CR_COMMANDS_OUT_OF_SYNC,
    CR_SERVER_LOST_EXTENDED,
}
STREAM_BATCH_ROWS = 1000
_SERVER_MORE_RESULTS_EXISTS = 0x0008
# A KILL QUERY goes over a connection of its own: the pool may be exhausted by the very
# queries being killed.
KILL_CONNECT_TIMEOUT_S = 5
# How long an abandoned transaction query may take to answer after its KILL QUERY before its
# connection is given up (closed: the shard then rolls the transaction back).
_SETTLE_TIMEOUT_S = 5


@dataclass(frozen=True, slots=True)
class ShardAddress:
    keyspace: str
    shard: str
    host: str
    port: int
    user: str
    password: str
    database: str
    socket: str | None = None  # the shard's Unix socket (ShardEndpoint.socket); None: TCP

    @classmethod
    def of(cls, keyspace: str, shard: str, endpoint: ShardEndpoint) -> ShardAddress:
        e = endpoint
        return cls(keyspace, shard, e.host, e.port, e.user, e.password, e.database, e.socket)


def _text(v: str | bytes) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _field(f: Any) -> Field:
    # f: a pymysql FieldDescriptorPacket, whose attributes are set as it parses (its stubs
    # declare none of them).
    return Field(
        name=_text(f.name),
        type=f.type_code,
        charset=f.charsetnr,
        length=f.length,
        flags=f.flags,
        decimals=f.scale,
        table=_text(f.table_name),
        org_table=_text(f.org_table),
        db=_text(f.db),
        org_name=_text(f.org_name),
    )


_FIELD_CACHE: dict[bytes, Field] = {}
_FIELD_CACHE_MAX = 4096


def field_of(raw: bytes, encoding: str) -> Field:
    """The Field for a column-definition packet. The same statement shapes come back
    again and again, so parsed definitions are kept by their bytes (Fields are never
    mutated: a changed column is a ``dataclasses.replace`` copy)."""
    f = _FIELD_CACHE.get(raw)
    if f is None:
        f = _field(FieldDescriptorPacket(raw, encoding))
        f.raw = raw
        if len(_FIELD_CACHE) >= _FIELD_CACHE_MAX:
            _FIELD_CACHE.clear()
        _FIELD_CACHE[raw] = f
    return f


class RowPacketReader:
    """Reads the row packets of a result in bulk off the connection's socket buffer.

    aiomysql reads (and awaits) one packet at a time, which caps a relayed scan at a
    few hundred thousand rows per second; this takes whole buffers and hands over the
    complete packets in them as one block, headers included."""

    __slots__ = ("reader", "buf")

    READ_SIZE = 256 * 1024

    def __init__(self, conn: aiomysql.Connection) -> None:
        self.reader = aiomysql_wire.socket_reader(conn)
        self.buf = bytearray()

    async def read(self, limit: int) -> tuple[PacketBlock | None, bytes | None]:
        """Row packets (about ``limit`` rows, or more if they arrived together; 0: no limit),
        and the EOF payload once the rows end."""
        buf = self.buf
        starts: list[int] = []
        pos = 0  # end of the complete packets taken so far
        while True:
            pos, stop = row_packets.scan(buf, pos, starts)
            if stop is Stop.EOF:
                end = pos + 4 + row_packets.payload_length(buf, pos)
                if end != len(buf):
                    raise pymysql.err.InternalError(f"{len(buf) - end} unexpected bytes after a result")
                eof = bytes(buf[pos + 4 : end])
                block = self._take(pos, len(starts))
                buf.clear()
                return block, eof
            if stop is Stop.ERROR:
                payload = bytes(buf[pos + 4 : pos + 4 + row_packets.payload_length(buf, pos)])
                buf.clear()
                pymysql.err.raise_mysql_exception(payload)
            if stop is Stop.LONG_ROW:
                joined = row_packets.long_row(buf, pos)
                if joined is not None:  # relayed as its packets, each with its sequence id
                    packets, pos = joined
                    starts.extend(packets)
                    continue
            count = len(starts)
            if limit and count >= limit:
                return self._take(pos, count), None
            if limit and count and not self.reader._buffer:  # type: ignore[attr-defined]  # asyncio's private reader buffer (no public API)
                return self._take(pos, count), None  # nothing more waiting: hand these over now
            chunk = await self.reader.read(self.READ_SIZE)
            if not chunk:
                raise pymysql.err.OperationalError(CR_SERVER_LOST, "Lost connection to MySQL server during query")
            buf += chunk

    def _take(self, pos: int, count: int) -> PacketBlock | None:
        if not count:
            return None
        data = bytes(self.buf[:pos])
        del self.buf[:pos]
        return PacketBlock(data, count, data[3])


class ShardConnection:
    """One checked-out shard connection; statements run on it in order."""

    def __init__(self, pool: ShardPool, conn: aiomysql.Connection) -> None:
        self.pool = pool
        self.conn = conn
        self.broken = False
        self.settled = False  # an abandoned response was read to its end (_first_packet_keeping_connection)
        self._rows: RowPacketReader | None = None
        # A transaction's BEGIN not sent yet: it goes with the first statement (``defer_begin``).
        self._deferred_begin: str | None = None
        self._begin_failed: Callable[[], None] | None = None

    def defer_begin(self, begin_sql: str, failed: Callable[[], None]) -> None:
        """Send ``begin_sql`` together with this connection's next statement, as one
        multi-statement COM_QUERY (``begin;<statement>``): one round trip instead of two.
        The server runs the statement only if the BEGIN succeeded (a multi-statement stops
        at its first error), so the statement never runs outside the transaction; if the
        BEGIN fails (or its answer cannot be read), ``failed`` is called (the transaction
        drops this connection, as it would have had BEGIN failed on its own) and the error
        raised. Measured: a BEGIN of its own cost ~60 µs of proxy CPU per transaction
        (BENCHMARKS.md, "Normal path")."""
        self._deferred_begin, self._begin_failed = begin_sql, failed

    async def begin_deferred(self) -> None:
        """Send a deferred BEGIN now, on its own (for callers that write commands
        themselves: ``proxy.twopc.wire.pipeline``)."""
        begin_sql = self._deferred_begin
        if begin_sql is None:
            return
        self._deferred_begin = None
        try:
            await self.execute(begin_sql)
        except BaseException:
            self._failed_begin()
            raise

    @property
    def begin_pending(self) -> bool:
        """A deferred BEGIN waits for this connection's next statement."""
        return self._deferred_begin is not None

    def take_deferred_begin(self) -> str | None:
        """The deferred BEGIN, for a caller that sends it with the next statement itself as
        ``begin;<statement>`` (``proxy.fast_path``); ``begin_answered`` must follow."""
        begin_sql, self._deferred_begin = self._deferred_begin, None
        return begin_sql

    def begin_answered(self, ok: bool) -> None:
        """The answer to a BEGIN taken by ``take_deferred_begin``: OK, or failed (or unread)."""
        if ok:
            self._begin_failed = None
        else:
            self._failed_begin()

    def _failed_begin(self) -> None:
        failed, self._begin_failed = self._begin_failed, None
        self.broken = True
        if failed is not None:
            failed()

    @property
    def keyspace(self) -> str:
        return self.pool.address.keyspace

    @property
    def thread_id(self) -> int:
        """The shard's id for this connection (what its KILL and processlist name)."""
        return int(self.conn.server_thread_id[0])

    def has_settings(self, settings: Mapping[str, str]) -> bool:
        """Whether this connection carries exactly ``settings`` (``apply_settings`` sends nothing)."""
        return aiomysql_wire.settings_of(self.conn) == settings

    async def apply_settings(self, settings: Mapping[str, str]) -> None:
        """Make this connection's session variables exactly ``settings`` (name -> SQL
        literal), changing only what differs from what it had: pooled connections
        carry the settings of the session that used them last."""
        current = aiomysql_wire.settings_of(self.conn)
        if current == settings:
            return
        parts = [f"@@session.{name} = DEFAULT" for name in current if name not in settings]
        parts += [f"@@session.{name} = {value}" for name, value in settings.items() if current.get(name) != value]
        aiomysql_wire.record_settings(self.conn, aiomysql_wire.NO_SETTINGS)  # unknown until the SET succeeds
        await self.execute("set " + ", ".join(parts))
        aiomysql_wire.record_settings(self.conn, dict(settings))

    @property
    def shard(self) -> str:
        return self.pool.address.shard

    def _translate(self, exc: BaseException) -> Exception:
        return self.pool.translate(exc, self)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[ShardConnection]:
        """BEGIN; COMMIT when the block ends, ROLLBACK when it raises (a connection whose
        rollback fails is marked broken: MariaDB rolls back on disconnect)."""
        await self.execute("begin")
        try:
            yield self
        except BaseException:
            await self.rollback_or_break()
            raise
        await self.execute("commit")

    async def rollback_or_break(self) -> None:
        """ROLLBACK after a failure; a connection whose rollback fails (or that is already
        broken) is marked broken: closed instead of pooled, MariaDB rolls back on disconnect."""
        if self.broken:
            return
        try:
            await self.execute("rollback")
        except ProxyError:
            self.broken = True

    async def execute(self, sql: str) -> Result:
        """Run one statement and read its whole result."""
        gen = self.stream(sql, batch_rows=0)
        try:
            return await gen.__anext__()  # batch_rows=0: the whole result is one chunk
        finally:
            await gen.aclose()

    async def execute_oks(self, sql: str) -> list[Result]:
        """Run a multi-statement whose statements each answer OK (none returns rows): their
        results, in order. MariaDB stops at the first failing statement, whose error is raised;
        what ran before it stays done (a transaction it began stays open: the caller rolls it
        back). Any other answer, or an interruption, leaves the connection broken."""
        results, _ = await self._oks(sql, None)
        return results

    async def execute_oks_then_rows(self, sql: str, oks: int) -> tuple[list[Result], Result | None]:
        """``execute_oks`` of a multi-statement of ``oks`` statements answering OK and then one
        returning rows: the OKs, and that last statement's result (its rows one block), or None
        when it failed, or its answer was cut after the OKs (the connection then broken): what
        the OKs did stays done either way, so only an error before them raises."""
        return await self._oks(sql, oks)

    async def _oks(self, sql: str, oks: int | None) -> tuple[list[Result], Result | None]:
        assert self._deferred_begin is None, "a multi-statement on a connection of a transaction"
        conn = self.conn
        statement = running_statement.current()
        if statement is not None:
            statement.shard_query_started(self)  # raises if that statement was killed
        results: list[Result] = []
        pending = True
        in_rows = False
        try:
            try:
                await aiomysql_wire.send_query(conn, sql)
                while True:
                    packet = await aiomysql_wire.read_packet(conn)
                    if not packet.is_ok_packet():
                        if oks is not None and len(results) == oks:
                            in_rows = True
                            rows = await self._last_rows(conn, packet)
                            pending = False
                            return results, rows
                        self.broken = True  # a result set's rows follow, unread
                        raise pymysql.err.OperationalError(CR_COMMANDS_OUT_OF_SYNC, "a result set in a multi-statement of OKs")
                    ok = OKPacketWrapper(packet)
                    conn.server_status = ok.server_status
                    results.append(Result(affected_rows=ok.affected_rows, insert_id=ok.insert_id,
                                          warnings=ok.warning_count, info=(ok.message or b"").decode("utf-8", "replace")))
                    if not ok.server_status & _SERVER_MORE_RESULTS_EXISTS:
                        pending = False
                        return results, None
            except (pymysql.err.MySQLError, OSError, asyncio.IncompleteReadError) as e:
                # An error packet ends the response (one amid rows: then the connection goes).
                pending = in_rows or not isinstance(e, pymysql.err.MySQLError)
                if oks is not None and len(results) == oks:
                    if pending:
                        logger.warning("shard answer cut after a multi-statement's OKs",
                                       extra={"shard": self.shard, "error": repr(e)})
                    return results, None  # the rows' statement failed, or its answer was cut
                raise self._translate(e) from e
        finally:
            if statement is not None:
                statement.shard_query_ended(self)
            if pending:
                self.broken = True

    async def _last_rows(self, conn: aiomysql.Connection, first: Any) -> Result:
        """The rest of a multi-statement's last answer, a result set whose first packet is
        ``first``: its fields and all its rows as one block."""
        ncols = first.read_length_encoded_integer()
        encoding = aiomysql_wire.text_encoding(conn)
        fields = [field_of(aiomysql_wire.packet_payload(await aiomysql_wire.read_packet(conn)), encoding)
                  for _ in range(ncols)]
        await aiomysql_wire.read_packet(conn)  # EOF after the column definitions
        block, eof = await RowPacketReader(conn).read(0)
        assert eof is not None  # limit 0: the whole result
        conn.server_status = int.from_bytes(eof[3:5], "little")
        if conn.server_status & _SERVER_MORE_RESULTS_EXISTS:
            self.broken = True  # not the last answer: what follows is unread
        return Result(fields=fields, block=block)

    async def stream(
        self, sql: str, batch_rows: int = STREAM_BATCH_ROWS, keep_on_abandon: bool = False
    ) -> AsyncGenerator[Result, None]:
        """Run one statement; yield its result in chunks of at most ``batch_rows``
        rows (0: one chunk), the first carrying the fields.

        Packets are read straight off the connection: column definitions and rows
        stay as the shard's bytes (``Field.raw``, ``Result.raw_rows``) so a result
        forwarded whole is never decoded or re-encoded.

        If the consumer stops early the connection is marked broken (closing it is
        the only way to stop MySQL sending the rest of a large result), unless
        ``keep_on_abandon`` (a connection pinned to a transaction): then the running
        statement is interrupted with KILL QUERY and the connection survives."""
        conn = self.conn
        pending = True  # a response is (or may be) on the wire, unread
        reading = False  # we are past the column definitions, in the rows
        # The client statement this query works for learns it is on the shard (KILL QUERY).
        statement = running_statement.current()
        if statement is not None:
            statement.shard_query_started(self)  # raises if that statement was killed
        begin_sql, self._deferred_begin = self._deferred_begin, None
        try:
            try:
                if begin_sql is not None:
                    # No newline: a syntax error in the statement still says "at line 1".
                    sql = f"{begin_sql};{sql}"
                await aiomysql_wire.send_query(conn, sql)
                if keep_on_abandon:
                    first = await self._first_packet_keeping_connection(conn, begin_sql is not None)
                else:
                    first = await self._first_packet(conn, begin_sql is not None)
                if first.is_ok_packet():
                    pending = False
                    ok = OKPacketWrapper(first)
                    conn.server_status = ok.server_status
                    yield Result(
                        affected_rows=ok.affected_rows,
                        insert_id=ok.insert_id,
                        warnings=ok.warning_count,
                        info=(ok.message or b"").decode("utf-8", "replace"),
                    )
                    return
                ncols = first.read_length_encoded_integer()
                fields = []
                for _ in range(ncols):
                    fp = await aiomysql_wire.read_packet(conn)
                    fields.append(field_of(aiomysql_wire.packet_payload(fp), aiomysql_wire.text_encoding(conn)))
                await aiomysql_wire.read_packet(conn)  # EOF after the column definitions
                reading = True
                self._rows = rows_reader = RowPacketReader(conn)
                first_chunk = True
                while True:
                    block, eof = await rows_reader.read(batch_rows)
                    if eof is not None:
                        conn.server_status = int.from_bytes(eof[3:5], "little")
                        pending = False
                        # Its warning count (the EOF's) goes on to the client's EOF.
                        yield Result(fields=fields if first_chunk else [], block=block,
                                     warnings=int.from_bytes(eof[1:3], "little"))
                        return
                    yield Result(fields=fields if first_chunk else [], block=block)
                    first_chunk = False
            except (pymysql.err.MySQLError, OSError, asyncio.IncompleteReadError) as e:
                # An error packet ends the response; anything else broke the connection.
                pending = False
                raise self._translate(e) from e
        finally:
            if statement is not None:
                statement.shard_query_ended(self)
            if self.settled:
                pending, self.settled = False, False
            if pending and not self.broken:
                if keep_on_abandon and reading:
                    await self._interrupt()
                else:
                    # Abandoned or cancelled mid-response: the connection is unusable.
                    self.broken = True

    async def _first_packet(self, conn: aiomysql.Connection, after_begin: bool) -> Any:
        """The first packet of the statement's answer; with ``after_begin``, the deferred
        BEGIN's OK is read first (its failure detaches the connection from the transaction)."""
        if after_begin:
            try:
                ok = await aiomysql_wire.read_packet(conn)
            except BaseException:
                self._failed_begin()
                raise
            if not ok.is_ok_packet():  # BEGIN answers OK or an error, nothing else
                self._failed_begin()
                raise pymysql.err.OperationalError(CR_SERVER_LOST, "unexpected answer to BEGIN")
        self._begin_failed = None
        return await aiomysql_wire.read_packet(conn)

    async def _first_packet_keeping_connection(self, conn: aiomysql.Connection, after_begin: bool = False) -> Any:
        """The first packet of the response, on a connection that must survive its statement
        being abandoned (a transaction's). aiomysql closes a connection whose read is
        cancelled, so the read is shielded: on cancellation (a killed statement, a failed
        sibling of a scatter) the query is stopped with KILL QUERY and its response read
        to the end, then the cancellation goes on with the connection clean."""
        read = asyncio.ensure_future(self._first_packet(conn, after_begin))
        try:
            return await asyncio.shield(read)
        except asyncio.CancelledError:
            try:
                await self.pool.kill_query(self.thread_id)
                async with asyncio.timeout(_SETTLE_TIMEOUT_S):
                    await self._discard_response(await read)
            except pymysql.err.MySQLError as e:
                if e.args and e.args[0] in _CONNECTION_ERRORS:
                    self.broken = True  # else an error packet: the response is over, the connection clean
            except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.CancelledError):
                self.broken = True
            finally:
                if not read.done():
                    read.cancel()
            if not self.broken:
                self.settled = True  # stream() must not mark it broken for the abandoned response
            raise

    async def _discard_response(self, first: Any) -> None:
        """Read what is left of a response whose first packet is ``first``."""
        if first.is_ok_packet():
            return
        for _ in range(first.read_length_encoded_integer()):
            await aiomysql_wire.read_packet(self.conn)  # column definitions
        await aiomysql_wire.read_packet(self.conn)  # EOF after them
        rows = RowPacketReader(self.conn)
        while (await rows.read(0))[1] is None:
            pass

    async def _interrupt(self) -> None:
        """Stop the running statement but keep the connection and its transaction:
        KILL QUERY from a side connection, then read what was already sent."""
        try:
            async with self.pool.connection() as side:
                await side.execute(f"kill query {self.conn.server_thread_id[0]}")
            assert self._rows is not None
            while (await self._rows.read(0))[1] is None:
                pass
        except ProxyError:
            self.broken = True
        except pymysql.err.MySQLError as e:
            if not (e.args and e.args[0] in (ER_QUERY_INTERRUPTED, ER_CONNECTION_KILLED)):  # interrupted, as intended
                self.broken = True
        except (OSError, asyncio.IncompleteReadError):
            self.broken = True


class ShardPool:
    """A pool of connections to one shard's primary."""

    def __init__(self, address: ShardAddress, minsize: int = 1, maxsize: int = 32) -> None:
        self.address = address
        self.minsize = minsize
        self.maxsize = maxsize
        self._pool: aiomysql.Pool | None = None
        self._lock = asyncio.Lock()
        self._unix_socket: str | None = None
        self._socket_probed = False
        # For the metrics (proxy.observability): connections checked out; acquires that found no
        # idle connection (they opened one or waited for one), how long they took, how many run now.
        self.acquires = 0
        self.waits = 0
        self.wait_seconds = 0.0
        self.waiting = 0

    @property
    def name(self) -> str:
        return f"{self.address.keyspace}/{self.address.shard}"

    @property
    def unix_socket(self) -> str | None:
        """The Unix socket the pool's connections, its KILL connections and the fast path's links
        use (None: TCP): a socket skips the TCP stack on both ends of every send (BENCHMARKS.md,
        unixsock). Checked once per pool (the file here, a refused first connection in
        _ensure_pool): a pool that fell back stays on TCP."""
        if not self._socket_probed:
            a = self.address
            self._unix_socket = usable_socket(a.socket, a.host, a.port)
            self._socket_probed = True
        return self._unix_socket

    async def _ensure_pool(self) -> aiomysql.Pool:
        if self._pool is not None:
            return self._pool
        async with self._lock:
            if self._pool is None:
                try:
                    self._pool = await self._new_pool()
                except (pymysql.err.MySQLError, OSError) as e:
                    raise self.translate(e, None) from e
        return self._pool

    async def _new_pool(self) -> aiomysql.Pool:
        """A pool over the socket, else TCP. With a socket configured, the first connection is
        opened at once: a socket file nobody listens on (left where the server no longer
        listens) falls back to TCP, and a shard that answers neither is looked at again next
        time instead of staying on TCP once it is back."""
        path, a = self.unix_socket, self.address
        if a.socket is None:
            return await self._create_pool(None)
        try:
            if path is None:
                return await self._opened(await self._create_pool(None))
            try:
                return await self._opened(await self._create_pool(path))
            except pymysql.err.OperationalError as e:
                if not socket_refused(e):
                    raise
                tcp = await self._opened(await self._create_pool(None))
                warn_unusable_socket(path, a.host, a.port, str(e))
                self._unix_socket = None
                return tcp
        except BaseException:
            self._socket_probed = False
            raise

    @staticmethod
    async def _opened(pool: aiomysql.Pool) -> aiomysql.Pool:
        """``pool`` with its first connection open (idle in it); closed if that failed."""
        try:
            pool.release(await pool.acquire())
        except BaseException:
            pool.close()
            await pool.wait_closed()
            raise
        return pool

    async def _create_pool(self, unix_socket: str | None) -> aiomysql.Pool:
        a = self.address
        return await aiomysql.create_pool(
            minsize=0,
            maxsize=self.maxsize,
            host=a.host,
            port=a.port,
            unix_socket=unix_socket,
            user=a.user,
            password=a.password,
            db=a.database,
            autocommit=True,
            conv={},
            use_unicode=False,
            charset="utf8mb4",
            pool_recycle=3600,
            connect_timeout=5,
        )

    async def kill_query(self, thread_id: int) -> None:
        """``KILL QUERY thread_id`` on this shard, over a connection of its own."""
        a = self.address
        conn = await aiomysql.connect(
            host=a.host, port=a.port, unix_socket=self.unix_socket, user=a.user, password=a.password,
            connect_timeout=KILL_CONNECT_TIMEOUT_S,
        )
        try:
            await conn.query(f"kill query {int(thread_id)}")
        except pymysql.err.MySQLError as e:
            if not (e.args and e.args[0] == ER_NO_SUCH_THREAD):  # "Unknown thread id": the query ended meanwhile
                raise
        finally:
            conn.close()

    def translate(self, exc: BaseException, conn: ShardConnection | None) -> Exception:
        a = self.address
        code = exc.args[0] if isinstance(exc, pymysql.err.MySQLError) and exc.args else None
        if isinstance(exc, (OSError, asyncio.IncompleteReadError)) or code in _CONNECTION_ERRORS or (
            isinstance(exc, pymysql.err.InterfaceError)
        ):
            if conn is not None:
                conn.broken = True
            logger.warning("shard unavailable", extra={"keyspace": a.keyspace, "shard": a.shard, "error": str(exc)})
            return ShardUnavailable(a.keyspace, a.shard, str(exc.args[-1] if exc.args else exc))
        if isinstance(exc, pymysql.err.MySQLError) and isinstance(code, int):
            return ShardError(a.keyspace, a.shard, code, str(exc.args[1]) if len(exc.args) > 1 else str(exc))
        return ShardUnavailable(a.keyspace, a.shard, repr(exc))

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[ShardConnection]:
        sc = await self.acquire()
        try:
            yield sc
        finally:
            self.release(sc)

    async def acquire(self) -> ShardConnection:
        pool = await self._ensure_pool()
        self.acquires += 1
        if pool.freesize:  # the fast path: an idle connection is there
            try:
                conn = await pool.acquire()
            except (pymysql.err.MySQLError, OSError) as e:
                raise self.translate(e, None) from e
            return ShardConnection(self, conn)
        self.waiting += 1
        started = time.perf_counter()
        try:
            conn = await pool.acquire()
        except (pymysql.err.MySQLError, OSError) as e:
            raise self.translate(e, None) from e
        finally:
            self.waiting -= 1
            self.waits += 1
            self.wait_seconds += time.perf_counter() - started
        return ShardConnection(self, conn)

    def acquire_nowait(self) -> ShardConnection | None:
        """An idle connection at once (``proxy.fast_path``, which has no task to wait in), or
        None: ``acquire`` must wait or open one."""
        if self._pool is None:
            return None
        conn = aiomysql_wire.take_idle(self._pool)
        if conn is None:
            return None
        self.acquires += 1
        return ShardConnection(self, conn)

    def release(self, sc: ShardConnection) -> None:
        assert self._pool is not None
        if sc.broken:
            sc.conn.close()
        # aiomysql's release starts a task to wake a waiting acquire even when none waits: 2.6 us
        # of CPU per release (a micro-benchmark of 20,000 such tasks), once per transaction and
        # per autocommit statement of the normal path.
        if not aiomysql_wire.give_back(self._pool, sc.conn):
            self._pool.release(sc.conn)

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            await self._pool.wait_closed()
            self._pool = None


class ShardPools:
    """All shard pools of a cluster, keyed by (keyspace, shard).

    The set changes when a keyspace is resharded (proxy/resharding): ``ensure`` adds the pool
    of a shard that starts serving, ``retire`` takes away one that stops. A retired pool's idle
    connections close at once and its busy ones when they are released (a transaction still
    running on it finishes there); ``close`` waits for those too."""

    def __init__(self, addresses: list[ShardAddress], maxsize: int = 32) -> None:
        self.maxsize = maxsize
        self.pools = {(a.keyspace, a.shard): ShardPool(a, maxsize=maxsize) for a in addresses}
        self._retiring: set[asyncio.Task[None]] = set()

    def ensure(self, address: ShardAddress) -> ShardPool:
        """The pool of ``address``'s shard, made if missing (or if the shard moved elsewhere:
        the old one is retired)."""
        key = (address.keyspace, address.shard)
        pool = self.pools.get(key)
        if pool is not None and pool.address == address:
            return pool
        if pool is not None:
            self.retire(*key)
        pool = self.pools[key] = ShardPool(address, maxsize=self.maxsize)
        return pool

    def retire(self, keyspace: str, shard: str) -> None:
        """Stop handing out connections to a shard; its connections close once idle."""
        pool = self.pools.pop((keyspace, shard), None)
        if pool is None:
            return
        task = asyncio.get_running_loop().create_task(pool.close(), name=f"retire-pool-{pool.name}")
        self._retiring.add(task)
        task.add_done_callback(self._retired)
        logger.info("shard pool retired", extra={"keyspace": keyspace, "shard": shard})

    def _retired(self, task: asyncio.Task[None]) -> None:
        self._retiring.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("closing a retired shard pool failed", exc_info=task.exception())

    def get(self, keyspace: str, shard: str) -> ShardPool:
        try:
            return self.pools[(keyspace, shard)]
        except KeyError:
            raise ProxyError(ER_UNKNOWN_ERROR, f"no such shard: {keyspace}/{shard}") from None

    async def close(self) -> None:
        await asyncio.gather(*(p.close() for p in self.pools.values()), return_exceptions=False)
        await asyncio.gather(*self._retiring, return_exceptions=True)  # failures logged by _retired
