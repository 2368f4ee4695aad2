"""A client session's state: its target (keyspace, shard), workload, autocommit, settings,
open transaction and the events its transaction commits. It executes no statement:
``proxy.executor`` does, given the session.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from typing import Any, Protocol

from mysql_mimic.session import BaseSession
from mysql_mimic.variables import GlobalVariables, SessionVariables

from proxy.cluster_state import ClusterState, ShardTarget
from proxy.engine.result import Result
from proxy.errors import ER_BAD_DB_ERROR, ProxyError, UnsupportedError
from proxy.messaging.dml import MessageDml
from proxy.observability.metrics import record_commit, record_rollback
from proxy.topics.service import TopicWrite
from proxy.transaction import ShardTransaction
from proxy.twopc import MULTI, TWOPC, manager_for
from proxy.vcursor import SessionVCursor
from vschema.model import VSchema

logger = logging.getLogger(__name__)

SERVER_VERSION = "8.0.31-shardgate"

Outcome = Result | AsyncIterator[Result]


class ClientConnection(Protocol):
    """What the session knows of its connection (the front end's ``ProxyConnection``)."""

    connection_id: int


_TARGET = re.compile(r"^`?(?P<ks>[^`:@/]*)(?:[:/](?P<shard>[^`@]+))?(?:@(?P<tt>\w+))?`?$")


class ProxySession(BaseSession):
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.variables = SessionVariables(GlobalVariables())
        self.variables.set("version", SERVER_VERSION, force=True)
        self.variables.set("version_comment", "shardgate", force=True)
        self.username: str | None = None
        self._database: str | None = None
        self.keyspace: str | None = None
        self.target_shard: str | None = None
        self.tablet_type = "primary"
        self.workload = "oltp"
        self.autocommit = True
        self.tx: ShardTransaction | None = None
        self.next_tx_isolation: str | None = None
        # Vitess's transaction_mode: single | multi | twopc (the cluster file sets the default).
        self.transaction_mode: str = getattr(state.config, "transaction_mode", "multi")
        if self.transaction_mode == TWOPC:
            manager_for(state).start()  # the resolver runs in every process serving twopc sessions
        # Session variables set by the client, as SQL literals, applied to every shard
        # connection this session uses (see ShardConnection.apply_settings).
        self.settings: dict[str, str] = {}
        # SET max_execution_time (ms, 0: none): timed by the proxy (proxy.timeouts), MariaDB
        # does not know the variable.
        self.max_execution_time = 0
        self.user_vars: dict[str, Any] = {}
        # ROW_COUNT() of the command before (and the rows it sent, unused: ``found_rows`` says
        # FOUND_ROWS()), wherever it ran: the normal path writes it into its next statement
        # (proxy/statement_counts.py). None: not known here (a new session's first statement).
        self.counts_before: tuple[int, int | None] | None = None
        # FOUND_ROWS(): the rows the session's last SELECT sent, whichever path answered it (MariaDB:
        # only a SELECT changes it; DML, SET, BEGIN, SHOW, an error leave it). None: not known here
        # (SQL_CALC_FOUND_ROWS: the shard connection's). 0 in a new session, as in MariaDB.
        self.found_rows: int | None = 0
        # The session's diagnostics area (SHOW WARNINGS, SHOW ERRORS, @@warning_count) is known to
        # be empty: its last statement that used a table left no warning nor error (or none ran
        # yet, as in a new MariaDB session). A shard connection the normal path would read them on
        # may hold another statement's (another session's, or one the fast path's links never
        # saw): the proxy answers the empty area itself (proxy/show.py, proxy/system_variables.py).
        # False: they are where the last statement ran (its shard connection, or the fast path's
        # kept link).
        self.diagnostics_clean = True
        # The running statement (the normal path's) uses a table: it replaces the diagnostics.
        self.uses_table = False
        # Messaging events of this transaction's writes, told to the service at commit.
        self.after_commit: list[tuple[str, MessageDml | TopicWrite]] = []
        self.connection: ClientConnection | None = None
        # What the running statement is, for the metrics (proxy.observability.metrics): its
        # first keyword, and where it went (plan variant, keyspace) once that is known.
        self.statement_keyword = ""
        # The running statement only reads (a SELECT, or a VEXPLAIN of one): after a reads-only
        # resharding switch it routes by the read shards (routing_vschema).
        self.only_reads = False
        self.route: tuple[str, str] | None = None
        # The (keyspace, table) a planned INSERT/UPDATE of the running statement writes to, or
        # the topic a routed topic INSERT publishes to (the after-write hooks read it instead of
        # the SQL text); None: neither.
        self.written_table: tuple[str, str] | None = None
        self.vcursor = SessionVCursor(
            self.routing_vschema, state.pools, lambda: self.tx, state.sequences, lambda: self.settings
        )

    # -- mimic's BaseSession interface -------------------------------------------
    @property
    def database(self) -> str | None:  # type: ignore[override]
        return self.keyspace if self.target_shard is None else f"{self.keyspace}:{self.target_shard}"

    @database.setter
    def database(self, value: str | None) -> None:
        # Set by the handshake before authentication; validated in init().
        self._database = value

    def check_initial_database(self) -> ProxyError | None:
        """Validate the database named in the handshake (before login completes)."""
        if not self._database:
            return None
        try:
            self.use_target(self._database)
        except ProxyError as e:
            return e
        return None

    async def init(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.state.observability.session_opened(self)

    async def use(self, database: str) -> None:
        self.use_target(database)

    async def close(self) -> None:
        self.state.observability.session_closed(self)
        if self.tx is not None:
            tx, self.tx = self.tx, None
            try:
                await tx.rollback()
            except ProxyError as e:
                logger.warning("rollback on close failed", extra={"error": str(e)})

    async def reset(self) -> None:
        """COM_RESET_CONNECTION / COM_CHANGE_USER: drop the transaction and session
        state but keep the current database, as MySQL does."""
        await self.close()
        keyspace, shard, username, connection = self.keyspace, self.target_shard, self.username, self.connection
        self.__init__(self.state)  # type: ignore[misc]
        self.keyspace, self.target_shard, self.username, self.connection = keyspace, shard, username, connection
        self.counts_before = (0, None)  # MariaDB: ROW_COUNT() 0 after the reset's OK
        self.state.observability.sessions.add(self)  # close() above let it go; the connection stays

    # -- state ---------------------------------------------------------------------
    def routing_vschema(self) -> VSchema:
        """The vschema the running statement plans and routes by: the read shards' after a
        reads-only resharding switch when it is a SELECT outside a transaction, else the
        write shards'. Every statement of a transaction goes by the write shards, as Vitess
        runs every statement of a transaction on the primary: what a transaction reads
        (``FOR UPDATE`` too) is what it then writes on, never a lagging copy."""
        state = self.state
        if state.read_vschema is state.vschema or not self.only_reads or self.tx is not None:
            return state.vschema
        return state.read_vschema

    @property
    def in_transaction(self) -> bool:
        return self.tx is not None

    @property
    def target(self) -> ShardTarget | None:
        """The shard a ``USE ks:shard`` session targets (every statement goes there verbatim)."""
        if self.keyspace is None or self.target_shard is None:
            return None
        return self.keyspace, self.target_shard

    def use_target(self, target: str) -> None:
        target = target.strip().strip(";").strip()
        m = _TARGET.match(target)
        if not m:
            raise ProxyError(ER_BAD_DB_ERROR, f"VT05003: unknown database '{target}' in vschema")
        ks, shard, tt = m.group("ks"), m.group("shard"), m.group("tt")
        if tt and tt.lower() not in ("primary", "master"):
            raise UnsupportedError(f"tablet type {tt} is not available: this cluster serves primaries only")
        if not ks:
            self.keyspace, self.target_shard = None, None
            return
        if ks not in self.state.vschema.keyspaces:
            raise ProxyError(ER_BAD_DB_ERROR, f"VT05003: unknown database '{ks}' in vschema")
        if shard is not None and shard not in self.state.shard_names(ks):
            raise ProxyError(ER_BAD_DB_ERROR, f"VT05003: unknown database '{target}' in vschema")
        self.keyspace, self.target_shard = ks, shard

    def begin_transaction(self, opts: str = "", implicit: bool = False) -> None:
        begin = "start transaction" + (f" {opts.strip()}" if opts and opts.strip() else "")
        iso, self.next_tx_isolation = self.next_tx_isolation, None
        mode = self.transaction_mode
        if mode == TWOPC and "read only" in begin.lower():
            mode = "multi"  # nothing to make atomic; XA START takes no READ ONLY
        self.tx = ShardTransaction(
            self.state.pools,
            begin_sql=begin,
            settings=lambda: self.settings,
            next_isolation=iso,
            mode=mode,
            twopc=manager_for(self.state) if mode == TWOPC else None,
            implicit=implicit,
        )

    def wrote(self, keyspace: str, write: MessageDml | TopicWrite) -> None:
        """A write to a message table or topic succeeded: its readers hear of it now, or at the
        COMMIT of the transaction it is part of. An INSERT in a client's transaction is polled
        at that COMMIT rather than cached from the values it was sent with (the transaction's
        later statements may change or delete the rows); a statement's own implicit
        transaction commits its rows as sent."""
        if self.tx is None:
            self.state.committed(keyspace, write)
            return
        if isinstance(write, MessageDml) and not self.tx.implicit:
            write = write.polled()
        self.after_commit.append((keyspace, write))

    def commit_in_doubt(self, events: list[tuple[str, MessageDml | TopicWrite]]) -> None:
        """A COMMIT failed: some shards may have committed (multi commits them one after
        another, a lost shard may have): the message-table inserts among ``events`` are polled
        for, as the binlog watch skips the proxy's own (proxy/messaging/own_mark.py)."""
        for keyspace, write in events:
            if isinstance(write, MessageDml) and write.kind == "insert":
                self.state.committed(keyspace, write.polled())

    async def commit(self) -> None:
        if self.tx is not None and self.tx.kept is not None:
            # Topic rows kept to this COMMIT (proxy.topics.kept): published first, so that a
            # failure fails the COMMIT before anything else of the transaction commits.
            await self.state.topics.commit_kept(self)
        tx, self.tx = self.tx, None
        events, self.after_commit = self.after_commit, []
        if tx is not None:
            shards = len(tx.conns)
            try:
                await tx.commit()
            except BaseException:
                self.commit_in_doubt(events)
                raise
            if not (tx.implicit and tx.mode == MULTI):  # one autocommit statement, not a client's transaction
                record_commit(shards, tx.mode)
        for keyspace, dml in events:
            self.state.committed(keyspace, dml)

    async def rollback(self) -> None:
        tx, self.tx = self.tx, None
        self.after_commit = []
        if tx is not None:
            record_rollback()
            await tx.rollback()


__all__ = ["ProxySession", "Outcome", "SERVER_VERSION"]
