"""A client session: its target (keyspace, shard), workload, autocommit and open
transaction, and the dispatch of one statement to the right handler.

The proxy's own statements (USE, SET, SHOW VITESS_*, VEXPLAIN, STREAM, ...) are
recognised from raw text first: sqlglot parses none of them, and they must not pay
for a parse. Everything else goes to shard-targeted execution or the planner.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mysql_mimic.session import BaseSession
from mysql_mimic.types import ColumnType
from mysql_mimic.variables import GlobalVariables, SessionVariables

from proxy.engine.result import Result, local_result
from proxy.errors import (
    ER_BAD_DB_ERROR,
    ER_CANT_CHANGE_TX_CHARACTERISTICS,
    ER_NOT_SUPPORTED_YET,
    ER_WRONG_VALUE_FOR_VAR,
    ProxyError,
    ShardError,
    UnsupportedError,
)
from proxy.executor import SessionVCursor
from proxy.observability.metrics import record_commit, record_rollback, record_write_hold
from proxy.resharding.write_hold import denied_shard_error, transaction_refused
from proxy.set_statement import literal_value, parse_set
from proxy.sqltext import first_keyword, strip_leading_comments
from proxy.transaction import ShardTransaction
from proxy.twopc import MODES as TRANSACTION_MODES
from proxy.twopc import TWOPC, manager_for

if TYPE_CHECKING:
    from proxy.server import Proxy

logger = logging.getLogger(__name__)

SERVER_VERSION = "8.0.31-shardgate"

Outcome = Result | AsyncIterator[Result]

_TARGET = re.compile(r"^`?(?P<ks>[^`:@/]*)(?:[:/](?P<shard>[^`@]+))?(?:@(?P<tt>\w+))?`?$")
_SYSVAR_SELECT = re.compile(
    r"^select\s+(?P<items>@@[\w.]+(?:\s+(?:as\s+)?`?\w+`?)?(?:\s*,\s*@@[\w.]+(?:\s+(?:as\s+)?`?\w+`?)?)*)\s*;?\s*$",
    re.I,
)
_SYSVAR_ITEM = re.compile(r"(?P<var>@@[\w.]+)(?:\s+(?:as\s+)?`?(?P<alias>\w+)`?)?", re.I)
# Functions whose answer is the proxy's, not the shard's (a shard would name its
# own database and say "MariaDB", which makes ORMs pick the wrong dialect).
# CONNECTION_ID() is the proxy's id for the session (what SHOW PROCESSLIST and KILL name).
_PROXY_FN = re.compile(r"\b(?P<fn>database|schema|version|connection_id)\s*\(\s*\)", re.I)
_BEGIN = re.compile(r"^(?:begin(?:\s+work)?|start\s+transaction(?P<opts>.*))\s*;?$", re.I | re.S)
_COMMIT = re.compile(r"^commit(?:\s+work)?\s*;?$", re.I)
_ROLLBACK = re.compile(r"^rollback(?:\s+work)?\s*;?$", re.I)
_USE = re.compile(r"^use\s+(?P<target>.+?)\s*;?$", re.I | re.S)

_WRITES = {"insert", "replace", "update"}
# Autocommit statements that a twopc session makes atomic across shards (an implicit transaction).
_DML = {"insert", "replace", "update", "delete"}
# Statements that only read: a twopc transaction does not prepare a shard that only these reached.
_READS = {"select", "show", "describe", "desc", "explain"}

# Session variables the proxy answers itself (others are read from a shard).
_LOCAL_VARS = {"version", "version_comment", "autocommit", "workload", "transaction_mode", "max_execution_time"}
# MariaDB 10.x spells these the old way.
_SETTING_ALIASES = {"transaction_isolation": "tx_isolation", "transaction_read_only": "tx_read_only"}


class ProxySession(BaseSession):
    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
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
        self.transaction_mode: str = getattr(proxy.config, "transaction_mode", "multi")
        if self.transaction_mode == TWOPC:
            manager_for(proxy).start()  # the resolver runs in every process serving twopc sessions
        # Session variables set by the client, as SQL literals, applied to every shard
        # connection this session uses (see ShardConnection.apply_settings).
        self.settings: dict[str, str] = {}
        # SET max_execution_time (ms, 0: none): timed by the proxy (proxy.timeouts), MariaDB
        # does not know the variable.
        self.max_execution_time = 0
        self.user_vars: dict[str, Any] = {}
        # Messaging events of this transaction's writes, told to the service at commit.
        self.after_commit: list[Any] = []
        self.connection: Any = None
        # What the running statement is, for the metrics (proxy.observability.metrics): its
        # first keyword, and where it went (plan variant, keyspace) once that is known.
        self.statement_keyword = ""
        self.route: tuple[str, str] | None = None
        self.vcursor = SessionVCursor(
            lambda: self.proxy.vschema, proxy.pools, lambda: self.tx, proxy.sequences, lambda: self.settings
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

    async def init(self, connection: Any) -> None:
        self.connection = connection
        self.proxy.observability.session_opened(self)

    async def use(self, database: str) -> None:
        self.use_target(database)

    async def close(self) -> None:
        self.proxy.observability.session_closed(self)
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
        self.__init__(self.proxy)  # type: ignore[misc]
        self.keyspace, self.target_shard, self.username, self.connection = keyspace, shard, username, connection
        self.proxy.observability.sessions.add(self)  # close() above let it go; the connection stays

    # -- state ---------------------------------------------------------------------
    @property
    def in_transaction(self) -> bool:
        return self.tx is not None

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
        if ks not in self.proxy.vschema.keyspaces:
            raise ProxyError(ER_BAD_DB_ERROR, f"VT05003: unknown database '{ks}' in vschema")
        if shard is not None and shard not in self.proxy.shard_names(ks):
            raise ProxyError(ER_BAD_DB_ERROR, f"VT05003: unknown database '{target}' in vschema")
        self.keyspace, self.target_shard = ks, shard

    def begin_transaction(self, opts: str = "", implicit: bool = False) -> None:
        begin = "start transaction" + (f" {opts.strip()}" if opts and opts.strip() else "")
        iso, self.next_tx_isolation = self.next_tx_isolation, None
        mode = self.transaction_mode
        if mode == TWOPC and "read only" in begin.lower():
            mode = "multi"  # nothing to make atomic; XA START takes no READ ONLY
        self.tx = ShardTransaction(
            self.proxy.pools,
            begin_sql=begin,
            settings=lambda: self.settings,
            next_isolation=iso,
            mode=mode,
            twopc=manager_for(self.proxy) if mode == TWOPC else None,
            implicit=implicit,
        )

    async def commit(self) -> None:
        tx, self.tx = self.tx, None
        events, self.after_commit = self.after_commit, []
        if tx is not None:
            shards = len(tx.conns)
            await tx.commit()
            record_commit(shards, tx.mode)
        for keyspace, dml in events:
            self.proxy.committed(keyspace, dml)

    async def rollback(self) -> None:
        tx, self.tx = self.tx, None
        self.after_commit = []
        if tx is not None:
            record_rollback()
            await tx.rollback()

    # -- dispatch ------------------------------------------------------------------
    async def execute(self, sql: str) -> Outcome:
        """Run one statement; returns a whole Result or a stream of Result chunks."""
        kw = first_keyword(sql)
        self.statement_keyword, self.route = kw, None
        if not kw:
            raise ProxyError(1065, "Query was empty")
        if self.tx is not None:
            if self.tx.aborted:
                self.tx, self.after_commit = None, []  # rolled back by the proxy (single mode)
            else:
                self.tx.writing = kw not in _READS
        handler = _KEYWORD_HANDLERS.get(kw)
        if handler is not None:
            out = await handler(self, strip_leading_comments(sql).strip())
            if out is not None:
                return out
        if not self.autocommit and self.tx is None:
            self.begin_transaction()  # autocommit=0: every statement opens one implicitly
            assert self.tx is not None
            self.tx.writing = kw not in _READS
        elif self.tx is None and kw in _DML and self.transaction_mode == TWOPC:
            return await self._write_holding(sql, kw, lambda: self._atomic_statement(sql, kw))
        if kw in _DML:
            out = await self._write_holding(sql, kw, lambda: self._routed(sql, kw))
        else:
            out = await self._routed(sql, kw)
        if kw in _WRITES:
            self.proxy.wrote(self, sql)
        return out

    async def _routed(self, sql: str, kw: str) -> Outcome:
        try:
            return await self.proxy.route(self, sql, kw)
        except ProxyError:
            if self.tx is not None and self.tx.aborted:
                self.tx, self.after_commit = None, []
            raise

    async def _write_holding(self, sql: str, kw: str, run: Callable[[], Awaitable[Outcome]]) -> Outcome:
        """Run a DML statement; one refused by a source shard at a resharding switch is held
        until the topology changes and run again on the new shards
        (proxy/resharding/write_hold.py says which statements can be, and why)."""
        opened = set(self.tx.conns) if self.tx is not None else set()
        self.vcursor.reached.clear()
        try:
            return await run()
        except ProxyError as e:
            denied = denied_shard_error(e)
            if denied is None:
                raise
            return await self._hold_write(denied, run, opened)

    async def _hold_write(
        self, error: ShardError, run: Callable[[], Awaitable[Outcome]], opened: set[tuple[str, str]]
    ) -> Outcome:
        """The held path of ``_write_holding`` (off the hot path: only at a switch)."""

        async def attempt() -> Outcome:
            opened.clear()
            if self.tx is not None:
                opened.update(self.tx.conns)
            self.vcursor.reached.clear()
            return await run()

        async def may_hold(error: ShardError) -> bool:
            key = (error.keyspace, error.shard)
            others = {k for k in self.vcursor.reached if k[0] == error.keyspace} - {key}
            if self.tx is None:  # autocommit; a twopc statement's implicit transaction rolled back whole
                return self.transaction_mode == TWOPC or not others
            if self.tx.mode != TWOPC and key not in opened and not others:
                await self.tx.forget(*key)  # the transaction never used the shard: it goes on without it
                return True
            try:
                await self.rollback()
            except ProxyError as e:
                logger.warning("rollback of a transaction refused by a resharding switch failed",
                               extra={"error": e.message})
            record_write_hold(error.keyspace, "refused", 0.0)
            raise transaction_refused(error) from error

        return await self.proxy.write_hold.hold(error, attempt, may_hold)

    async def _atomic_statement(self, sql: str, kw: str) -> Outcome:
        """An autocommit DML statement of a twopc session: in an implicit transaction, so
        that shards it reaches together commit atomically (one shard: plain autocommit)."""
        self.begin_transaction(implicit=True)
        try:
            out = await self.proxy.route(self, sql, kw)
            if kw in _WRITES:
                self.proxy.wrote(self, sql)
        except BaseException:
            try:
                await self.rollback()
            except ProxyError as e:
                logger.warning("rollback of a failed statement failed", extra={"error": e.message})
            raise
        await self.commit()
        return out

    # Statement handlers: return None to fall through to normal routing.
    async def _use(self, sql: str) -> Outcome | None:
        m = _USE.match(sql)
        if not m:
            return None
        self.use_target(m.group("target"))
        return Result()

    async def _begin(self, sql: str) -> Outcome | None:
        m = _BEGIN.match(sql)
        if not m:
            return None
        if self.tx is not None:
            await self.commit()  # MySQL commits an open transaction on BEGIN
        self.begin_transaction(m.group("opts") or "")
        return Result()

    async def _commit(self, sql: str) -> Outcome | None:
        if not _COMMIT.match(sql):
            return None
        await self.commit()
        return Result()

    async def _rollback(self, sql: str) -> Outcome | None:
        if not _ROLLBACK.match(sql):
            return None  # ROLLBACK TO SAVEPOINT goes to the shards
        await self.rollback()
        return Result()

    async def _set(self, sql: str) -> Outcome | None:
        try:
            st = parse_set(sql)
        except ValueError as e:
            raise ProxyError(1064, f"syntax error in SET: {e}") from e
        if st.transaction is not None:
            if st.transaction_scope == "global":
                raise UnsupportedError("SET GLOBAL TRANSACTION is not supported through the proxy")
            if st.transaction_scope == "next":
                self.next_tx_isolation = st.transaction
                return Result()
            level = st.transaction.removeprefix("isolation level ").strip()
            if level == st.transaction:  # SET SESSION TRANSACTION READ ONLY / READ WRITE
                await self._set_setting("tx_read_only", "1" if "read only" in level else "0")
            else:
                await self._set_setting("tx_isolation", "'" + level.upper().replace(" ", "-") + "'")
            return Result()
        if st.names is not None:
            return Result()  # shards always talk utf8mb4 to the proxy
        changes: dict[str, str | None] = {}  # session variables for the shards (None: DEFAULT)
        for a in st.assignments:
            change = await self._assign(a.scope, a.name, a.value_sql, a.literal)
            if change is not None:
                changes[change[0]] = change[1]
        if changes:
            await self._set_settings(changes)
        return Result()

    async def _assign(self, scope: str, name: str, value_sql: str, literal: object) -> tuple[str, str | None] | None:
        """Apply a variable the proxy keeps itself; return a shard session variable's
        change (name, SQL literal or None for DEFAULT) for ``_set_settings``."""
        if scope == "user":
            self.user_vars[name] = literal if literal is not ... else value_sql
            return None
        if scope == "global":
            raise UnsupportedError(f"SET GLOBAL {name} is not supported through the proxy")
        if name == "workload":
            v = str(literal).lower() if literal is not ... else ""
            if v not in ("olap", "oltp", "dba"):
                raise ProxyError(ER_WRONG_VALUE_FOR_VAR, f"invalid workload: {value_sql}")
            self.workload = v
            return None
        if name == "transaction_mode":
            self._set_transaction_mode(literal, value_sql)
            return None
        if name == "max_execution_time":
            if isinstance(literal, str) and literal.lower() == "default":
                literal = 0
            if isinstance(literal, bool) or not isinstance(literal, int) or literal < 0:
                raise ProxyError(
                    ER_WRONG_VALUE_FOR_VAR, f"Variable 'max_execution_time' can't be set to the value of '{value_sql.strip()}'"
                )
            self.max_execution_time = literal
            return None
        if name == "autocommit":
            if literal not in (0, 1, "0", "1"):
                raise ProxyError(ER_WRONG_VALUE_FOR_VAR, f"Variable 'autocommit' can't be set to the value of '{value_sql}'")
            on = int(literal) == 1  # type: ignore[arg-type]
            if on and not self.autocommit and self.tx is not None:
                await self.commit()  # MySQL: enabling autocommit commits
            self.autocommit = on
            return None
        if name.startswith(("character_set_", "collation_")) or name in ("names",):
            return None  # shards always talk utf8mb4 to the proxy
        name = _SETTING_ALIASES.get(name, name)
        if isinstance(literal, str) and literal.lower() == "default":
            return name, None
        if literal is ...:
            # An expression (the JDBC driver's concat(@@sql_mode, ...)): evaluated once,
            # on a shard, against this session's settings, so it reads back as a value.
            try:
                return name, await self.proxy.evaluate_setting(self, name, value_sql)
            except ShardError as e:
                raise ProxyError(e.code, e.shard_message) from e
        return name, value_sql

    async def _set_setting(self, name: str, value: str) -> None:
        await self._set_settings({name: value})

    async def _set_settings(self, changes: dict[str, str | None]) -> None:
        """Change shard session variables (None: back to DEFAULT). A shard checks them
        first (the transaction's connections, or one pooled connection), so an unknown
        variable or a bad value answers the shard's error (1193 ``Unknown system
        variable``, 1231, ...) and leaves the session's settings as they were."""
        settings = {k: v for k, v in {**self.settings, **changes}.items() if v is not None}
        try:
            if self.tx is not None and self.tx.conns:
                for sc in self.tx.conns.values():
                    await sc.apply_settings(settings)
            elif settings != self.settings:
                ks = self.keyspace or sorted(self.proxy.vschema.keyspaces)[0]
                shard = self.target_shard or self.proxy.shard_names(ks)[0]
                async with self.proxy.pools.get(ks, shard).connection() as sc:
                    await sc.apply_settings(settings)  # the pool keeps it with these settings
        except ShardError as e:
            raise ProxyError(e.code, e.shard_message) from e  # the session's error, not one shard's
        self.settings = settings

    async def _select(self, sql: str) -> Outcome | None:
        # Cheap substring tests first: this runs for every SELECT.
        m = _SYSVAR_SELECT.match(sql) if "@@" in sql else None
        if not m:
            if "(" in sql and _PROXY_FN.search(sql) and " from " not in sql.lower():
                sql2 = _PROXY_FN.sub(self._proxy_function_literal, sql)
                return await self.proxy.route(self, sql2, "select", any_shard=True)
            return None
        items = [(i.group("var"), i.group("alias")) for i in _SYSVAR_ITEM.finditer(m.group("items"))]
        if self.target_shard is not None and not any(
            var[2:].lower().split(".")[-1] in _LOCAL_VARS for var, _ in items
        ):
            return None  # a targeted session asks its shard
        names = [alias or var for var, alias in items]
        values: list[Any] = []
        keys = [_SETTING_ALIASES.get(n, n) for n in (var[2:].lower().split(".")[-1] for var, _ in items)]
        local = [k in _LOCAL_VARS or k in self.settings for k in keys]
        remote = sorted({f"@@{k}" for k, is_local in zip(keys, local, strict=True) if not is_local})
        remote_vals = await self.proxy.global_variables(remote) if remote else {}
        types = []
        for key, is_local in zip(keys, local, strict=True):
            v = self._local_var(key) if is_local else remote_vals.get(f"@@{key}")
            values.append(v)
            types.append(ColumnType.LONGLONG if isinstance(v, int) else ColumnType.VAR_STRING)
        return local_result(names, [values], types)

    def _proxy_function_literal(self, m: re.Match[str]) -> str:
        fn = m.group("fn").lower()
        if fn == "version":
            value = f"'{SERVER_VERSION}'"
        elif fn == "connection_id":
            value = f"cast({int(getattr(self.connection, 'connection_id', 0))} as unsigned)"
        else:
            # nullif(...): a nullable column, as MySQL's DATABASE() is (NULL with no database).
            value = "NULL" if self.keyspace is None else f"nullif('{self.keyspace}', NULL)"
        # A select item of its own keeps its column name, as MySQL names it: the text typed.
        before = m.string[: m.start()].rstrip().lower()
        after = m.string[m.end() :].lstrip()
        if (before.endswith(("select", ",")) or before == "") and (not after or after[0] in ",;"):
            return f"{value} AS `{m.group(0)}`"
        return value

    def _set_transaction_mode(self, literal: object, value_sql: str) -> None:
        mode = literal.lower() if isinstance(literal, str) else None
        if mode not in TRANSACTION_MODES:
            raise ProxyError(
                ER_WRONG_VALUE_FOR_VAR,
                f"Variable 'transaction_mode' can't be set to the value of '{literal if isinstance(literal, str) else value_sql.strip()}'",
            )
        if self.tx is not None and mode != self.tx.mode:
            if self.tx.touched:
                raise ProxyError(
                    ER_CANT_CHANGE_TX_CHARACTERISTICS,
                    "Transaction characteristics can't be changed while a transaction is in progress",
                )
            self.tx.set_mode(mode, manager_for(self.proxy) if mode == TWOPC else None)
        self.transaction_mode = mode
        if mode == TWOPC:
            manager_for(self.proxy).start()

    def _local_var(self, name: str) -> Any:
        if name == "version":
            return SERVER_VERSION
        if name == "transaction_mode":
            return self.transaction_mode.upper()
        if name == "version_comment":
            return "shardgate"
        if name == "autocommit":
            return 1 if self.autocommit else 0
        if name == "workload":
            return self.workload.upper()
        if name == "max_execution_time":
            return self.max_execution_time
        raw = self.settings.get(_SETTING_ALIASES.get(name, name))
        lit = literal_value(raw) if raw is not None else None
        return raw if lit is ... else lit

    async def _show(self, sql: str) -> Outcome | None:
        from proxy.show import handle_show

        return await handle_show(self, sql)

    async def _proxy_statement(self, sql: str) -> Outcome | None:
        return await self.proxy.proxy_statement(self, sql)

    async def _kill(self, sql: str) -> Outcome | None:
        return await self.proxy.processlist.kill_statement(sql)


_KEYWORD_HANDLERS = {
    "use": ProxySession._use,
    "begin": ProxySession._begin,
    "start": ProxySession._begin,
    "commit": ProxySession._commit,
    "rollback": ProxySession._rollback,
    "set": ProxySession._set,
    "select": ProxySession._select,
    "show": ProxySession._show,
    "vexplain": ProxySession._proxy_statement,
    "alter": ProxySession._proxy_statement,  # ALTER VSCHEMA (other ALTERs fall through)
    "stream": ProxySession._proxy_statement,
    "vstream": ProxySession._proxy_statement,
    "kill": ProxySession._kill,
}

__all__ = ["ProxySession", "Outcome", "SERVER_VERSION", "ER_NOT_SUPPORTED_YET"]
