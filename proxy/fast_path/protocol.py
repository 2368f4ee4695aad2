"""The client side of the fast path: an ``asyncio.Protocol`` in front of the connection's
StreamReader, from the end of the handshake on.

``install_fast_path`` puts a ``ClientFastPath`` in the place of the connection's
``StreamReaderProtocol`` on its transport. Every packet the client sends then reaches
``data_received`` first. A COM_QUERY that ``proxy.fast_path.routing`` qualifies is
answered here (and a COM_STMT_EXECUTE whose bound statement text qualifies, its
answer re-encoded in the binary protocol by ``proxy.fast_path.binary_result``), within the event loop's callbacks: its shard query goes out on a
``ShardLink`` and the shard's response goes back to the client in one write (re-framed
only where the proxy's answer differs: the EOF status flags, an ERR naming the shard).
Anything else (a statement that does not qualify, another command, pipelined data
behind it) is handed to the StreamReaderProtocol untouched, and mysql-mimic's command
loop (``ProxyConnection.command_phase``) runs it as it always did; the fast path takes
the connection back once that loop has finished the command and has nothing buffered
(``command_done``). So a connection's commands are answered in order, whichever path
runs each.

On the fast path a statement still shows in SHOW PROCESSLIST (a ``RunningStatement``
with its shard link on it, so KILL QUERY reaches the shard), is counted in /metrics,
tells messaging and topics about a successful INSERT, and fails with the normal path's
errors (``ShardError``, ``ShardUnavailable``, 1317 after a kill). TLS connections and
clients with CLIENT_QUERY_ATTRIBUTES or CLIENT_DEPRECATE_EOF keep the normal path.
``SHARDGATE_FAST_PATH=0`` in the environment turns the fast path off.

Measured (bench_proxy, 8 clients, one worker): see BENCHMARKS.md, "Proxy: fast path".
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from mysql_mimic.types import Capabilities

from proxy import wire
from proxy.errors import ProxyError, ShardError, ShardUnavailable
from proxy.fast_path.binary_result import BinaryResult
from proxy.fast_path.routing import FastRoute, fast_route
from proxy.fast_path.shard_link import LinkPools, ReadBuffer, ShardErr, ShardLink, lenenc
from proxy.mysql_mimic_internals import buffered_input
from proxy.observability.metrics import record_error, record_statement
from proxy.prepared import (
    PreparedStatement,
    bind_parameters,
    names_items_by_parameters,
    read_execute,
)
from proxy.resharding.denied_writes import is_denied_write_error
from proxy.running_statement import RunningStatement

if TYPE_CHECKING:
    from proxy.connection import ProxyConnection

logger = logging.getLogger(__name__)

_COM_QUERY = 0x03
_COM_STMT_EXECUTE = 0x17
_COM_STMT_RESET = 0x1A
_MAX_PAYLOAD = 0xFFFFFF
# Capabilities that change what a COM_QUERY or its answer looks like on the wire.
_INCOMPATIBLE = Capabilities.CLIENT_QUERY_ATTRIBUTES | Capabilities.CLIENT_DEPRECATE_EOF


def enabled() -> bool:
    return os.environ.get("SHARDGATE_FAST_PATH", "1") != "0"


def install_fast_path(connection: ProxyConnection, links: LinkPools) -> ClientFastPath | None:
    """Put the fast path in front of a logged-in connection; None when it cannot serve it."""
    if not enabled():
        return None
    transport = connection.stream.writer.transport
    caps = connection.capabilities
    if (
        transport.get_extra_info("sslcontext") is not None
        or not caps & Capabilities.CLIENT_PROTOCOL_41
        or caps & _INCOMPATIBLE
    ):
        return None
    inner = transport.get_protocol()
    if not isinstance(inner, asyncio.StreamReaderProtocol) or not isinstance(transport, asyncio.Transport):
        return None
    fast = ClientFastPath(connection, inner, transport, links)
    transport.set_protocol(fast)
    if buffered_input(connection.stream.reader):
        fast.slow = True  # a command arrived with the login: the command loop reads it first
    return fast


def _without_info(ok: bytes) -> bytes:
    """An OK packet cut after its warning count (the info text left out)."""
    _, p = lenenc(ok, 5)  # affected rows
    _, p = lenenc(ok, p)  # last insert id
    end = p + 4  # status flags, warnings
    return (end - 4).to_bytes(3, "little") + ok[3:end]


class ClientFastPath(asyncio.BufferedProtocol):
    def __init__(
        self, connection: ProxyConnection, inner: asyncio.StreamReaderProtocol, transport: asyncio.Transport,
        links: LinkPools,
    ) -> None:
        self.connection = connection
        self.session = connection.session
        self.inner = inner
        self.transport = transport
        self.links = links
        # The command loop has the connection: everything the client sends goes to it.
        self.slow = False
        self._buf = bytearray()
        # The statement being answered on the fast path.
        self._link: ShardLink | None = None
        self._statement: RunningStatement | None = None
        self._route: FastRoute | None = None
        self._sql = ""
        # The command being answered, as the client sent it (a write refused at a resharding
        # switch goes to the command loop as if it had never come here).
        self._command = b""
        # A COM_STMT_EXECUTE's answer: the shard's text result re-encoded.
        self._binary: BinaryResult | None = None
        self._started = 0.0
        self._writing_paused = False
        self._read = ReadBuffer()

    # -- from the client ---------------------------------------------------------------
    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read.view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._read.take(nbytes))

    def data_received(self, data: bytes | memoryview) -> None:
        if self.slow:
            self.inner.data_received(bytes(data))
            return
        self._buf += data
        if self._link is None:
            self._serve()

    def _serve(self) -> None:
        """Answer the complete commands buffered, until one goes to the shard or to the loop."""
        buf = self._buf
        while len(buf) >= 4 and self._link is None and not self.slow:
            length = buf[0] | buf[1] << 8 | buf[2] << 16
            if len(buf) < 4 + length:
                return
            if buf[3] == 0 and length and length < _MAX_PAYLOAD:
                command = buf[4]
                started = False
                if command == _COM_QUERY:
                    started = self._start_query(bytes(buf[5 : 4 + length]))
                elif command == _COM_STMT_EXECUTE:
                    started = self._start_execute(bytes(buf[5 : 4 + length]))
                elif command == _COM_STMT_RESET and length == 5 and self._reset_statement(bytes(buf[5:9])):
                    del buf[:9]
                    continue
                if started:
                    self._command = bytes(buf[: 4 + length])
                    del buf[: 4 + length]
                    continue
            self._to_command_loop()

    def _to_command_loop(self) -> None:
        self.slow = True
        data = bytes(self._buf)
        self._buf.clear()
        self.inner.data_received(data)

    def command_done(self) -> None:
        """The command loop finished a command: the fast path takes the connection back
        unless the next command is already waiting in the loop's reader."""
        if self.slow and not buffered_input(self.connection.stream.reader) and not self.transport.is_closing():
            self.slow = False

    def _start_query(self, payload: bytes) -> bool:
        """Send a qualifying statement to its shard; False: the command loop must run it."""
        try:
            sql = payload.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return self._start(sql, None)

    def _start_execute(self, payload: bytes) -> bool:
        """COM_STMT_EXECUTE: its statement text with the parameters bound, as
        ``ProxyConnection.handle_stmt_execute`` makes it, answered in the binary protocol;
        False: the command loop must run it (and reports any error in the packet)."""
        connection = self.connection
        stmt = connection.prepared_stmts.get(int.from_bytes(payload[:4], "little"))
        if not isinstance(stmt, PreparedStatement) or stmt.param_buffers:
            return False  # unknown (the loop's error), or long data read_execute would consume
        if names_items_by_parameters(stmt.sql):
            return False  # its columns are named by the prepared text (? + qty): the loop renames them
        try:
            stmt, params = read_execute(io.BytesIO(payload), connection.prepared_stmts, connection.capabilities)
            sql = bind_parameters(stmt.sql, params)
        except Exception:  # ProxyError, or a malformed packet: the command loop answers it
            return False
        return self._start(sql, BinaryResult())

    def _reset_statement(self, stmt_id: bytes) -> bool:
        """COM_STMT_RESET of a known statement, as ``ProxyConnection.handle_stmt_reset`` answers
        it (its long data dropped, an OK): mysql-connector sends one before every execute."""
        stmt = self.connection.prepared_stmts.get(int.from_bytes(stmt_id, "little"))
        if not isinstance(stmt, PreparedStatement):
            return False  # the command loop's error
        stmt.param_buffers = None
        ok = self.connection.ok()
        if not self.transport.is_closing():
            self.transport.write(len(ok).to_bytes(3, "little") + b"\x01" + ok)
        return True

    def _start(self, sql: str, binary: BinaryResult | None) -> bool:
        try:
            route = fast_route(self.session, sql)
        except Exception:  # a fault of the fast path: logged, and the normal path answers
            logger.exception("fast path: routing failed", extra={"connection_id": self.connection.connection_id})
            return False
        if route is None:
            return False
        links = self.links.get(route.keyspace, route.shard)
        if links is None:
            return False
        link = links.take(route.settings)
        if link is None:
            return False
        statement = self.connection.process.begin_now(sql)
        if statement is None:
            links.give(link)
            return False
        links.served += 1
        self._started = time.perf_counter()
        session = self.session
        session.statement_keyword = route.keyword
        session.route = (route.plan, route.keyspace)
        statement.shard_query_started(link)
        self._link, self._statement, self._route, self._sql = link, statement, route, sql
        self._binary = binary
        link.query(route.query, self)
        return True

    # -- from the shard (ShardLink's Relay) --------------------------------------------------
    def response_part(self, link: ShardLink, data: bytes) -> None:
        if self._binary is not None:
            data = self._binary.convert(data)
        if not self.transport.is_closing():
            self.transport.write(data)

    def response_done(self, link: ShardLink, data: bytes, rows: int, error: ShardErr | None) -> None:
        if (
            error is not None
            and self._route is not None
            and self._route.keyword == "insert"
            and is_denied_write_error((error.code, error.message))
        ):
            # A write refused at a resharding switch wrote nothing: the command goes to the
            # normal path as if it had never come here; there it is held until the new
            # topology serves (proxy/resharding/write_hold.py), never failed.
            self._buf[:0] = self._command
            self.slow = True  # _finish must not serve what is buffered
            self._finish(link, 0, True, record=False)
            self._to_command_loop()
            return
        binary = self._binary
        if error is not None:
            e = self._error(ShardError(link.keyspace, link.shard, error.code, error.message))
            if binary is not None:
                head = binary.convert(data[: error.start])
                data = head + self._error_packet(e, binary.next_seq)
            else:
                data = data[: error.start] + self._error_packet(e, data[error.start + 3])
        else:
            if binary is not None:
                data = binary.convert(data)
            if self._route is not None and self._route.without_info and data[4] == 0:
                data = _without_info(data)
            if self._route is not None and self._route.inserted_table is not None:
                # What Executor._wrote does for an INSERT that names no topic (routing checked), without
                # parsing the statement again for its table (~7 µs): messaging polls that table now.
                self.session.state.messaging.notify(
                    self._route.keyspace, self._route.shard, self._route.inserted_table
                )
            elif self._route is not None and self._route.topic is not None:
                self.session.state.topics.published(*self._route.topic)  # its sequencer runs a pass now
        if not self.transport.is_closing():
            self.transport.write(data)
        self._finish(link, rows, error is not None)

    def link_lost(self, link: ShardLink, cause: str) -> None:
        logger.warning("shard unavailable", extra={"keyspace": link.keyspace, "shard": link.shard, "error": cause})
        e = self._error(ShardUnavailable(link.keyspace, link.shard, cause))
        seq = self._binary.next_seq if self._binary is not None else link.next_seq
        if not self.transport.is_closing():
            self.transport.write(self._error_packet(e, seq))
        self._finish(link, 0, True)

    def _error(self, e: ProxyError) -> ProxyError:
        statement = self._statement
        if statement is not None and statement.killed is not None:
            e = statement.error()  # the shard's "interrupted" is the kill's doing
        record_error(e.code)
        return e

    @staticmethod
    def _error_packet(e: ProxyError, seq: int) -> bytes:
        payload = wire.error_packet(e.code, e.sqlstate, e.message)
        return len(payload).to_bytes(3, "little") + bytes((seq,)) + payload

    def _finish(self, link: ShardLink, rows: int, failed: bool, *, record: bool = True) -> None:
        statement = self._statement
        self._link = self._statement = self._route = None
        links = self.links.get(link.keyspace, link.shard)
        assert links is not None and statement is not None
        statement.shard_query_ended(link)
        links.give(link)
        self.connection.process.end_now(statement)
        if record:
            record_statement(self.session, self._sql, self._started, 0 if failed else rows, failed)
        if self._writing_paused:
            link.resume_reading()
        if self._buf:
            self._serve()

    # -- the transport's other calls: the StreamReaderProtocol keeps hearing them ----------
    def connection_lost(self, exc: Exception | None) -> None:
        link, statement = self._link, self._statement
        if link is not None and statement is not None:
            self._link = self._statement = self._route = None
            statement.shard_query_ended(link)
            link.abandon()  # mid-response: the link is out of step
            links = self.links.get(link.keyspace, link.shard)
            if links is not None:
                links.give(link)
            self.connection.process.end_now(statement)
        self.inner.connection_lost(exc)

    def eof_received(self) -> Any:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self._writing_paused = True
        if self._link is not None:
            self._link.pause_reading()  # a large result waits for a slow client
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._link is not None:
            self._link.resume_reading()
        self.inner.resume_writing()
