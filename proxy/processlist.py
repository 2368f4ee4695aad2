"""The client sessions of the proxy: ``SHOW [FULL] PROCESSLIST`` and ``KILL [CONNECTION |
QUERY] <id>``.

Every client connection registers here when it is accepted (this is mysql-mimic's
``Control``: it hands out the connection id the handshake announces) and leaves when it
closes. Its ``ClientProcess`` tells what the session is doing: the statement running
(``Query``) or since when it has been idle (``Sleep``), its user, client address and
keyspace. The registry is per process; with ``--workers N`` the other workers' sessions
are reached through ``proxy.worker_peers`` (the reasons are in its docstring), and a
connection id carries its worker's index in its high bits.

``KILL QUERY <id>`` stops the session's running statement at the shards and at the
proxy (``proxy.running_statement``); the victim gets 1317 and its session stays usable.
``KILL <id>`` / ``KILL CONNECTION <id>`` also closes the client connection, which
rolls its transaction back; the killer gets OK. An id no session has: 1094.

Permissions are kept simple: every configured user may see and kill every session
(the proxy's users are its operators; MySQL would require PROCESS / CONNECTION_ADMIN
for other users' sessions).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mysql_mimic.constants import KillKind
from mysql_mimic.control import Control, TooManyConnections
from mysql_mimic.types import ColumnType

from proxy.engine.result import Result, local_result
from proxy.errors import ER_NO_SUCH_THREAD, ProxyError, UnsupportedError
from proxy.running_statement import KillReason, RunningStatement
from proxy.timeouts import IdleTransactionTimeout, statement_timeout_s
from proxy.worker_peers import MAX_WORKERS, WORKER_ID_SHIFT, WorkerPeers, WorkerSlot, worker_of

if TYPE_CHECKING:
    from mysql_mimic.connection import Connection

    from proxy.pools import ShardConnection

logger = logging.getLogger(__name__)

FIELDS = ["Id", "User", "Host", "db", "Command", "Time", "State", "Info"]
_TYPES = [ColumnType.LONGLONG, *[ColumnType.VAR_STRING] * 4, ColumnType.LONGLONG, *[ColumnType.VAR_STRING] * 2]
INFO_CHARS = 100  # SHOW PROCESSLIST without FULL shows this much of a statement, as MySQL does
_SEQUENCE_SPAN = 1 << WORKER_ID_SHIFT
_KILL = re.compile(r"^kill\s+(?:(?:hard|soft)\s+)?(?:(?P<kind>connection|query)\s+)?(?P<id>\d+)\s*;?$", re.I)


class ClientProcess:
    """One client connection as the process list shows it."""

    def __init__(self, connection_id: int, connection: Any, host: str, transaction_timeout_s: float) -> None:
        self.id = connection_id
        self.connection = connection  # a proxy.connection.ProxyConnection
        self.host = host
        self.since = time.monotonic()  # start of the current statement, or of the idle time
        self.statement: RunningStatement | None = None
        self.idle_transaction = IdleTransactionTimeout(transaction_timeout_s, connection_id)

    @property
    def session(self) -> Any:
        return self.connection.session

    def row(self) -> list[Any]:
        """Id, User, Host, db, Command, Time, State, Info (the whole statement)."""
        session = self.session
        statement = self.statement
        user = session.username
        if user is None:
            command, state, info = "Connect", "login", None
        elif statement is not None:
            command, state, info = "Query", "killed" if statement.killed else "executing", statement.sql
        else:
            command, state, info = "Sleep", "", None
        return [
            self.id, user or "unauthenticated user", self.host, session.database, command,
            int(time.monotonic() - self.since), state, info,
        ]

    # -- the statement cycle (ProxyConnection.run_and_write) ----------------------------
    async def begin(self, sql: str) -> RunningStatement:
        """The statement ``sql`` starts; raises if it must not run (its transaction was
        rolled back while the session was idle)."""
        await self.idle_transaction.before_statement(sql)
        session = self.session
        statement = RunningStatement(
            sql,
            statement_timeout_s(sql, session.max_execution_time),
            pinned=lambda: _transaction_connections(session),
        )
        self.statement = statement
        self.since = statement.started
        return statement

    async def end(self, statement: RunningStatement) -> None:
        try:
            await statement.finish()
        finally:
            if self.statement is statement:
                self.statement = None
                self.since = time.monotonic()
            self.idle_transaction.arm(self.session)

    # -- the same cycle for the fast path (proxy.fast_path), which has no task to await in
    def begin_now(self, sql: str) -> RunningStatement | None:
        """``begin`` without waiting, for a statement with no timeout; None when the statement
        needs ``begin`` (an idle-transaction timeout to settle or report)."""
        if not self.idle_transaction.quiet and not self.idle_transaction.disarm():
            return None
        session = self.session
        if session.tx is not None or not session.autocommit:  # its transaction's connections: kept on a kill
            statement = RunningStatement(sql, pinned=lambda: _transaction_connections(session))
        else:
            statement = RunningStatement(sql)
        self.statement = statement
        self.since = statement.started
        return statement

    def end_now(self, statement: RunningStatement) -> None:
        statement.finished = True  # no timer: begin_now's statements have no timeout
        if self.statement is statement:
            self.statement = None
            self.since = time.monotonic()
        session = self.session
        if session.tx is not None:
            self.idle_transaction.arm(session)

    # -- kills ----------------------------------------------------------------------
    async def kill(self, query_only: bool) -> None:
        statement = self.statement
        if query_only:
            if statement is not None:
                logger.info("KILL QUERY", extra={"connection_id": self.id, "statement": statement.sql[:200]})
                await statement.kill(KillReason.QUERY)
            return
        logger.info("KILL CONNECTION", extra={"connection_id": self.id})
        if statement is not None:
            await statement.kill(KillReason.CONNECTION)
        # The command loop sees its client gone and ends; closing the session rolls its
        # transaction back.
        self.connection.stream.writer.close()

    async def close(self) -> None:
        await self.idle_transaction.stop()


def _transaction_connections(session: Any) -> Iterable[ShardConnection]:
    tx = session.tx
    return tx.conns.values() if tx is not None else ()


def _peer_host(connection: Any) -> str:
    peer = connection.stream.writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "")


class ProcessList(Control):
    """This process's client sessions (mysql-mimic's ``Control``), and the statements
    that list and kill them across the workers."""

    def __init__(self, slot: WorkerSlot | None = None, transaction_timeout_s: float = 0.0) -> None:
        if slot is not None and not 0 <= slot.index < MAX_WORKERS:
            raise ValueError(f"worker index {slot.index} outside 0..{MAX_WORKERS - 1}")
        self.slot = slot
        self.transaction_timeout_s = transaction_timeout_s
        self._id_prefix = (slot.index if slot is not None else 0) << WORKER_ID_SHIFT
        self._next = 1
        self.processes: dict[int, ClientProcess] = {}
        self.peers = WorkerPeers(slot, self.local_rows, self.kill_local) if slot is not None else None

    async def start(self) -> None:
        if self.peers is not None:
            await self.peers.start()

    async def stop(self) -> None:
        if self.peers is not None:
            await self.peers.stop()

    # -- mimic's Control ------------------------------------------------------------
    async def add(self, connection: Connection) -> int:
        connection_id = self._new_id()
        process = ClientProcess(connection_id, connection, _peer_host(connection), self.transaction_timeout_s)
        self.processes[connection_id] = process
        connection.process = process  # type: ignore[attr-defined]
        return connection_id

    async def remove(self, connection_id: int) -> None:
        process = self.processes.pop(connection_id, None)
        if process is not None:
            await process.close()

    async def kill(self, connection_id: int, kind: KillKind = KillKind.CONNECTION) -> None:
        await self.kill_local(connection_id, kind is KillKind.QUERY)

    def _new_id(self) -> int:
        if len(self.processes) >= _SEQUENCE_SPAN - 1:
            raise TooManyConnections()
        while True:
            seq = self._next
            self._next = seq + 1 if seq + 1 < _SEQUENCE_SPAN else 1  # 0 is no thread id
            connection_id = self._id_prefix | seq
            if connection_id not in self.processes:
                return connection_id

    # -- this process --------------------------------------------------------------
    def local_rows(self) -> list[list[Any]]:
        return [p.row() for p in self.processes.values()]

    async def kill_local(self, connection_id: int, query_only: bool) -> bool:
        process = self.processes.get(connection_id)
        if process is None:
            return False
        await process.kill(query_only)
        return True

    # -- every worker ------------------------------------------------------------------
    async def rows(self) -> list[list[Any]]:
        rows = self.local_rows()
        if self.peers is not None:
            rows += await self.peers.list_others()
        return sorted(rows, key=lambda r: r[0])

    async def kill_anywhere(self, connection_id: int, query_only: bool) -> bool:
        if self.peers is None:
            return await self.kill_local(connection_id, query_only)
        return await self.peers.kill(worker_of(connection_id), connection_id, query_only)

    # -- statements ----------------------------------------------------------------------
    async def show(self, full: bool) -> Result:
        rows = await self.rows()
        if not full:
            for row in rows:
                if isinstance(row[7], str) and len(row[7]) > INFO_CHARS:
                    row[7] = row[7][:INFO_CHARS]
        return local_result(FIELDS, rows, _TYPES)

    async def kill_statement(self, sql: str) -> Result:
        m = _KILL.match(sql.strip())
        if not m:
            raise UnsupportedError("only KILL [CONNECTION | QUERY] <id> is supported")
        connection_id = int(m.group("id"))
        query_only = (m.group("kind") or "").lower() == "query"
        if connection_id >= 1 << 32 or not await self.kill_anywhere(connection_id, query_only):
            raise ProxyError(ER_NO_SUCH_THREAD, f"Unknown thread id: {connection_id}")
        return Result()
