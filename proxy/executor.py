"""One entry point for a client statement: ``Executor.execute(session, sql)`` (Vitess's
``executor.go``).

The proxy's own statements (USE, SET, BEGIN/COMMIT/ROLLBACK, SHOW, KILL, VEXPLAIN, ALTER
VSCHEMA, CREATE QUEUE, STREAM, VSTREAM) are recognised from raw text first: sqlglot parses
none of them, and they must not pay for a parse. Everything else goes to the session's
target shard verbatim (``USE ks:-80``), to the one shard of an unsharded keyspace, to every
shard of a keyspace (DDL), or through the planner (``proxy.planning``) to the engine. After
a write, the messaging and topic services are told (at commit inside a transaction).

The executor holds no state of its own: the session's is in ``proxy.session``, the
cluster's in ``proxy.cluster_state``. The front end (``proxy.connection``) calls only this.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from proxy import engine
from proxy.cluster_state import ClusterState
from proxy.diagnostics import leaves_diagnostics
from proxy.engine.result import Result, decode_value
from proxy.engine.statement_steps import reaches_shards_at_once
from proxy.errors import (
    ER_ACCESS_DENIED,
    ER_BAD_DB_ERROR,
    ER_EMPTY_QUERY,
    ER_NO_DB_ERROR,
    ER_NO_SUCH_TABLE,
    ER_NOT_SUPPORTED_YET,
    ER_SP_DOES_NOT_EXIST,
    ER_TOO_MANY_ROWS,
    ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
    ProxyError,
    ShardError,
    UnsupportedError,
)
from proxy.messaging.dml import MessageDml, acked_ids, message_dml
from proxy.messaging.queue_ddl import is_create_queue, translate_create_queue
from proxy.observability.metrics import plan_label, record_write_hold
from proxy.planning import Catalog, plan_statement
from proxy.reshard_statement import CHANGING_VERBS, parse_reshard, run_reshard
from proxy.resharding.write_hold import denied_shard_error, transaction_refused
from proxy.session import Outcome, ProxySession
from proxy.show import handle_show
from proxy.statement_counts import with_statement_counts
from proxy.system_variables import (
    literal_mode_refusal,
    select_variables,
    set_statement,
    with_proxy_functions,
)
from proxy.topics.service import PlanWithTopics
from proxy.topics.statement import is_topic_ddl
from proxy.twopc import MULTI, TWOPC
from proxy.user_variables import split_into_variables, with_user_variables
from proxy.vschema_statements import alter_vschema
from proxy.vstream_statement import vstream
from rewriter.dialect import EMULATED_VERSION
from rewriter.nodes import Insert, InsertSelect, Update
from sqltext.lexer import (
    executable_comment_statement,
    first_keyword,
    masked_code,
    strip_leading_comments,
)
from sqltext.quoting import sql_literal
from vschema.ddl import is_vschema_ddl

logger = logging.getLogger(__name__)

# Statement kinds whose result is read as a stream (rows flow as the shard sends them).
_STREAMED = {"select", "with", "show", "explain", "describe", "desc", "table", "values", "("}
_DDL = {"create", "drop", "alter", "truncate", "rename"}
_WRITES = {"insert", "replace", "update"}
# Autocommit statements that a twopc or multi session runs in an implicit transaction when they
# reach several shards (atomic in twopc; in multi, Vitess's rule: all statements or none).
_DML = {"insert", "replace", "update", "delete"}
_IMPLICIT_MODES = (MULTI, TWOPC)
# Statements that only read: a twopc transaction does not prepare a shard that only these reached.
_READS = {"select", "show", "describe", "desc", "explain"}

_VEXPLAIN = re.compile(r"^vexplain(?:\s+(?:all|queries|plan)\b)?", re.I)
BEGIN_STATEMENT = re.compile(r"^(?:begin(?:\s+work)?|start\s+transaction(?P<opts>.*))\s*;?$", re.I | re.S)
_FROM_WORD = re.compile(r"\b(?:from|select)\b", re.I)
_DESCRIBE_COLUMN = re.compile(
    r"^(?:describe|desc|explain)\s+(?!(?:select|with|insert|update|delete|replace|table|values|format|extended|"
    r"partitions|analyze|for)\b)(?P<table>(?:`(?:[^`]|``)+`|[\w$]+)(?:\.(?:`(?:[^`]|``)+`|[\w$]+))?)\s+"
    r"(?P<wild>`(?:[^`]|``)+`|'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|[\w$%]+)\s*;?\s*$", re.I | re.S)
_DESCRIBE_TABLE = re.compile(
    r"^(?:describe|desc|explain)\s+(?!(?:select|with|insert|update|delete|replace|table|values|format|extended|"
    r"partitions|analyze|for)\b)(?P<table>(?:`(?:[^`]|``)+`|[\w$]+)(?:\.(?:`(?:[^`]|``)+`|[\w$]+))?)\s*;?\s*$",
    re.I | re.S)
_EXPLAIN_STATEMENT = re.compile(
    r"^(?:explain|describe|desc)\s+(?:extended\s+|partitions\s+|format\s*=\s*\w+\s+)?"
    r"(?:select|with|insert|update|delete|replace|\()", re.I)
COMMIT_STATEMENT = re.compile(r"^commit(?:\s+work)?\s*;?$", re.I)
ROLLBACK_STATEMENT = re.compile(r"^rollback(?:\s+work)?\s*;?$", re.I)
_SAVEPOINT_NAME = r"(?:`(?P<quoted>(?:[^`]|``)+)`|(?P<name>[\w$]+))\s*;?$"
_ROLLBACK_TO = re.compile(r"^rollback(?:\s+work)?\s+to\s+(?:savepoint\s+)?" + _SAVEPOINT_NAME, re.I)
_SAVEPOINT = re.compile(r"^savepoint\s+" + _SAVEPOINT_NAME, re.I)
_RELEASE = re.compile(r"^release\s+savepoint\s+" + _SAVEPOINT_NAME, re.I)
_SAVEPOINT_VERBS = ((_SAVEPOINT, "savepoint"), (_ROLLBACK_TO, "rollback_to"), (_RELEASE, "release"))
_USE = re.compile(r"^use\s+(?P<target>.+?)\s*;?$", re.I | re.S)
# The first table name a DDL statement acts on, with its keyspace qualifier if any.
_DDL_TARGET = re.compile(
    r"\b(?:table|view|on|into)\s+(?:if\s+(?:not\s+)?exists\s+)?(?P<qual>`?(?P<ks>[\w-]+)`?\.)(?=`?\w)",
    re.I,
)

# A handler of the proxy's own statements; None: not such a statement after all, route it.
Handler = Callable[["Executor", ProxySession, str], Awaitable[Outcome | None]]


def vschema_ddl_authorized(users: frozenset[str] | None, username: str | None) -> bool:
    """Vitess's ``--vschema_ddl_authorized_users``: None allows every user ('%'), else
    only the users named."""
    return users is None or (username is not None and username in users)


class Executor:
    """Runs client statements against the cluster; one per proxy process."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    async def execute(self, session: ProxySession, sql: str) -> Outcome:
        """Run one statement; returns a whole Result or a stream of Result chunks."""
        if "/*!" in sql:  # cheap test first
            sql = executable_comment_statement(sql, EMULATED_VERSION)
        kw = first_keyword(sql)
        if kw in ("select", "with", "(") and "@" in sql:
            into = split_into_variables(sql)
            if into is not None:
                return await self._select_into(session, *into)
        if kw != "set":  # SET evaluates its own values (proxy.system_variables)
            sql = with_user_variables(sql, session.user_vars)
        counts = session.counts_before
        if counts is not None:  # the statement before's, wherever it ran
            session.counts_before = None
            sql = with_statement_counts(sql, counts[0], session.found_rows)
        session.uses_table = uses_table = not leaves_diagnostics(kw, sql)
        if uses_table:  # (ProxyConnection says when its answer leaves none)
            session.diagnostics_clean = False  # its warnings and error are on its shard connection
        session.statement_keyword, session.route, session.written_table = kw, None, None
        session.only_reads = kw == "select"
        if not kw:
            raise ProxyError(ER_EMPTY_QUERY, "Query was empty")
        if session.tx is not None:
            if session.tx.aborted:
                session.tx, session.after_commit = None, []  # rolled back by the proxy (single mode)
            else:
                session.tx.writing = kw not in _READS
                if session.tx.kept is not None:  # topic rows kept to the COMMIT (proxy.topics.kept)
                    await self.state.topics.before_statement(session, sql, kw)
        handler = _HANDLERS.get(kw)
        if handler is not None:
            out = await handler(self, session, strip_leading_comments(sql).strip())
            if out is not None:
                return out
        if not session.autocommit and session.tx is None and uses_table:
            # autocommit=0: every statement that uses a table opens one implicitly (MariaDB: SELECT 1,
            # SELECT @v, SELECT ROW_COUNT() leave @@in_transaction 0)
            session.begin_transaction()
            assert session.tx is not None
            session.tx.writing = kw not in _READS
        elif session.tx is None and kw in _DML and session.transaction_mode in _IMPLICIT_MODES:
            if kw == "update" and session.transaction_mode == MULTI and self._acks_message_table(session, sql):
                # Held and run again at a resharding switch as an atomic one: an ack is idempotent.
                return await self._write_holding(session, lambda: self._ack_per_shard(session, sql, kw), atomic=True)
            return await self._write_holding(session, lambda: self._atomic_statement(session, sql, kw), atomic=True)
        if kw in _DML:
            out = await self._write_holding(session, lambda: self._routed(session, sql, kw))
        else:
            out = await self._routed(session, sql, kw)
        if kw in _WRITES:
            self._wrote(session, sql)
        return out

    async def _select_into(self, session: ProxySession, sql: str, names: list[str]) -> Outcome:
        """``SELECT ... INTO @a, @b``: the SELECT runs as any other, its one row goes into
        the session's user variables (MySQL: more rows 1172, no row leaves them as they
        were, with warning 1329)."""
        out = await self.execute(session, sql)
        chunks = [out] if isinstance(out, Result) else [c async for c in out]
        fields = chunks[0].fields if chunks else []
        rows = [r for c in chunks for r in c.rows]
        if len(fields) != len(names):
            raise ProxyError(ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
                             "The used SELECT statements have a different number of columns")
        if len(rows) > 1:
            raise ProxyError(ER_TOO_MANY_ROWS, "Result consisted of more than one row")
        if not rows:
            return Result(warnings=1)
        for name, f, raw in zip(names, fields, rows[0], strict=True):
            session.user_vars[name] = decode_value(f, raw)
        return Result()

    async def _routed(self, session: ProxySession, sql: str, kw: str) -> Outcome:
        try:
            return await self._route(session, sql, kw)
        except ProxyError:
            if session.tx is not None and session.tx.aborted:
                session.tx, session.after_commit = None, []
            raise

    async def _write_holding(
        self, session: ProxySession, run: Callable[[], Awaitable[Outcome]], atomic: bool = False
    ) -> Outcome:
        """Run a DML statement; one refused by a source shard at a resharding switch is held
        until the topology changes and run again on the new shards
        (proxy/resharding/write_hold.py says which statements can be, and why). ``atomic``: an
        autocommit statement run in an implicit transaction (rolled back whole when it fails)."""
        opened = set(session.tx.conns) if session.tx is not None else set()
        session.vcursor.reached.clear()
        try:
            return await run()
        except ProxyError as e:
            denied = denied_shard_error(e)
            if denied is None:
                raise
            return await self._hold_write(session, denied, run, opened, atomic)

    async def _hold_write(
        self,
        session: ProxySession,
        error: ShardError,
        run: Callable[[], Awaitable[Outcome]],
        opened: set[tuple[str, str]],
        atomic: bool,
    ) -> Outcome:
        """The held path of ``_write_holding`` (off the hot path: only at a switch)."""

        async def attempt() -> Outcome:
            opened.clear()
            if session.tx is not None:
                opened.update(session.tx.conns)
            session.vcursor.reached.clear()
            return await run()

        async def may_hold(error: ShardError) -> bool:
            key = (error.keyspace, error.shard)
            others = {k for k in session.vcursor.reached if k[0] == error.keyspace} - {key}
            if session.tx is None:  # autocommit; an implicit transaction was rolled back whole
                return atomic or not others
            if session.tx.mode != TWOPC and key not in opened and not others:
                await session.tx.forget(*key)  # the transaction never used the shard: it goes on without it
                return True
            try:
                await session.rollback()
            except ProxyError as e:
                logger.warning("rollback of a transaction refused by a resharding switch failed",
                               extra={"error": e.message})
            record_write_hold(error.keyspace, "refused", 0.0)
            raise transaction_refused(error) from error

        return await self.state.write_hold.hold(error, attempt, may_hold)

    async def _atomic_statement(self, session: ProxySession, sql: str, kw: str) -> Outcome:
        """An autocommit DML statement of a twopc or multi session: in an implicit
        transaction (one shard: plain autocommit, at no extra round trip). In twopc, shards it
        reaches together commit atomically; in multi they commit one after another, as Vitess
        runs a multi-shard autocommit DML: a shard that refuses the statement (a duplicate key,
        a write denied at a resharding switch) rolls it back on every shard, so it is applied
        whole or not at all, and a denied one can be held and run again without applying any
        part twice (proxy/resharding/write_hold.py)."""
        session.begin_transaction(implicit=True)
        try:
            out = await self._route(session, sql, kw)
            if kw in _WRITES:
                self._wrote(session, sql)
        except BaseException:
            try:
                await session.rollback()
            except ProxyError as e:
                logger.warning("rollback of a failed statement failed", extra={"error": e.message})
            raise
        await session.commit()
        return out

    def _acks_message_table(self, session: ProxySession, sql: str) -> bool:
        """Whether ``sql`` is an ack (``UPDATE t SET time_acked = ... WHERE id IN (...)``) of a
        message table."""
        ack = acked_ids(sql)
        if ack is None:
            return False
        keyspace = ack.keyspace or session.keyspace
        return keyspace is not None and self.state.messaging.is_message_table(keyspace, ack.table)

    async def _ack_per_shard(self, session: ProxySession, sql: str, kw: str) -> Outcome:
        """An autocommit ack of a multi session: one autocommit UPDATE per shard, as Vitess's
        MessageAck (per shard, not atomic across shards), rather than an implicit transaction
        (BEGIN + UPDATE, then COMMIT, on each shard: 4 round trips for an ack of two shards'
        messages, 2 here). A shard's error is the answer; the other shards' acks stand (acks are
        idempotent; a message left unacked is sent again after its ack wait). The fast path runs
        it alike (``proxy.fast_path.several``)."""
        out = await self._routed(session, sql, kw)
        self._wrote(session, sql)
        return out

    # -- routing ---------------------------------------------------------------------
    async def _route(self, session: ProxySession, sql: str, kw: str, any_shard: bool = False) -> Outcome:
        state = self.state
        if kw in _DDL and is_topic_ddl(sql):
            self._check_vschema_ddl(session)  # topic DDL changes what every proxy serves, as vschema DDL
        topic_out = None if any_shard else await state.topics.route(session, sql, kw)
        if isinstance(topic_out, PlanWithTopics):
            return await self._planned(session, sql, kw, topic_out.catalog)
        if topic_out is not None:
            session.route = ("Topic", session.keyspace or "")
            return topic_out
        target = session.target
        if target is not None or any_shard:
            ks, shard = state.default_shard(session.keyspace, target)
            session.route = ("Targeted" if target is not None else "AnyShard", ks)
            out = await self._send(session, ks, shard, sql, stream=kw in _STREAMED)
            if kw in _DDL:
                state.ddl_seen(ks)  # DDL on one shard: the tracker reads the keyspace again
            return out
        try:
            return await self._planned_or_direct(session, sql, kw)
        except ProxyError as e:
            if e.code != ER_NO_SUCH_TABLE:
                raise
            retried = await state.topics.after_unknown_table(session, sql, kw)  # a topic made elsewhere?
            if retried is None:
                raise
            if isinstance(retried, PlanWithTopics):
                return await self._planned(session, sql, kw, retried.catalog)
            return retried

    @staticmethod
    async def _send(session: ProxySession, keyspace: str, shard: str, sql: str, stream: bool) -> Outcome:
        """Send a statement verbatim to one shard."""
        if stream:
            return session.vcursor.stream_shard(keyspace, shard, sql)
        return await session.vcursor.execute_shard(keyspace, shard, sql)

    async def _planned_or_direct(self, session: ProxySession, sql: str, kw: str) -> Outcome:
        if kw in _DDL:
            return await self._ddl(session, sql)
        ks = session.keyspace
        if ks is not None and not self.state.is_sharded(ks):
            # An unsharded keyspace holds every table it names: the statement goes
            # as written, and the shard's own errors (1146, ...) reach the client.
            session.route = ("Unsharded", ks)
            return await self._send(session, *self.state.default_shard(ks), sql, stream=kw in _STREAMED)
        return await self._planned(session, sql, kw)

    async def _planned(self, session: ProxySession, sql: str, kw: str, catalog: Catalog | None = None) -> Outcome:
        refusal = literal_mode_refusal(session, sql)
        if refusal is not None:
            raise refusal
        if catalog is None and session.only_reads:
            catalog = (session.routing_vschema(), self.state.schema)  # reads by the read shards
        plan, bindvars = plan_statement(self.state, session.database, sql, catalog)
        if session.tx is not None and session.tx.implicit and not reaches_shards_at_once(plan):
            session.tx.in_steps = True  # atomic only if its first step does not commit alone
        session.route = (plan_label(plan), getattr(plan, "keyspace", None) or session.keyspace or "")
        if isinstance(plan, Insert | InsertSelect | Update):
            session.written_table = (plan.keyspace, plan.table)
        if kw in _STREAMED:
            return engine.stream(plan, session.vcursor, bindvars)
        if isinstance(plan, Insert) and session.transaction_mode != TWOPC:
            mark = self.state.messaging.own_mark(plan.keyspace, plan.table)
            if mark or self.state.messaging.is_message_table(plan.keyspace, plan.table):
                return await self._own_insert(session, plan, bindvars, mark)
        return await engine.execute(plan, session.vcursor, bindvars)

    async def _own_insert(self, session: ProxySession, plan: Insert, bindvars: dict[str, Any], mark: str) -> Outcome:
        """An INSERT into a message table, its shard statements marked as this process's own
        (proxy/messaging/own_mark.py: the binlog watch skips their rows; messaging hears of
        them through ``_wrote``). One that fails may still have committed rows (a lost
        shard): autocommit or in a statement's implicit transaction (whose lone shard runs in
        plain autocommit, ``ShardTransaction.connection``), the table's managers poll now; in a
        client's transaction, at its COMMIT."""
        vcursor = session.vcursor
        vcursor.mark = (plan.keyspace, mark) if mark else None
        tx = session.tx
        if session.autocommit and (tx is None or tx.implicit):
            # The proxy commits it alone: each shard's rows perhaps written already claimed for
            # that shard's manager (MessagingService.preclaim).
            messaging, table = self.state.messaging, plan.table
            vcursor.preclaim = (plan.keyspace, lambda shard, sql: messaging.preclaim(plan.keyspace, shard, table, sql))
        try:
            return await engine.execute(plan, vcursor, bindvars)
        except BaseException:
            shards = tuple(sorted(s for k, s in vcursor.reached if k == plan.keyspace))
            tx = session.tx
            if tx is None or tx.implicit:
                self.state.messaging.in_doubt(plan.keyspace, plan.table, shards)
            elif not tx.implicit:
                session.after_commit.append((plan.keyspace, MessageDml("insert", plan.keyspace, plan.table, shards)))
            raise
        finally:
            vcursor.mark = vcursor.preclaim = None

    async def _ddl(self, session: ProxySession, sql: str) -> Result:
        """DDL goes to every shard of its keyspace, as Vitess's direct DDL does.

        DDL commits implicitly in MySQL, so an open transaction is committed first."""
        if is_create_queue(sql):
            return await self._create_queue(session, sql)
        m = _DDL_TARGET.search(sql)
        keyspace = m.group("ks") if m and m.group("ks") in self.state.vschema.keyspaces else session.keyspace
        if keyspace is None:
            raise ProxyError(ER_NO_DB_ERROR, "No database selected")
        session.route = ("DDL", keyspace)
        if m and m.group("ks") == keyspace:
            # Shards name their database themselves; drop the keyspace qualifier.
            sql = sql[: m.start("qual")] + sql[m.end("qual") :]
        if session.in_transaction:
            await session.commit()
        shards = self.state.shard_names(keyspace)
        results = await session.vcursor.execute_multi(keyspace, [(shard, sql) for shard in shards])
        await self.state.schema_changed(keyspace, sql)
        return Result(affected_rows=results[0].affected_rows if results else 0)

    async def _create_queue(self, session: ProxySession, sql: str) -> Result:
        """``CREATE QUEUE`` (beyond Vitess): the message table on every shard, and in a
        sharded keyspace its vschema entry (hash vindex on id), in the cluster's vschema store
        (every proxy process follows it)."""
        self._check_vschema_ddl(session)
        state = self.state
        head = translate_create_queue(sql, sharded=False)
        keyspace = head.keyspace or session.keyspace
        if keyspace is None:
            raise ProxyError(ER_NO_DB_ERROR, "No database selected")
        if keyspace not in state.vschema.keyspaces:
            raise ProxyError(ER_BAD_DB_ERROR, f"VT05003: unknown database '{keyspace}' in vschema")
        queue = translate_create_queue(sql, sharded=state.is_sharded(keyspace))
        if session.in_transaction:
            await session.commit()
        shards = state.shard_names(keyspace)
        await session.vcursor.execute_multi(keyspace, [(shard, queue.create_table) for shard in shards])
        if queue.vschema_table is not None:
            await state.live_vschema.add_table(keyspace, queue.name, queue.vschema_table, queue.vindexes, sql)
        else:  # no vschema entry, but the other proxies must still load the new message table
            await state.live_vschema.announce(keyspace, sql)
        await state.schema_changed(keyspace, queue.create_table)
        return Result()

    def _check_vschema_ddl(self, session: ProxySession) -> None:
        if not vschema_ddl_authorized(self.state.config.vschema_ddl_authorized_users, session.username):
            raise ProxyError(
                ER_ACCESS_DENIED, f"User '{session.username or ''}' is not authorized to perform vschema operations"
            )

    # -- after a write ---------------------------------------------------------------
    def _wrote(self, session: ProxySession, sql: str) -> None:
        """A DML statement succeeded: tell messaging and topics now, or at commit inside a
        transaction."""
        topic = self.state.topics.written(session.written_table)
        if topic is not None:
            session.wrote(topic.keyspace, topic)
        dml = self._message_write(session, sql)
        if dml is None:
            return
        ks = dml.keyspace or session.keyspace
        if ks is None:
            return
        if dml.kind == "insert":
            # Only the shards the rows went to poll (the write hold cleared ``reached`` when
            # this statement started); none recorded: every shard.
            dml = dml.sent_to(ks, session.vcursor.reached, session.vcursor.last_sent)
        session.wrote(ks, dml)

    def _message_write(self, session: ProxySession, sql: str) -> MessageDml | None:
        """The message-table write of a DML statement: its table from its plan; only an
        ack's ids (UPDATE ... WHERE id IN (...)) and statements sent unplanned (unsharded
        keyspace, targeted session) are read from the text."""
        if session.written_table is None:
            return message_dml(sql)
        keyspace, table = session.written_table
        if not self.state.messaging.is_message_table(keyspace, table):
            return None
        if session.statement_keyword == "update":
            ack = acked_ids(sql)
            return None if ack is None else MessageDml("ack", keyspace, table, ack.ids)
        return MessageDml("insert", keyspace, table)

    # -- the proxy's own statements ------------------------------------------------------
    async def _use(self, session: ProxySession, sql: str) -> Outcome | None:
        m = _USE.match(sql)
        if not m:
            return None
        session.use_target(m.group("target"))
        return Result()

    async def _begin(self, session: ProxySession, sql: str) -> Outcome | None:
        m = BEGIN_STATEMENT.match(sql)
        if not m:
            return None
        if session.tx is not None:
            await session.commit()  # MySQL commits an open transaction on BEGIN
        session.begin_transaction(m.group("opts") or "")
        return Result()

    async def _commit(self, session: ProxySession, sql: str) -> Outcome | None:
        if not COMMIT_STATEMENT.match(sql):
            return None
        await session.commit()
        return Result()

    async def _rollback(self, session: ProxySession, sql: str) -> Outcome | None:
        if not ROLLBACK_STATEMENT.match(sql):
            return await self._savepoints(session, sql)
        await session.rollback()
        return Result()

    async def _savepoints(self, session: ProxySession, sql: str) -> Outcome | None:
        """SAVEPOINT / ROLLBACK TO / RELEASE SAVEPOINT on every shard of the transaction
        (``proxy.transaction``). Outside one (autocommit), a savepoint is gone at once:
        SAVEPOINT succeeds, the others are MySQL's 1305."""
        found = next(((m, verb) for pattern, verb in _SAVEPOINT_VERBS if (m := pattern.match(sql)) is not None), None)
        if found is None:
            return None
        m, verb = found
        name = m.group("name") or m.group("quoted").replace("``", "`")
        if session.tx is None and not session.autocommit:
            session.begin_transaction()  # autocommit=0: this statement opens the transaction
        if session.tx is None:
            if verb == "savepoint":
                return Result()
            raise ProxyError(ER_SP_DOES_NOT_EXIST, f"SAVEPOINT {name} does not exist")
        await getattr(session.tx, verb)(name)
        return Result()

    async def _do(self, session: ProxySession, sql: str) -> Outcome | None:
        """``DO expr, ...``: evaluated on one shard, its result dropped (a statement naming
        tables goes through the planner as usual)."""
        if _FROM_WORD.search(masked_code(sql)):
            raise UnsupportedError("DO with a subquery is not supported through the proxy")
        return await self._route(session, sql, "do", any_shard=True)

    async def _constant(self, session: ProxySession, sql: str) -> Outcome | None:
        """A statement that reads no table (``VALUES (1, 'a'), (2, 'b')``, ``HELP 'x'``): any
        shard answers it as MySQL would (one naming tables goes through the planner)."""
        if _FROM_WORD.search(masked_code(sql)):
            return None
        return await self._route(session, sql, first_keyword(sql), any_shard=True)

    async def _load(self, session: ProxySession, sql: str) -> Outcome | None:
        raise UnsupportedError("LOAD DATA / LOAD XML is not supported through the proxy")

    async def _table_maintenance(self, session: ProxySession, sql: str) -> Outcome | None:
        word = first_keyword(sql).upper()
        raise UnsupportedError(f"{word} TABLE is not supported through the proxy")

    async def _describe(self, session: ProxySession, sql: str) -> Outcome | None:
        """``DESCRIBE t col`` / ``DESCRIBE t 'c%'``: SHOW COLUMNS FROM t LIKE ..., as MySQL
        defines it; other DESCRIBE / EXPLAIN forms go on as before."""
        m = _DESCRIBE_TABLE.match(sql)
        if m is not None:
            return await handle_show(session, f"show columns from {m.group('table')}")
        if _EXPLAIN_STATEMENT.match(sql) and session.keyspace is not None:
            # the plan of one shard for its part of the data, as Vitess answers EXPLAIN
            return await self._route(session, sql, "explain", any_shard=True)
        m = _DESCRIBE_COLUMN.match(sql)
        if m is None:
            return None
        wild = m.group("wild")
        if wild[0] in "'\"":
            like = wild
        else:
            like = sql_literal(wild.strip("`").replace("``", "`"))
        return await handle_show(session, f"show columns from {m.group('table')} like {like}")

    async def _set(self, session: ProxySession, sql: str) -> Outcome | None:
        return await set_statement(session, sql)

    async def _select(self, session: ProxySession, sql: str) -> Outcome | None:
        answered = await select_variables(session, sql)
        if answered is not None:
            return answered
        rewritten = with_proxy_functions(session, sql)
        if rewritten is not None:
            return await self._route(session, rewritten, "select", any_shard=True)
        return None

    async def _show(self, session: ProxySession, sql: str) -> Outcome | None:
        return await handle_show(session, sql)

    async def _reshard(self, session: ProxySession, sql: str) -> Outcome | None:
        args = parse_reshard(sql)
        if args.verb in CHANGING_VERBS:
            self._check_vschema_ddl(session)  # a reshard changes what every proxy serves
        return await run_reshard(self.state.config, args)

    async def _alter(self, session: ProxySession, sql: str) -> Outcome | None:
        if not is_vschema_ddl(sql):
            return None  # ALTER TABLE ...: DDL
        self._check_vschema_ddl(session)
        return await alter_vschema(self.state, session, sql)

    async def _vexplain(self, session: ProxySession, sql: str) -> Outcome | None:
        # Planned with the session's target (USE ks:-80), and the read shards for a SELECT:
        # what it shows is where it goes.
        session.only_reads = first_keyword(_VEXPLAIN.sub("", sql, count=1)) == "select"
        return await self._planned(session, sql, "select")

    async def _stream(self, session: ProxySession, sql: str) -> Outcome | None:
        followed = await self.state.topics.stream(session, sql)
        if followed is not None:
            return followed
        _require_olap(session, "STREAM")
        return self.state.messaging.stream(sql, session.keyspace, session.target_shard)

    async def _vstream(self, session: ProxySession, sql: str) -> Outcome | None:
        _require_olap(session, "VSTREAM")
        return vstream(self.state, session, sql)

    async def _kill(self, session: ProxySession, sql: str) -> Outcome | None:
        return await self.state.processlist.kill_statement(sql)


def _require_olap(session: ProxySession, what: str) -> None:
    if session.workload != "olap":
        raise ProxyError(
            ER_NOT_SUPPORTED_YET, f"{what} is supported only for OLAP workload: run SET WORKLOAD = OLAP first"
        )


_HANDLERS: dict[str, Handler] = {
    "use": Executor._use,
    "begin": Executor._begin,
    "start": Executor._begin,
    "commit": Executor._commit,
    "rollback": Executor._rollback,
    "savepoint": Executor._savepoints,
    "release": Executor._savepoints,
    "set": Executor._set,
    "select": Executor._select,
    "show": Executor._show,
    "vexplain": Executor._vexplain,
    "alter": Executor._alter,  # ALTER VSCHEMA (other ALTERs fall through to DDL)
    "stream": Executor._stream,
    "vstream": Executor._vstream,
    "kill": Executor._kill,
    "do": Executor._do,
    "load": Executor._load,
    "values": Executor._constant,
    "help": Executor._constant,
    "check": Executor._table_maintenance,
    "checksum": Executor._table_maintenance,
    "repair": Executor._table_maintenance,
    "describe": Executor._describe,
    "desc": Executor._describe,
    "explain": Executor._describe,
    "reshard": Executor._reshard,
}

__all__ = ["BEGIN_STATEMENT", "COMMIT_STATEMENT", "Executor", "ROLLBACK_STATEMENT", "vschema_ddl_authorized"]
