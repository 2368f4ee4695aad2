"""``SET`` and ``SELECT @@var``: the variables the proxy keeps itself (autocommit, workload,
transaction_mode, max_execution_time, ...) and the shard session variables it applies to
every shard connection of the session (checked by a shard first, so a bad one answers the
shard's error and changes nothing).

Also the functions whose answer is the proxy's, not a shard's (``DATABASE()``,
``VERSION()``, ``CONNECTION_ID()``): a shard would name its own database and say
"MariaDB", which makes ORMs pick the wrong dialect.
"""

from __future__ import annotations

import re
from typing import Any

from mysql_mimic.types import ColumnType

from proxy.cluster_state import ClusterState
from proxy.engine.result import Result, decode_value, is_numeric, local_result
from proxy.errors import (
    ER_CANT_CHANGE_TX_CHARACTERISTICS,
    ER_PARSE_ERROR,
    ER_WRONG_VALUE_FOR_VAR,
    ProxyError,
    ShardError,
    UnsupportedError,
)
from proxy.session import SERVER_VERSION, ProxySession
from proxy.set_statement import literal_value, parse_set
from proxy.twopc import MODES as TRANSACTION_MODES
from proxy.twopc import TWOPC, manager_for
from proxy.user_variables import with_user_variables
from sqltext.lexer import masked_code, reads_tables
from sqltext.quoting import quote_identifier, sql_literal

_SYSVAR_SELECT = re.compile(
    r"^select\s+(?P<items>@@[\w.]+(?:\s+(?:as\s+)?`?\w+`?)?(?:\s*,\s*@@[\w.]+(?:\s+(?:as\s+)?`?\w+`?)?)*)\s*;?\s*$",
    re.I,
)
_SYSVAR_ITEM = re.compile(r"(?P<var>@@[\w.]+)(?:\s+(?:as\s+)?`?(?P<alias>\w+)`?)?", re.I)
# CONNECTION_ID() is the proxy's id for the session (what SHOW PROCESSLIST and KILL name).
_PROXY_FN = re.compile(r"\b(?P<fn>database|schema|version|connection_id)\s*\(\s*\)", re.I)

# Session variables the proxy answers itself (others are read from a shard).
_LOCAL_VARS = {"version", "version_comment", "autocommit", "workload", "transaction_mode", "max_execution_time",
               "in_transaction"}
# The session's diagnostics of its statement before: read where SHOW WARNINGS reads them (a shard
# connection of the session, proxy/show.py), never from the process's cache of global values.
_DIAGNOSTICS_COUNTS = {"warning_count", "error_count"}
# MariaDB 10.x spells these the old way.
_SETTING_ALIASES = {"transaction_isolation": "tx_isolation", "transaction_read_only": "tx_read_only"}


async def set_statement(session: ProxySession, sql: str) -> Result:
    """Run ``SET ...``."""
    try:
        st = parse_set(sql)
    except ValueError as e:
        raise ProxyError(ER_PARSE_ERROR, f"syntax error in SET: {e}") from e
    if st.transaction is not None:
        if st.transaction_scope == "global":
            raise UnsupportedError("SET GLOBAL TRANSACTION is not supported through the proxy")
        if st.transaction_scope == "next":
            session.next_tx_isolation = st.transaction
            return Result()
        tx_changes: dict[str, str | None] = {}
        for part in (p.strip() for p in st.transaction.split(",")):  # ISOLATION LEVEL x, READ WRITE
            level = part.removeprefix("isolation level ").strip()
            if level == part:  # SET SESSION TRANSACTION READ ONLY / READ WRITE
                tx_changes["tx_read_only"] = "1" if "read only" in level else "0"
            else:
                tx_changes["tx_isolation"] = "'" + level.upper().replace(" ", "-") + "'"
        await _set_settings(session, tx_changes)
        return Result()
    if st.names is not None:
        return Result()  # shards always talk utf8mb4 to the proxy
    changes: dict[str, str | None] = {}  # session variables for the shards (None: DEFAULT)
    for a in st.assignments:
        change = await _assign(session, a.scope, a.name, a.value_sql, a.literal)
        if change is not None:
            changes[change[0]] = change[1]
    if changes:
        await _set_settings(session, changes)
    return Result()


async def _assign(
    session: ProxySession, scope: str, name: str, value_sql: str, literal: object
) -> tuple[str, str | None] | None:
    """Apply a variable the proxy keeps itself; return a shard session variable's
    change (name, SQL literal or None for DEFAULT) for ``_set_settings``."""
    if scope == "user":
        session.user_vars[name] = literal if literal is not ... else await _evaluate_user_value(session, value_sql)
        return None
    if scope == "global":
        raise UnsupportedError(f"SET GLOBAL {name} is not supported through the proxy")
    if name == "workload":
        v = str(literal).lower() if literal is not ... else ""
        if v not in ("olap", "oltp", "dba"):
            raise ProxyError(ER_WRONG_VALUE_FOR_VAR, f"invalid workload: {value_sql}")
        session.workload = v
        return None
    if name == "transaction_mode":
        _set_transaction_mode(session, literal, value_sql)
        return None
    if name == "max_execution_time":
        if isinstance(literal, str) and literal.lower() == "default":
            literal = 0
        if isinstance(literal, bool) or not isinstance(literal, int) or literal < 0:
            raise ProxyError(
                ER_WRONG_VALUE_FOR_VAR, f"Variable 'max_execution_time' can't be set to the value of '{value_sql.strip()}'"
            )
        session.max_execution_time = literal
        return None
    if name == "autocommit":
        if literal not in (0, 1, "0", "1"):
            raise ProxyError(ER_WRONG_VALUE_FOR_VAR, f"Variable 'autocommit' can't be set to the value of '{value_sql}'")
        on = int(literal) == 1  # type: ignore[call-overload]  # checked just above: 0, 1, "0" or "1"
        if on and not session.autocommit and session.tx is not None:
            await session.commit()  # MySQL: enabling autocommit commits
        session.autocommit = on
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
            return name, await _evaluate_setting(session, name, with_user_variables(value_sql, session.user_vars))
        except ShardError as e:
            raise ProxyError(e.code, e.shard_message) from e
    return name, value_sql


_SUBQUERY_WORD = re.compile(r"\bselect\b", re.I)


async def _evaluate_user_value(session: ProxySession, value_sql: str) -> Any:
    """The value of ``SET @v = <expression>``, evaluated once on a shard connection with the
    session's settings (user variables it reads written in as their values), so later
    reads see the value, not the expression evaluated again."""
    expr = with_user_variables(value_sql, session.user_vars)
    if _SUBQUERY_WORD.search(masked_code(expr)):
        # one shard holds only its part of a table: a subquery would answer from that part
        raise UnsupportedError("a subquery in SET @variable is not supported through the proxy")
    state = session.state
    try:
        async with state.pools.get(*state.default_shard(session.keyspace, session.target)).connection() as sc:
            await sc.apply_settings(session.settings)
            res = await sc.execute(f"select {expr}")
    except ShardError as e:
        raise ProxyError(e.code, e.shard_message) from e
    return decode_value(res.fields[0], res.rows[0][0])


async def _evaluate_setting(session: ProxySession, name: str, value_sql: str) -> str:
    """The value of ``SET name = <expression>`` as a SQL literal, evaluated on a shard
    connection carrying the session's current settings."""
    state = session.state
    async with state.pools.get(*state.default_shard(session.keyspace, session.target)).connection() as sc:
        await sc.apply_settings(session.settings)
        await sc.execute(f"set @@session.{name} = {value_sql}")
        res = await sc.execute(f"select @@session.{name}")
        sc.broken = True  # its settings now differ from what it records; not worth tracking
    raw = res.rows[0][0]
    if raw is None:
        return "NULL"
    if is_numeric(res.fields[0]):
        return bytes(raw).decode()
    return sql_literal(bytes(raw).decode("utf-8", "surrogateescape"))


async def _set_settings(session: ProxySession, changes: dict[str, str | None]) -> None:
    """Change shard session variables (None: back to DEFAULT). A shard checks them
    first (the transaction's connections, or one pooled connection), so an unknown
    variable or a bad value answers the shard's error (1193 ``Unknown system
    variable``, 1231, ...) and leaves the session's settings as they were."""
    settings = {k: v for k, v in {**session.settings, **changes}.items() if v is not None}
    state = session.state
    try:
        if session.tx is not None and session.tx.conns:
            for sc in session.tx.conns.values():
                await sc.apply_settings(settings)
        elif settings != session.settings:
            async with state.pools.get(*state.default_shard(session.keyspace, session.target)).connection() as sc:
                await sc.apply_settings(settings)  # the pool keeps it with these settings
    except ShardError as e:
        raise ProxyError(e.code, e.shard_message) from e  # the session's error, not one shard's
    session.settings = settings


def _set_transaction_mode(session: ProxySession, literal: object, value_sql: str) -> None:
    mode = literal.lower() if isinstance(literal, str) else None
    if mode not in TRANSACTION_MODES:
        raise ProxyError(
            ER_WRONG_VALUE_FOR_VAR,
            f"Variable 'transaction_mode' can't be set to the value of '{literal if isinstance(literal, str) else value_sql.strip()}'",
        )
    if session.tx is not None and mode != session.tx.mode:
        if session.tx.touched:
            raise ProxyError(
                ER_CANT_CHANGE_TX_CHARACTERISTICS,
                "Transaction characteristics can't be changed while a transaction is in progress",
            )
        session.tx.set_mode(mode, manager_for(session.state) if mode == TWOPC else None)
    session.transaction_mode = mode
    if mode == TWOPC:
        manager_for(session.state).start()


async def select_variables(session: ProxySession, sql: str) -> Result | None:
    """``SELECT @@a, @@b [AS x]``: the proxy's own variables and the session's settings
    from the session, the rest (global values) as a shard has them. None: not such a
    SELECT, or a targeted session asking only about its shard's variables."""
    m = _SYSVAR_SELECT.match(sql) if "@@" in sql else None  # cheap test first: runs for every SELECT
    if not m:
        return None
    items = [(i.group("var"), i.group("alias")) for i in _SYSVAR_ITEM.finditer(m.group("items"))]
    if session.target_shard is not None and not any(
        var[2:].lower().split(".")[-1] in _LOCAL_VARS for var, _ in items
    ):
        return None  # a targeted session asks its shard
    names = [alias or var for var, alias in items]
    values: list[Any] = []
    keys = [_SETTING_ALIASES.get(n, n) for n in (var[2:].lower().split(".")[-1] for var, _ in items)]
    local = [k in _LOCAL_VARS or k in session.settings for k in keys]
    remote = sorted({f"@@{k}" for k, is_local in zip(keys, local, strict=True)
                     if not is_local and k not in _DIAGNOSTICS_COUNTS})
    remote_vals = await _global_variables(session.state, remote) if remote else {}
    counts = sorted({f"@@{k}" for k in keys if k in _DIAGNOSTICS_COUNTS})
    if counts and session.diagnostics_clean:  # none: the shard connection's may be another statement's
        remote_vals.update(dict.fromkeys(counts, 0))
    elif counts:
        res = await session.vcursor.execute_shard(
            *session.state.default_shard(session.keyspace, session.target), "select " + ", ".join(counts))
        remote_vals.update({n: decode_value(f, v) for n, f, v in zip(counts, res.fields, res.rows[0], strict=True)})
    types = []
    for key, is_local in zip(keys, local, strict=True):
        v = _local_var(session, key) if is_local else remote_vals.get(f"@@{key}")
        values.append(v)
        types.append(ColumnType.LONGLONG if isinstance(v, int) else ColumnType.VAR_STRING)
    return local_result(names, [values], types)


async def _global_variables(state: ClusterState, names: list[str]) -> dict[str, Any]:
    """Global variables (``@@version_compile_os``...) as a shard has them; read once per process."""
    known = state.global_variables
    missing = [n for n in names if n.lower() not in known]
    if missing:
        async with state.pools.get(*state.default_shard(None)).connection() as sc:
            res = await sc.execute("select " + ", ".join(missing))
        for n, f, v in zip(missing, res.fields, res.rows[0], strict=True):
            known[n.lower()] = decode_value(f, v)
    return {n.lower(): known[n.lower()] for n in names}


def _local_var(session: ProxySession, name: str) -> Any:
    if name == "version":
        return SERVER_VERSION
    if name == "transaction_mode":
        return session.transaction_mode.upper()
    if name == "version_comment":
        return "shardgate"
    if name == "autocommit":
        return 1 if session.autocommit else 0
    if name == "in_transaction":
        return 1 if session.tx is not None else 0
    if name == "workload":
        return session.workload.upper()
    if name == "max_execution_time":
        return session.max_execution_time
    raw = session.settings.get(_SETTING_ALIASES.get(name, name))
    lit = literal_value(raw) if raw is not None else None
    return raw if lit is ... else lit


# sql_mode values that make "..." an identifier (ANSI_QUOTES, and the combination modes holding it).
_ANSI_QUOTES_MODES = ("ANSI", "DB2", "MAXDB", "MSSQL", "ORACLE", "POSTGRESQL")


def literal_mode_refusal(session: ProxySession, sql: str) -> UnsupportedError | None:
    """The refusal of a statement whose literals the planner would read otherwise than the
    session's shards: the lexer and the literal renderer (``sqltext``) follow the default
    sql_mode, so under ANSI_QUOTES a ``"x"`` would become the string 'x' instead of a column, and
    under NO_BACKSLASH_ESCAPES ``'a\\b'`` would lose its backslash (and ``'it''s'`` go out as
    ``'it\\'s'``). None: nothing to fear (statements sent as written, to a targeted or unsharded
    shard, never come here)."""
    mode = session.settings.get("sql_mode") if session.settings else None
    if mode is None:
        return None
    mode = mode.upper()
    if '"' in sql and any(m in mode for m in _ANSI_QUOTES_MODES):
        return UnsupportedError(
            "VT12001: unsupported: double-quoted text in a planned statement under sql_mode ANSI_QUOTES"
        )
    if ("\\" in sql or "''" in sql) and "NO_BACKSLASH_ESCAPES" in mode:
        return UnsupportedError(
            "VT12001: unsupported: a backslash or doubled quote in a planned statement under sql_mode "
            "NO_BACKSLASH_ESCAPES"
        )
    return None


def with_proxy_functions(session: ProxySession, sql: str) -> str | None:
    """A table-less SELECT calling ``DATABASE()``, ``VERSION()`` or ``CONNECTION_ID()``,
    with the proxy's answers in their place (any shard can run the rest); None otherwise."""
    if "(" not in sql or _PROXY_FN.search(sql) is None or reads_tables(sql):
        return None
    return _PROXY_FN.sub(lambda m: _proxy_function_literal(session, m), sql)


def _proxy_function_literal(session: ProxySession, m: re.Match[str]) -> str:
    fn = m.group("fn").lower()
    if fn == "version":
        value = sql_literal(SERVER_VERSION)
    elif fn == "connection_id":
        value = f"cast({session.connection.connection_id if session.connection is not None else 0} as unsigned)"
    else:
        # nullif(...): a nullable column, as MySQL's DATABASE() is (NULL with no database).
        value = "NULL" if session.keyspace is None else f"nullif({sql_literal(session.keyspace)}, NULL)"
    # A select item of its own keeps its column name, as MySQL names it: the text typed.
    before = m.string[: m.start()].rstrip().lower()
    after = m.string[m.end() :].lstrip()
    if (before.endswith(("select", ",")) or before == "") and (not after or after[0] in ",;"):
        return f"{value} AS {quote_identifier(m.group(0))}"
    return value


__all__ = ["literal_mode_refusal", "select_variables", "set_statement", "with_proxy_functions"]
