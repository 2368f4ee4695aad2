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
the connection back once that loop has finished the command, with whatever the loop's
reader holds unread (``command_done``). So a connection's commands are answered in order,
whichever path runs each.

Explicit transactions too (``BEGIN; INSERT ...; COMMIT``, ``autocommit=0``): BEGIN, COMMIT and
ROLLBACK answered here, the transaction's qualifying statements sent on its own shard
connections (``PinnedLink``), the rest left to the normal path in the same transaction (see
"transactions" below). Measured: BENCHMARKS.md, "Fast path: transactions".

An autocommit write reaching several shards (``FastRoute.several``: an INSERT whose rows are
split per shard, an UPDATE / DELETE by an IN-list on the primary vindex, in ``multi`` mode) runs
in a task, ``proxy.fast_path.several.run_several``: the normal path's implicit transaction, its
COMMITs or its rollback of every shard; the answer is the OK (or error) the normal path writes.

On the fast path a statement still shows in SHOW PROCESSLIST (a ``RunningStatement``
with its shard link on it, so KILL QUERY reaches the shard), is counted in /metrics,
tells messaging and topics about a successful write as ``Executor._wrote`` does (an INSERT
into a message table with the statement its shard ran, so its rows are cached without a poll;
an ack UPDATE with its ids; inside a transaction at its COMMIT), and fails with the normal path's
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
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from mysql_mimic.errors import MysqlError
from mysql_mimic.types import Capabilities

from proxy import wire
from proxy.diagnostics import DIAGNOSTICS_READ, leaves_diagnostics, sets_found_rows
from proxy.engine.result import Result
from proxy.errors import ER_UNKNOWN_ERROR, ProxyError, ShardError, ShardUnavailable, internal_error
from proxy.executor import BEGIN_STATEMENT, COMMIT_STATEMENT, ROLLBACK_STATEMENT
from proxy.fast_path.binary_result import BinaryResult
from proxy.fast_path.routing import FastRoute, fast_route
from proxy.fast_path.several import Summed, message_write, run_several
from proxy.fast_path.shard_link import (
    LinkPools,
    PinnedLink,
    ReadBuffer,
    ShardErr,
    ShardLink,
    lenenc,
)
from proxy.messaging.dml import MessageDml
from proxy.mysql_mimic_internals import buffered_input, take_buffered_input
from proxy.observability.metrics import (
    record_commit,
    record_error,
    record_rollback,
    record_statement,
)
from proxy.pools import ShardConnection
from proxy.prepared import (
    PreparedStatement,
    bind_parameters,
    names_items_by_parameters,
    read_execute,
)
from proxy.resharding.denied_writes import is_denied_write_error
from proxy.running_statement import RunningStatement
from proxy.statement_counts import FAILED_COUNTS, NO_ROWS
from proxy.topics.errors import naming_the_topic
from proxy.topics.service import TopicWrite
from proxy.transaction import ShardTransaction
from proxy.twopc import SINGLE, TWOPC
from sqltext.lexer import first_keyword, reads_tables

if TYPE_CHECKING:
    from proxy.connection import ProxyConnection

T = TypeVar("T")
logger = logging.getLogger(__name__)

_COM_QUERY = 0x03
_COM_PING = 0x0E
_COM_STMT_CLOSE = 0x19
_COM_INIT_DB = 0x02
# Commands after which MariaDB still shows the warnings and error of the statement before.
_LEAVING_DIAGNOSTICS = (_COM_PING, _COM_STMT_CLOSE, _COM_INIT_DB)
_COM_STMT_EXECUTE = 0x17
_COM_STMT_RESET = 0x1A
_MAX_PAYLOAD = 0xFFFFFF
# Capabilities that change what a COM_QUERY or its answer looks like on the wire.
_INCOMPATIBLE = Capabilities.CLIENT_QUERY_ATTRIBUTES | Capabilities.CLIENT_DEPRECATE_EOF
# The status flags of an answer (ProxyConnection.status_flags): in a transaction, autocommit.
_IN_TRANS = 0x0001
_AUTOCOMMIT = 0x0002
# How BEGIN, START TRANSACTION, COMMIT, ROLLBACK start (a cheap test before the patterns).
_CONTROL_HEADS = frozenset(("begin", "start", "commi", "rollb"))
# Characters of a comment, hint, variable or further statement (a multi-statement COM_QUERY
# reaches the fast path whole: "start transaction; insert ..." is no START TRANSACTION):
# such a transaction statement takes the normal path.
_NOT_PLAIN = ("/", "#", "-", "@", ";")

ShardKey = tuple[str, str]



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
    # uvloop's transports are no asyncio.Transport subclasses but have its methods: ask for the
    # one the fast path needs to take the socket over.
    if not isinstance(inner, asyncio.StreamReaderProtocol) or not hasattr(transport, "set_protocol"):
        return None
    fast = ClientFastPath(connection, inner, cast(asyncio.Transport, transport), links)
    transport.set_protocol(fast)
    if buffered_input(connection.stream.reader):
        fast.slow = True  # a command arrived with the login: the command loop reads it first
    return fast


def _status(session: Any) -> int:
    """The status flags the normal path's answer carries (ProxyConnection.status_flags)."""
    return (_AUTOCOMMIT if session.autocommit else 0) | (_IN_TRANS if session.tx is not None else 0)


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
        # -- the session's transaction (see _start_in_transaction) --
        # The links over its shard connections, by shard (stale ones are replaced on use).
        self._pinned: dict[ShardKey, PinnedLink] = {}
        # The transaction connection the statement runs on (None: a link of ``links``).
        self._sc: ShardConnection | None = None
        self._sent_begin = False  # the statement went as ``begin;<statement>``
        self._joined_now = False  # its connection joined the transaction for this statement
        # The statement waits in a task: for the transaction's connection to a new shard, or
        # for the COMMIT / ROLLBACK of several shards.
        self._joining: asyncio.Task[Any] | None = None
        # A COMMIT (``_commit``) or ROLLBACK on its way: the transaction it ends, and the
        # messaging / topic events its commit releases.
        self._ending: ShardTransaction | None = None
        # The own-insert mark the current statement was sent with (b"": none; own_mark.py).
        self._mark = b""
        # The current statement as sent when ``preclaim`` rewrote it ("": as routed, after the mark).
        self._preclaimed = ""
        self._commit = False
        self._events: list[tuple[str, MessageDml | TopicWrite]] = []
        self._ok_packets: dict[int, bytes] = {}  # _answer_ok's, by status flags
        # The link of the last statement when it warned or failed, kept out of its pool: MariaDB
        # keeps a statement's warnings and error (SHOW WARNINGS, SHOW ERRORS, @@warning_count)
        # until the next statement that uses a table, and they are in that link's session.
        # Kept only then (rare), so sessions do not hold links between statements.
        self._diagnosed: ShardLink | None = None
        # The current statement leaves its link's diagnostics to the session (``_diagnosed``).
        self._keep_link = False
        # The command loop runs a command ``_diagnostics_before`` let through as leaving them.
        self._passing_keeper = False
        # In a transaction: its connection the last statement warned or failed on (the
        # transaction's own, read through its ``PinnedLink``), with that transaction.
        self._diagnosed_in: tuple[ShardTransaction, ShardConnection] | None = None
        # The current statement reads them (SHOW WARNINGS...): its link keeps them.
        self._diagnostics_read = False
        # The link a several-shard statement failed on (``_several_failed_on``).
        self._several_failed: ShardLink | None = None

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
        if self._link is None and self._joining is None:
            self._serve()

    def _serve(self) -> None:
        """Answer the complete commands buffered, until one goes to the shard or to the loop."""
        buf = self._buf
        while len(buf) >= 4 and self._link is None and self._joining is None and not self.slow:
            length = buf[0] | buf[1] << 8 | buf[2] << 16
            if len(buf) < 4 + length:
                return
            if buf[3] == 0 and length and length < _MAX_PAYLOAD:
                command = buf[4]
                started = False
                if (self._diagnosed is not None or self._diagnosed_in is not None) and self._diagnostics_before(
                    command, bytes(buf[5 : 4 + length])
                ):
                    started = True
                elif command == _COM_QUERY:
                    started = self._start_query(bytes(buf[5 : 4 + length]))
                elif command == _COM_PING:
                    self.session.counts_before = NO_ROWS  # MariaDB: ROW_COUNT() 0 after its OK
                elif command == _COM_STMT_EXECUTE:
                    started = self._start_execute(bytes(buf[5 : 4 + length]))
                elif command == _COM_STMT_RESET and length == 5 and self._reset_statement(bytes(buf[5:9])):
                    del buf[:9]
                    continue
                if started:
                    self._passing_keeper = False  # answered here: not the command loop's
                    self._command = bytes(buf[: 4 + length])
                    del buf[: 4 + length]
                    continue
            self._to_command_loop()

    def _diagnostics_before(self, command: int, payload: bytes) -> bool:
        """A command after a statement that left warnings or an error on ``_diagnosed``: a read
        of them is sent there (True: sent); a statement that uses a table clears them (MariaDB:
        "the list of messages is reset for each new statement that uses a table"), and the link
        goes back to its pool; one without (``SELECT ROW_COUNT()``, BEGIN, SET, USE, ``SELECT 1
        FROM DUAL``: measured on MariaDB 11; ``sqltext.lexer.reads_tables``), a COM_PING,
        COM_INIT_DB or COM_STMT_CLOSE leaves them."""
        if command in _LEAVING_DIAGNOSTICS:
            self._passing_keeper = True
            return False
        if command == _COM_QUERY:
            try:
                sql = payload.decode("utf-8")
            except UnicodeDecodeError:
                sql = ""
            if DIAGNOSTICS_READ.fullmatch(sql):
                return self._read_diagnostics(sql)
            kw = first_keyword(sql)
            if leaves_diagnostics(kw, sql):
                self._passing_keeper = True
                return False
        self._release_diagnosed()
        return False

    def _read_diagnostics(self, sql: str) -> bool:
        """SHOW WARNINGS (or ERRORS, COUNT(*), @@warning_count) on the link that has them (in
        the transaction they come from: on its connection); False: the normal path reads them."""
        session = self.session
        link: ShardLink
        if self._diagnosed_in is not None:
            tx, sc = self._diagnosed_in
            key = (sc.keyspace, sc.shard)
            if session.tx is not tx or tx.conns.get(key) is not sc:
                return False  # the transaction is over: its connection is no longer the session's
            pinned = self._pinned_link(key, sc)
            statement = self._begin_on(sql, pinned)
            if statement is None:
                return False
            statement.shard_query_started(sc)
            link, self._sc, self._sent_begin, self._joined_now = pinned, sc, False, False
            self._count(sc)
        else:
            own = self._diagnosed
            assert own is not None
            statement = self.connection.process.begin_now(sql)
            if statement is None:
                return False
            self._diagnosed = None
            statement.shard_query_started(own)
            link = own
            links = self.links.get(own.keyspace, own.shard)
            if links is not None:
                links.served += 1
        self._started = time.perf_counter()
        session.statement_keyword, session.route = sql.split(None, 1)[0].lower(), None
        self._link, self._statement, self._route, self._sql, self._binary = link, statement, None, sql, None
        self._diagnostics_read = True  # reading them leaves them
        link.query(sql.encode("utf-8"), self, _status(session))
        return True

    def _release_diagnosed(self) -> None:
        self._diagnosed_in = None
        link, self._diagnosed = self._diagnosed, None
        if link is not None:
            self._give_back(link)

    def _give_back(self, link: ShardLink) -> None:
        links = self.links.get(link.keyspace, link.shard)
        if links is not None:
            links.give(link)
        else:
            link.close()

    def _to_command_loop(self) -> None:
        self.slow = True
        data = bytes(self._buf)
        self._buf.clear()
        self.inner.data_received(data)

    def command_done(self) -> None:
        """The command loop finished a command: the fast path takes the connection back,
        with the commands already waiting in the loop's reader (served here, or handed back
        to the loop in order by ``_serve``)."""
        if not self.slow or self.transport.is_closing():
            return
        if self._passing_keeper:
            self._passing_keeper = False
        elif self._diagnosed is not None or self._diagnosed_in is not None:
            self._release_diagnosed()  # the loop ran a statement: its own diagnostics now
        reader = self.connection.stream.reader
        waiting = take_buffered_input(reader)
        if not waiting and buffered_input(reader):
            return  # not to be taken (a paused reader, an end of file): the loop reads on
        self.slow = False
        if waiting:
            # A client's next command often arrives before the loop's answer has unwound to
            # here (the loop's statement ends in a task, and uvloop sends at the end of the
            # iteration): left to the loop, every such command took the normal path. Measured
            # (a two-shard SELECT then a point select, x200, one client, links warm): 90 of 200
            # point selects on the fast path on uvloop and 200 on asyncio before, 200 on both now.
            self._buf += waiting
            self._serve()

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
        self.session.counts_before = NO_ROWS
        ok = self.connection.ok()
        if not self.transport.is_closing():
            self.transport.write(len(ok).to_bytes(3, "little") + b"\x01" + ok)
        return True

    def _start(self, sql: str, binary: BinaryResult | None) -> bool:
        session = self.session
        if binary is None and sql[:5].lower() in _CONTROL_HEADS:
            control = self._control(sql)
            if control is not None:
                return control
        if session.tx is not None or not session.autocommit:
            return self._start_in_transaction(sql, binary)
        try:
            route = fast_route(session, sql)
        except Exception:  # a fault of the fast path: logged, and the normal path answers
            logger.exception("fast path: routing failed", extra={"connection_id": self.connection.connection_id})
            return False
        if route is None:
            return False
        if route.several is not None:
            return self._start_several(route, sql, binary)
        if route.publish is not None:
            return self._start_publish(route, sql, binary)
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
        mark = self._mark = self._own_mark(route)
        query = mark + route.query if mark else route.query
        table = route.inserted_table
        if table is not None and session.transaction_mode != TWOPC:
            messaging = session.state.messaging
            if messaging.streamed_at(route.keyspace, route.shard, table):
                # Autocommit (checked above): perhaps written already claimed (MessagingService.preclaim).
                text = query.decode("utf-8")
                claimed = messaging.preclaim(route.keyspace, route.shard, table, text)
                if claimed is not text:
                    self._preclaimed = claimed
                    query = claimed.encode("utf-8")
        link.query(query, self)
        return True

    # -- a direct publish ------------------------------------------------------------------------
    def _start_publish(self, route: FastRoute, sql: str, binary: BinaryResult | None) -> bool:
        """A direct publish, in a task through its topic's batcher (``proxy.topics.batch``: alone
        when none of the topic's is in flight, else in the next batch, on a pooled connection of
        the session's settings); answered with its own INSERT's OK after the COMMIT. Measured
        (BENCHMARKS.md, "topicbatch"): sending the first one on the session's link instead (the
        next ones queued behind it) gave 34-44k msg/s for 4 publishers of 100 messages where
        this gives 42-47k, and no less proxy CPU per message (5-6 against 6-9 us)."""
        publish, topic = route.publish, route.topic
        assert publish is not None and topic is not None
        batcher = self.session.state.topics.batcher(topic[0], topic[1], route.shard)
        return self._start_task(
            route, sql, binary, (route.shard,), lambda: batcher.publish(publish, route.settings),
            lambda t: self._published(t, topic),
        )

    def _published(self, task: asyncio.Task[tuple[Result, bool]], topic: tuple[str, str]) -> None:
        """A batched direct publish is committed (or failed): its own INSERT's answer."""
        error = self._task_error(task)
        self.session.diagnostics_clean = error is None and task.result()[0].warnings == 0
        if error is None:
            res, marked = task.result()
            self.session.wrote(topic[0], TopicWrite(*topic, direct=marked))
            ok = wire.ok_packet(self.connection.capabilities, _status(self.session), affected_rows=res.affected_rows,
                                insert_id=res.insert_id, warnings=res.warnings, info=res.info)
            self._ended_with_ok(ok, self._binary.next_seq if self._binary is not None else 1)  # an OK: alike in both protocols
            return
        if self.transport.is_closing():
            self._finish(None, 0, True, record=False)
            return
        if not isinstance(error, ProxyError):
            error = internal_error(error, self.connection.connection_id)
        self._fail(error)

    # -- an autocommit write reaching several shards ------------------------------------------
    def _start_several(self, route: FastRoute, sql: str, binary: BinaryResult | None) -> bool:
        """Run ``route.several`` in a task (``proxy.fast_path.several``); answered when it ends."""
        if binary is not None:
            return False  # COM_STMT_EXECUTE: the normal path
        shards = [shard for shard, _ in route.several or ()]
        session = self.session
        return self._start_task(
            route, sql, None, shards, lambda: run_several(session, route, sql, self.links, self._several_failed_on),
            self._ran_several,
        )

    def _several_failed_on(self, link: ShardLink) -> None:
        """The link the several-shard statement failed on: kept with its error if that is the
        statement's answer (``_ran_several``)."""
        self._several_failed = link

    def _start_task(
        self, route: FastRoute, sql: str, binary: BinaryResult | None, shards: Iterable[str],
        body: Callable[[], Coroutine[Any, Any, T]], done: Callable[[asyncio.Task[T]], None],
    ) -> bool:
        """Run ``body()`` as the statement ``sql`` in a task of its own (``RunningStatement.start``:
        reached by KILL), ``done`` called when it ends; False: the statement could not begin (the
        normal path runs it). ``shards`` are counted with their links' statements."""
        statement = self.connection.process.begin_now(sql)
        if statement is None:
            return False
        self._started = time.perf_counter()
        session = self.session
        session.statement_keyword = route.keyword
        session.route = (route.plan, route.keyspace)
        for shard in shards:
            links = self.links.get(route.keyspace, shard)
            if links is not None:
                links.served += 1
        self._statement, self._route, self._sql, self._binary = statement, route, sql, binary
        task = statement.start(body())
        self._joining = task
        task.add_done_callback(done)
        return True

    def _task_error(self, task: asyncio.Task[Any]) -> BaseException | None:
        """A ``_start_task`` task has ended: its error (None: it succeeded)."""
        self._joining = None
        if task.cancelled():
            return ProxyError(ER_UNKNOWN_ERROR, "internal error: cancelled")
        return task.exception()

    def _ended_with_ok(self, ok: bytes, seq: int) -> None:
        """A ``_start_task`` statement's OK packet (payload ``ok``), and its end."""
        self.session.counts_before = (lenenc(ok, 1)[0], None)
        if not self.transport.is_closing():
            self.transport.write(len(ok).to_bytes(3, "little") + bytes((seq,)) + ok)
        self._finish(None, 0, False)

    def _ran_several(self, task: asyncio.Task[Summed]) -> None:
        """The statement's shards committed (or all rolled back): its answer, as
        ``ProxyConnection`` writes the normal path's."""
        error = self._task_error(task)
        failed, self._several_failed = self._several_failed, None
        if failed is not None:
            if error is not None and not self.transport.is_closing() and not (
                isinstance(error, ShardError) and is_denied_write_error(error)
            ):
                self._release_diagnosed()
                self._diagnosed = failed  # SHOW ERRORS reads the statement's error there
            else:
                self._give_back(failed)
        # The shards' warnings are summed here, not kept where SHOW WARNINGS reads them.
        self.session.diagnostics_clean = error is None and task.result().warnings == 0
        if error is None:
            out = task.result()
            ok = wire.ok_packet(self.connection.capabilities, _status(self.session), affected_rows=out.affected_rows,
                                insert_id=out.insert_id, warnings=out.warnings)
            self._ended_with_ok(ok, 1)
            return
        if self.transport.is_closing():
            self._finish(None, 0, True, record=False)
            return
        if isinstance(error, ShardError) and is_denied_write_error(error):
            # Refused at a resharding switch, every shard rolled back (an ack, per shard: the
            # other shards' parts stand, and run again, idempotent): the normal path runs the
            # command as if it had never come here, and holds it until the new topology serves.
            self._buf[:0] = self._command
            self.slow = True
            self._finish(None, 0, True, record=False)
            self._to_command_loop()
            return
        if isinstance(error, MysqlError):  # as ProxyConnection._as_proxy_error
            error = ProxyError(int(error.code), str(error.msg))
        elif not isinstance(error, ProxyError):
            error = internal_error(error, self.connection.connection_id)
        self._fail(error)

    # -- transactions ------------------------------------------------------------------------
    # A transaction is the normal path's own (``session.tx``, a ShardTransaction): BEGIN here
    # is ``session.begin_transaction`` (its BEGIN deferred to each shard's first statement,
    # as always), a statement runs on the transaction's connection to its shard through a
    # ``PinnedLink`` (a shard new to the transaction joins it through
    # ``ShardTransaction.connection_nowait``, or ``connection`` in a task), COMMIT / ROLLBACK of a
    # transaction on one shard is the one COMMIT / ROLLBACK the normal path would send (of
    # several: ``ShardTransaction.commit`` / ``rollback`` in a task). So whatever this path
    # does not take (a second shard in single mode, twopc, a SAVEPOINT, an unplanned
    # statement) the normal path runs in the very same transaction, and the next statement
    # may come back here.

    def _control(self, sql: str) -> bool | None:
        """BEGIN / START TRANSACTION, COMMIT, ROLLBACK: True if answered here, False if the
        normal path must run it; None: not one of them."""
        if any(c in sql for c in _NOT_PLAIN):
            return None  # a comment, a hint, a variable: the normal path reads those
        text = sql.strip()
        m = BEGIN_STATEMENT.match(text)
        if m is not None:
            return self._begin(sql, m.group("opts") or "")
        if COMMIT_STATEMENT.match(text):
            return self._end(sql, commit=True)
        if ROLLBACK_STATEMENT.match(text):
            return self._end(sql, commit=False)
        return None

    def _begin(self, sql: str, opts: str) -> bool:
        """What ``Executor._begin`` does outside a transaction (the BEGIN goes to each shard
        with the transaction's first statement there)."""
        session = self.session
        if session.tx is not None or session.transaction_mode == TWOPC:
            return False  # an open transaction commits first; twopc: the normal path
        statement = self.connection.process.begin_now(sql)
        if statement is None:
            return False
        started = time.perf_counter()
        self._statement_is(sql, "begin")
        session.begin_transaction(opts)
        self._answer_ok()
        self._end_now(statement, sql, started, False)
        return True

    def _end(self, sql: str, commit: bool) -> bool:
        """COMMIT / ROLLBACK (``ProxySession.commit`` / ``rollback``): of a transaction on one
        shard as ``ShardTransaction._commit_each`` / ``_rollback_quietly`` send it, on several
        by those in a task."""
        session = self.session
        tx = session.tx
        sc = link = None
        several = False
        if tx is not None:
            if tx.mode == TWOPC or tx.aborted or tx.implicit or (tx.touched and not tx.conns):
                return False
            if commit and tx.kept is not None:
                return self._commit_kept(sql, tx)
            if any(key in tx.plain or c.begin_pending for key, c in tx.conns.items()):
                return False  # never the case between statements: the normal path's rules
            several = len(tx.conns) > 1
            if len(tx.conns) == 1:
                ((key, sc),) = tx.conns.items()
                link = self._pinned_link(key, sc)
        statement = self._begin_on(sql, link)
        if statement is None:
            return False
        started = time.perf_counter()
        self._statement_is(sql, "commit" if commit else "rollback")
        events, session.after_commit = session.after_commit, []
        session.tx = None
        self._pinned.clear()
        if tx is not None and not commit:
            record_rollback()
        if several:
            # Several shards: the normal path's own COMMIT / ROLLBACK (one after another, a
            # failure reported naming what did and did not commit), in a task, without the
            # command loop's.
            assert tx is not None
            self._statement, self._sql, self._started, self._binary = statement, sql, started, None
            task = statement.start(tx.commit() if commit else tx.rollback())
            self._joining = task
            shards = len(tx.conns)
            task.add_done_callback(lambda t: self._ended_several(t, tx, shards, commit, events))
            return True
        if sc is None or link is None:  # nothing on a shard
            if tx is not None and commit:
                record_commit(0, tx.mode)
            if commit:
                for keyspace, write in events:
                    session.state.committed(keyspace, write)
            self._answer_ok()
            self._end_now(statement, sql, started, False)
            return True
        assert tx is not None
        statement.shard_query_started(sc)
        self._ending, self._commit, self._events = tx, commit, events if commit else []
        self._link, self._statement, self._sc, self._route, self._binary = link, statement, sc, None, None
        self._sql, self._started = sql, started
        self._count(sc)
        link.query(b"commit" if commit else b"rollback", self, _status(session))
        return True

    def _commit_kept(self, sql: str, tx: ShardTransaction) -> bool:
        """The COMMIT of a transaction that kept topic rows (``proxy.topics.kept``) and did
        nothing else: ``ProxySession.commit`` (the rows' direct publish) in a task, as the
        normal path runs it (handing the COMMIT there: proxy 8 us a message against 6-7,
        BENCHMARKS.md "topiccommit", pairs 1-2 against 3-8)."""
        if tx.touched:
            return False  # never the case (a statement elsewhere flushed them): the normal path
        statement = self._begin_on(sql, None)
        if statement is None:
            return False
        self._statement_is(sql, "commit")
        self._statement, self._sql, self._started, self._binary = statement, sql, time.perf_counter(), None
        task = statement.start(self.session.commit())
        self._joining = task
        task.add_done_callback(self._committed_kept)
        return True

    def _committed_kept(self, task: asyncio.Task[None]) -> None:
        self._joining = None
        error = ProxyError(ER_UNKNOWN_ERROR, "internal error: cancelled") if task.cancelled() else task.exception()
        if error is None:
            self._answer_ok()
            self._finish(None, 0, False)
            return
        if not isinstance(error, ProxyError):
            error = internal_error(error, self.connection.connection_id)
        self._fail(error)

    def _ended(self, link: ShardLink, error: ProxyError | None) -> None:
        """The shard answered the COMMIT / ROLLBACK (``error``: failed, or the link was lost)."""
        tx, sc, events, commit = self._ending, self._sc, self._events, self._commit
        self._ending, self._events = None, []
        assert tx is not None and sc is not None
        if error is not None:
            where = f"{sc.keyspace}/{sc.shard}"
            sc.broken = True  # closed on release: the shard rolls back whatever is left
            if commit:
                error = ProxyError(
                    error.code,
                    f"commit failed on shard {where}: {error.message}; committed: []; rolled back: []",
                    error.sqlstate,
                )
            else:
                logger.warning("rollback failed", extra={"keyspace": sc.keyspace, "shard": sc.shard, "error": str(error)})
        tx.release_all()
        if error is not None and commit:
            self.session.commit_in_doubt(events)
        if error is None:
            if commit:
                record_commit(1, tx.mode)
                state = self.session.state
                for keyspace, write in events:
                    state.committed(keyspace, write)
            self._answer_ok()
        else:
            self._write_error(self._error(error), 1)
        self._finish(link, 0, error is not None)

    def _ended_several(
        self, task: asyncio.Task[None], tx: ShardTransaction, shards: int, commit: bool,
        events: list[tuple[str, MessageDml | TopicWrite]],
    ) -> None:
        """``ShardTransaction.commit`` / ``rollback`` of several shards is over (what
        ``ProxySession.commit`` / ``rollback`` do after it)."""
        self._joining = None
        error = ProxyError(ER_UNKNOWN_ERROR, "internal error: cancelled") if task.cancelled() else task.exception()
        if error is None:
            if commit:
                record_commit(shards, tx.mode)
                state = self.session.state
                for keyspace, write in events:
                    state.committed(keyspace, write)
            self._answer_ok()
            self._finish(None, 0, False)
            return
        if commit:
            self.session.commit_in_doubt(events)
        if not isinstance(error, ProxyError):
            error = internal_error(error, self.connection.connection_id)
        self._fail(error)

    def _begin_on(self, sql: str, link: PinnedLink | None) -> RunningStatement | None:
        """The statement shown as running, on the transaction's own connection when ``link``
        is one; None when it cannot start here (the normal path runs it)."""
        statement = self.connection.process.begin_now(sql)
        if statement is None:
            return None
        if link is not None and not link.attach():
            self.connection.process.end_now(statement)
            return None
        return statement

    def _start_in_transaction(self, sql: str, binary: BinaryResult | None) -> bool:
        """A statement of the session's transaction (or one that opens it: autocommit=0), run
        on the transaction's connection to its shard; False: the normal path must run it."""
        session = self.session
        tx = session.tx
        if tx is None:
            # autocommit=0: Executor.execute opens a transaction, then routes by the write shards.
            state = session.state
            if session.transaction_mode == TWOPC or state.read_vschema is not state.vschema:
                return False
        elif tx.mode == TWOPC or tx.aborted or tx.implicit or tx.in_steps:
            return False
        try:
            route = fast_route(session, sql, in_transaction=True)
        except Exception:  # a fault of the fast path: logged, and the normal path answers
            logger.exception("fast path: routing failed", extra={"connection_id": self.connection.connection_id})
            return False
        if route is None:
            return False
        if tx is None and route.keyword == "select" and not reads_tables(sql):
            return False  # it uses no table: it opens no transaction (Executor.execute answers it)
        if route.topic is not None and binary is None and self._keep(sql):
            return True
        if tx is not None and tx.kept is not None:
            return False  # the normal path flushes the kept topic rows first
        key = (route.keyspace, route.shard)
        sc = tx.conns.get(key) if tx is not None else None
        link = None
        if sc is not None:
            link = self._pinned_link(key, sc)
        elif tx is not None and tx.mode == SINGLE and tx.touched:
            return False  # a second shard: the normal path refuses it (and rolls back)
        statement = self._begin_on(sql, link)
        if statement is None:
            return False
        if tx is None:
            session.begin_transaction()
            tx = session.tx
            assert tx is not None
        tx.writing = route.keyword != "select"
        self._started = time.perf_counter()
        session.statement_keyword = route.keyword
        session.route = (route.plan, route.keyspace)
        self._statement, self._route, self._sql, self._binary = statement, route, sql, binary
        if sc is not None and link is not None:
            if tx.writing:
                tx.written.add(key)
            self._send_pinned(link, sc)
            return True
        # A shard new to the transaction: its connection as the normal path opens it (a pooled
        # one with the session's settings, its BEGIN deferred), at once when one is idle ...
        sc = tx.connection_nowait(*key)
        if sc is not None:
            link = self._pinned_link(key, sc)
            if not link.attach():  # not idle (never seen): the normal path runs the statement on it
                self._statement = self._route = None
                self.connection.process.end_now(statement)
                return False
            self._send_pinned(link, sc, joined_now=True)
            return True
        # ... else in a task (SET TRANSACTION, savepoints, a connection to open or wait for).
        joining = statement.start(tx.connection(*key))
        self._joining = joining
        joining.add_done_callback(lambda task: self._joined(task, tx, key))
        return True

    def _keep(self, sql: str) -> bool:
        """An INSERT into a topic whose rows the transaction keeps to its COMMIT
        (``proxy.topics.kept``): answered here, as ``TopicService.keep`` answers it."""
        session = self.session
        topics = session.state.topics
        if not topics.may_keep(sql):
            return False  # fewer rows than kept (a single-message transaction): nothing more here
        statement = self.connection.process.begin_now(sql)
        if statement is None:
            return False
        started = time.perf_counter()
        routed = topics.fast_publish(session, sql)
        res = topics.keep(session, routed) if routed is not None else None
        if res is None:
            self.connection.process.end_now(statement)
            return False
        self._statement_is(sql, "insert")
        session.counts_before = (res.affected_rows, None)
        ok = wire.ok_packet(self.connection.capabilities, _status(session), res.affected_rows, info=res.info)
        if not self.transport.is_closing():
            self.transport.write(len(ok).to_bytes(3, "little") + b"\x01" + ok)
        self._end_now(statement, sql, started, False)
        return True

    def _joined(self, task: asyncio.Task[ShardConnection], tx: ShardTransaction, key: ShardKey) -> None:
        """The transaction's connection to the statement's shard is open (or failed)."""
        self._joining = None
        session = self.session
        if task.cancelled():
            error: BaseException | None = ProxyError(ER_UNKNOWN_ERROR, "internal error: cancelled")
        else:
            error = task.exception()
        if self.transport.is_closing():
            # The client left: the session's rollback (on close) has the connection, or the
            # transaction is over and it goes back (closed: a BEGIN may be on it).
            if error is None and session.tx is not tx:
                sc = task.result()
                if tx.conns.get(key) is sc:
                    self._leave_transaction(sc, tx)
            self._finish(None, 0, True, record=False)
            return
        if error is not None:
            if tx.aborted and session.tx is tx:  # as Executor._routed: rolled back by the proxy
                session.tx, session.after_commit = None, []
            if not isinstance(error, ProxyError):
                error = internal_error(error, self.connection.connection_id)
            self._fail(error)
            return
        self._run_on_joined(task.result(), key)

    def _run_on_joined(self, sc: ShardConnection, key: ShardKey) -> None:
        """Send the statement on the connection that joined the transaction for it (in a task:
        the command is out of the buffer)."""
        link = self._pinned_link(key, sc)
        if not link.attach():  # not idle (never seen): the normal path runs the statement on it
            self._buf[:0] = self._command
            self.slow = True
            self._finish(None, 0, True, record=False)
            self._to_command_loop()
            return
        self._send_pinned(link, sc, joined_now=True)

    def _send_pinned(self, link: PinnedLink, sc: ShardConnection, joined_now: bool = False) -> None:
        statement, route = self._statement, self._route
        assert statement is not None and route is not None
        try:
            statement.shard_query_started(sc)  # killed while its connection was opened: it fails
        except ProxyError as e:
            link.detach()
            self._fail(e)
            return
        begin = sc.take_deferred_begin()
        self._link, self._sc, self._sent_begin, self._joined_now = link, sc, begin is not None, joined_now
        # No newline after the BEGIN: a syntax error in the statement still says "at line 1".
        mark = self._mark = self._own_mark(route)
        self._preclaimed = ""  # in a transaction: never written claimed
        query = mark + route.query if mark else route.query
        if begin is not None:
            query = begin.encode() + b";" + query
        self._count(sc)
        link.query(query, self, _status(self.session), after_begin=begin is not None)

    def _count(self, sc: ShardConnection) -> None:
        """A statement sent on a transaction's connection: counted with the shard's links'."""
        links = self.links.get(sc.keyspace, sc.shard)
        if links is not None:
            links.served += 1

    def _pinned_link(self, key: ShardKey, sc: ShardConnection) -> PinnedLink:
        link = self._pinned.get(key)
        if link is None or link.sc is not sc:
            link = self._pinned[key] = PinnedLink(sc)
        return link

    def _leave_transaction(self, sc: ShardConnection, tx: ShardTransaction | None = None) -> None:
        """Take ``sc`` out of its transaction and close it (the shard rolls back what it began)."""
        tx = tx if tx is not None else self.session.tx
        key = (sc.keyspace, sc.shard)
        if tx is not None and tx.conns.get(key) is sc:
            del tx.conns[key]
            tx.written.discard(key)
        self._pinned.pop(key, None)
        sc.broken = True
        sc.pool.release(sc)

    def _wrote(self, route: FastRoute, link: ShardLink) -> None:
        """What Executor._wrote does once a write succeeded: messaging and topics hear of it
        now, or at the COMMIT inside a transaction (``ProxySession.wrote``)."""
        if route.topic is not None:
            # A deferred publish (NULL ids, a pass); a direct one is told in _published.
            self.session.wrote(route.topic[0], TopicWrite(*route.topic))
            return
        write = self._message_write(route)
        if write is not None:
            self.session.wrote(route.keyspace, write)

    def _message_write(self, route: FastRoute) -> MessageDml | None:
        """``several.message_write`` of a one-shard write: its INSERT's one statement (the mark
        included), cached by the shard's manager from its values at commit (no poll)."""
        shard = route.shard

        def inserted(table: str) -> MessageDml:
            sent = self._preclaimed or (self._mark + route.query).decode("utf-8")
            return MessageDml("insert", route.keyspace, table, shards=(shard,), statements=((shard, sent),))

        return message_write(self.session, route, self._sql, inserted)

    def _own_mark(self, route: FastRoute) -> bytes:
        """The mark of an own INSERT into a message table (proxy/messaging/own_mark.py; not in
        twopc, whose commit the resolver may finish later), as the normal path's
        ``Executor._own_insert`` sends it."""
        table = route.inserted_table
        if table is None or self.session.transaction_mode == TWOPC:
            return b""
        return self.session.state.messaging.own_mark(route.keyspace, table).encode()

    def _own_insert_in_doubt(self) -> None:
        """The current statement, an own marked INSERT in autocommit, failed or its answer was
        lost: it may have committed rows the binlog watch skips; the table's manager polls
        (in a transaction the shard rolls the statement back, or the whole transaction)."""
        route = self._route
        if self._mark and route is not None and route.inserted_table is not None and self.session.tx is None:
            self.session.state.messaging.in_doubt(route.keyspace, route.inserted_table, (route.shard,))

    def _statement_is(self, sql: str, keyword: str) -> None:
        session = self.session
        session.statement_keyword, session.route, session.written_table = keyword, None, None
        session.only_reads = False
        self._sql = sql

    def _answer_ok(self) -> None:
        """The normal path's answer to BEGIN / COMMIT / ROLLBACK (an empty ``Result``), one of
        four packets by the status flags (built once: the capabilities are a Flag enum, whose
        ``&`` in ``wire.ok_packet`` was ~1% of a transaction's profile)."""
        self.session.counts_before = NO_ROWS
        status = _status(self.session)
        packet = self._ok_packets.get(status)
        if packet is None:
            ok = wire.ok_packet(self.connection.capabilities, status)
            packet = self._ok_packets[status] = len(ok).to_bytes(3, "little") + b"\x01" + ok
        if not self.transport.is_closing():
            self.transport.write(packet)

    def _write_error(self, e: ProxyError, seq: int) -> None:
        if not self.transport.is_closing():
            self.transport.write(self._error_packet(e, seq))

    def _fail(self, e: ProxyError) -> None:
        """The statement fails before reaching its shard."""
        self.session.counts_before = FAILED_COUNTS
        e = self._error(e)
        self._write_error(e, self._binary.next_seq if self._binary is not None else 1)
        self._finish(None, 0, True)

    def _end_now(self, statement: RunningStatement, sql: str, started: float, failed: bool) -> None:
        self.connection.process.end_now(statement)
        record_statement(self.session, sql, started, 0, failed)

    # -- from the shard (ShardLink's Relay) --------------------------------------------------
    def response_part(self, link: ShardLink, data: bytes) -> None:
        if self._binary is not None:
            data = self._binary.convert(data)
        if not self.transport.is_closing():
            self.transport.write(data)

    def response_done(self, link: ShardLink, data: bytes, rows: int, error: ShardErr | None) -> None:
        if self._ending is not None:
            self._ended(link, None if error is None else ShardError(link.keyspace, link.shard, error.code, error.message))
            return
        sc = self._sc
        if sc is not None and self._sent_begin:
            sc.begin_answered(link.began)  # a failed BEGIN: the transaction drops the connection
        if (
            error is not None
            and self._route is not None
            and self._route.keyword != "select"
            and is_denied_write_error((error.code, error.message))
        ):
            # A write refused at a resharding switch wrote nothing: the command goes to the
            # normal path as if it had never come here; there it is held until the new
            # topology serves (proxy/resharding/write_hold.py), never failed. A connection
            # that joined the transaction for it leaves it again (closed: the shard rolls its
            # empty transaction back), as the normal path's ``forget`` does.
            if sc is not None and self._joined_now and link.began:
                self._leave_transaction(sc)
            self._buf[:0] = self._command
            self.slow = True  # _finish must not serve what is buffered
            self._finish(link, 0, True, record=False)
            self._to_command_loop()
            return
        session = self.session
        if self._diagnostics_read or error is not None or link.warnings:
            session.diagnostics_clean = False
            if sc is None:
                self._keep_link = True
            elif session.tx is not None:
                self._diagnosed_in = (session.tx, sc)
        elif not session.diagnostics_clean and self._route is not None and (
            self._route.keyword != "select" or reads_tables(self._sql)
        ):
            # It used a table and left nothing (once clean, the statements after it keep it so
            # without reads_tables' ~1 us: measured with timeit on a 50-character point select).
            session.diagnostics_clean = True
        self._diagnostics_read = False
        binary = self._binary
        # ROW_COUNT() / FOUND_ROWS() of this statement, for the normal path (proxy/statement_counts.py)
        affected = link.affected_rows
        if error is not None:
            self.session.counts_before = FAILED_COUNTS
        else:
            if binary is not None:
                self.session.counts_before = NO_ROWS  # MariaDB: ROW_COUNT() 0 after a COM_STMT_EXECUTE
            elif affected >= 0:
                self.session.counts_before = (affected, None)
            else:
                self.session.counts_before = (-1, rows)
            route = self._route
            if affected < 0 and (route.keyword == "select" if route is not None
                                 else sets_found_rows(self.session.statement_keyword, self._sql)):
                # A SELECT's rows (a SHOW WARNINGS read on its link leaves them, as in MariaDB).
                # This and the diagnostics_clean test above: ~40 ns a statement (timeit).
                self.session.found_rows = rows
        if error is not None:
            self._own_insert_in_doubt()
            e = self._error(ShardError(link.keyspace, link.shard, error.code, error.message))
            if self._route is not None and self._route.topic is not None:
                e = naming_the_topic(e, self._route.topic[1])  # a publish into the topic's log table
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
            route = self._route
            if route is not None and route.keyword != "select":
                self._wrote(route, link)
        if not self.transport.is_closing():
            self.transport.write(data)
        self._finish(link, rows, error is not None)

    def link_lost(self, link: ShardLink, cause: str) -> None:
        logger.warning("shard unavailable", extra={"keyspace": link.keyspace, "shard": link.shard, "error": cause})
        if self._ending is not None:
            self._ended(link, ShardUnavailable(link.keyspace, link.shard, cause))
            return
        if self._sc is not None and self._sent_begin and not link.began:
            self._sc.begin_answered(False)  # its BEGIN's answer never came: the transaction drops it
        self._own_insert_in_doubt()
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

    def _finish(self, link: ShardLink | None, rows: int, failed: bool, *, record: bool = True) -> None:
        statement, sc = self._statement, self._sc
        self._link = self._statement = self._route = self._sc = None
        self._mark = b""
        self._preclaimed = ""
        assert statement is not None
        if sc is not None:  # a transaction's connection: it stays with the transaction
            statement.shard_query_ended(sc)
        elif link is not None:
            links = self.links.get(link.keyspace, link.shard)
            assert links is not None
            statement.shard_query_ended(link)
            if self._keep_link and not link.broken and link.transport is not None:
                self._release_diagnosed()
                self._diagnosed = link
            else:
                links.give(link)
        self._keep_link = self._diagnostics_read = False
        self.connection.process.end_now(statement)
        if record:
            record_statement(self.session, self._sql, self._started, 0 if failed else rows, failed)
        if self._writing_paused and link is not None:
            link.resume_reading()
        if self._buf and not self.transport.is_closing():
            self._serve()

    # -- the transport's other calls: the StreamReaderProtocol keeps hearing them ----------
    def connection_lost(self, exc: Exception | None) -> None:
        self._release_diagnosed()
        link, statement, sc = self._link, self._statement, self._sc
        if self._ending is not None:
            pass  # a COMMIT / ROLLBACK finishes on the shard, its answer goes nowhere (_ended)
        elif link is not None and statement is not None:
            self._own_insert_in_doubt()  # the shard may still commit it
            self._link = self._statement = self._route = self._sc = None
            link.abandon()  # mid-response: the link is out of step
            if sc is not None:
                # The shard rolls back the transaction of the closed connection; the session's
                # rollback (on close) has nothing more to do there.
                statement.shard_query_ended(sc)
                self._leave_transaction(sc)
            else:
                statement.shard_query_ended(link)
                links = self.links.get(link.keyspace, link.shard)
                if links is not None:
                    links.give(link)
            self.connection.process.end_now(statement)
        self.inner.connection_lost(exc)

    async def settle(self) -> None:
        """Before the session closes: a transaction connection still being opened for a
        statement has joined the transaction (the session's rollback sees it) or failed."""
        joining = self._joining
        if joining is not None:
            await asyncio.wait([joining])
            await asyncio.sleep(0)  # its done callback runs first

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
