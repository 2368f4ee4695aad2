"""Which statements are about topics, and where they go (pure: no I/O).

A topic is a view on one shard, so a statement that names only topics of one shard (and, in
an unsharded keyspace, its tables) runs on that shard as the client wrote it (a keyspace
qualifier on the topic is dropped: the shard's database has its own name). A statement that
also names sharded tables, other keyspaces' tables or topics of other shards is *planned*:
the planner sees each topic as a table pinned to its shard (``TopicService.catalog``), so its
rows come from the view (visible, unexpired messages only) and the proxy joins them. Topics
are append-only: ``UPDATE``, ``DELETE`` and ``REPLACE`` on one are refused (1288), as CDAP's
topics are immutable; a statement that writes into a topic what it reads elsewhere is refused (1235).

``INSERT INTO topic ... VALUES`` (the publish path, ``route_publish``) is recognised without a
parse — an autocommit one is sent by the fast path (``proxy.fast_path.routing``) with no other
work; other statements are parsed (sqlglot, the project's dialect) only when their text names a
topic.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from proxy.errors import ER_NON_UPDATABLE_TABLE, ER_NOT_SUPPORTED_YET, ER_TABLE_EXISTS, ProxyError
from proxy.topics.names import log_table
from proxy.topics.schema import view_columns
from proxy.topics.statement import unquote
from rewriter.dialect import DIALECT
from rewriter.errors import PlanningError
from sqltext.lexer import masked_code, qualified_identifiers, split_parenthesised, split_top_level
from sqltext.quoting import quote_identifier

if TYPE_CHECKING:
    from proxy.topics.sequencer import TopicInfo

_IDENT = r"(?:`(?P<{0}q>(?:[^`]|``)+)`|(?P<{0}>[A-Za-z0-9_$-]+))"
_INSERT = re.compile(
    r"^\s*(?P<verb>insert|replace)\s+(?:(?:low_priority|delayed|high_priority|ignore)\s+)*(?:into\s+)?"
    r"(?P<target>(?:" + _IDENT.format("ks") + r"\s*\.\s*)?" + _IDENT.format("t") + r")",
    re.I,
)
_SELECT_WORD = re.compile(r"\bselect\b", re.I)
_RETURNING_WORD = re.compile(r"\breturning\b", re.I)
# A column list of bare names and commas only (nothing quoted, no comment, no nesting).
_PLAIN_LIST = re.compile(r"^[A-Za-z0-9_$\s,]*$")
_ROUTED_KW = frozenset({"select", "with", "(", "insert", "replace", "update", "delete", "table", "values"})
# Table DDL (not CREATE/ALTER/DROP TOPIC): refused when it names a topic (``refuse_table_ddl``).
TABLE_DDL_KW = frozenset({"create", "alter", "drop", "rename", "truncate"})
_DDL_VERB = re.compile(r"^\s*(\w+)\b.*?\b(table|view|index|trigger)\b", re.I | re.S)

Lookup = Callable[[str | None, str], "TopicInfo | None"]


@dataclass(frozen=True, slots=True)
class Routed:
    keyspace: str
    shard: str
    sql: str
    insert_into: TopicInfo | None  # the topic this INSERT publishes to
    planned: bool = False  # beyond one shard: for the planner, with topics as pinned tables
    # Where ``sql`` names the topic's log table (a publish straight into it): the span a direct
    # publish (``proxy.topics.direct``) rewrites after; None: through the view, or not a publish.
    target: tuple[int, int] | None = None


def names_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    """A search pattern for any of ``names`` as a whole word (None if there are none)."""
    alts = sorted({re.escape(n) for n in names}, key=len, reverse=True)
    if not alts:
        return None
    return re.compile(r"(?<![\w$-])(?:" + "|".join(alts) + r")(?![\w$-])")


def _unq(m: re.Match[str], group: str) -> str | None:
    q = m.group(group + "q")
    if q is not None:
        return q.replace("``", "`")
    return m.group(group)


def route(sql: str, kw: str, session_keyspace: str | None, lookup: Lookup, sharded: Callable[[str], bool]) -> Routed | None:
    """Where a statement that may name topics goes; None if it names none."""
    if kw not in _ROUTED_KW:
        return None
    if kw in ("insert", "replace"):
        published = route_publish(sql, session_keyspace, lookup)
        if published is not None:
            return published
    return _route_parsed(sql, kw, session_keyspace, lookup, sharded)


def route_publish(sql: str, session_keyspace: str | None, lookup: Lookup) -> Routed | None:
    """``INSERT INTO topic ... VALUES`` (the publish path), recognised and routed without a
    parse; None if ``sql`` is not one (it may still name a topic elsewhere: ``route`` parses
    it). A ``REPLACE`` into a topic is refused (1288)."""
    m = _INSERT.match(sql)
    if m is None:
        return None
    qualifier = _unq(m, "ks")
    info = lookup(qualifier or session_keyspace, _unq(m, "t") or "")
    if info is None:
        return None
    if m.group("verb").lower() == "replace":
        raise ProxyError(ER_NON_UPDATABLE_TABLE, f"The target table {info.name} of the REPLACE is not updatable"
                         " (topics are append-only)", "HY000")
    # The word, case-insensitively, only where the lowered text has it: the regex alone (re.I,
    # word boundaries) read a 100-row publish's 10 KB at ~11% of the proxy's samples (py-spy,
    # autocommit 100-message publishes); lower() and a substring test are C speed.
    lowered = sql.lower()
    if "returning" in lowered and _RETURNING_WORD.search(masked_code(sql), m.end()):
        # MariaDB would return the row as inserted, before its id: message_id NULL, publish_time
        # 0, and for RETURNING * the log table's own columns.
        raise ProxyError(ER_NOT_SUPPORTED_YET, f"INSERT ... RETURNING into topic {info.name} is not supported: a"
                         " message's id and publish time are given at its commit (read them from the topic)")
    if "select" in lowered and _SELECT_WORD.search(sql, m.end()):
        return None
    if "publish_time" in lowered and "publish_time" in (c.lower() for c in _column_list(sql[m.end():]) or ()):
        # The pass (or the direct publish) gives publish_time with the id, overwriting any
        # value: refused, as inserting message_id is (MariaDB's 1906), never silently changed.
        raise ProxyError(ER_NOT_SUPPORTED_YET, f"INSERT into topic {info.name} naming publish_time is not supported:"
                         " a message's publish time is given with its id, at its commit")
    table = log_table(info.name) if _names_view_columns(sql[m.end():], info) else info.name
    target = None
    if qualifier is not None or table != info.name:
        quoted = quote_identifier(table)
        start = m.start("target")
        sql = sql[:start] + quoted + sql[m.end("target"):]
        if table != info.name:
            target = (start, start + len(quoted))
    return Routed(info.keyspace, info.shard, sql, info, target=target)


def _names_view_columns(rest: str, info: TopicInfo) -> bool:
    """Whether an INSERT's column list (``rest`` starts after its target) names only columns
    the topic's view lets a publisher write: then it may go straight into the log table, which
    is the same row (the view is a plain filter over it) without MariaDB's cost of inserting
    through a view (re-reading its definition: +60 us of shard CPU per INSERT here, ~50% of the
    insert itself). Anything else (no column list, a column the view does not show, the
    generated ``message_id`` whose error names the table) goes through the view."""
    names = _column_list(rest)
    if names is None:
        return False
    writable = _writable(tuple(info.columns))
    return bool(names) and all(n.lower() in writable for n in names)


def _column_list(rest: str) -> list[str] | None:
    """The names of an INSERT's column list (``rest`` starts after its target), unquoted;
    None without one."""
    rest = rest.lstrip()
    if not rest.startswith("("):
        return None
    close = rest.find(")")
    inner = rest[1:close]
    if close > 0 and _PLAIN_LIST.match(inner):
        # Bare names (the publish path's ``(payload)``): no lexer. Its 4.3 us per INSERT was
        # ~45% of route_publish's cost (9.5 -> 6.0 us, timeit).
        return [c.strip() for c in inner.split(",")]
    split = split_parenthesised(rest)
    if split is None:
        return None
    return [unquote(c.strip()) for c in split_top_level(split[0])]


@functools.lru_cache(maxsize=256)
def _writable(user_columns: tuple[str, ...]) -> frozenset[str]:
    """The lower-cased view columns a publisher may name (a topic's user columns: few shapes)."""
    return frozenset(c.lower() for c in view_columns(user_columns)) - {"message_id"}


def refuse_table_ddl(sql: str, kw: str, session_keyspace: str | None, lookup: Lookup) -> None:
    """Refuse table DDL (``ALTER TABLE``, ``DROP TABLE``/``VIEW``, ``RENAME TABLE``,
    ``TRUNCATE``, ``CREATE TABLE``/``VIEW``/``INDEX``/``TRIGGER`` ...) that names a topic. The
    proxy sends such DDL to every shard of the keyspace; on the topic's shard it would change
    the view the topic is read through (``RENAME TABLE`` succeeds on a view: the topic's reads
    and publishes then fail) or its name would clash on that shard alone, leaving the keyspace's
    shards different. ``CREATE TABLE`` with a topic's name: 1050, as for any existing table;
    anything else: 1235, naming the statement and the topic (``ALTER TOPIC``/``DROP TOPIC`` are
    what change a topic)."""
    if kw not in TABLE_DDL_KW:
        return
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except (ParseError, PlanningError, ValueError, RecursionError):
        tree = None  # the shard reports the syntax; the names are read from the text below
    named: list[tuple[str | None, str]]
    if tree is not None and not isinstance(tree, exp.Command):
        named = [(t.db or None, t.name) for t in tree.find_all(exp.Table) if t.name]
    else:  # RENAME TABLE, CREATE TRIGGER ...: sqlglot keeps them as text
        named = qualified_identifiers(sql)
    for position, (qualifier, name) in enumerate(named):
        info = lookup(qualifier or session_keyspace, name)
        if info is None:
            continue
        m = _DDL_VERB.match(sql)
        verb = " ".join(m.group(1, 2)).upper() if m else kw.upper()
        if position == 0 and isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() in ("TABLE", "VIEW"):
            raise ProxyError(ER_TABLE_EXISTS, f"Table '{info.name}' already exists (a topic of keyspace {info.keyspace})",
                             "42S01")
        raise ProxyError(ER_NOT_SUPPORTED_YET, f"{verb} naming topic {info.name} is not supported: a topic changes"
                         " only by CREATE TOPIC, ALTER TOPIC and DROP TOPIC")


def _route_parsed(sql: str, kw: str, session_keyspace: str | None, lookup: Lookup,
                  sharded: Callable[[str], bool]) -> Routed | None:
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except (ParseError, PlanningError, ValueError, RecursionError):
        return None  # the planner reports it
    if tree is None:
        return None
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    topics: list[tuple[exp.Table, TopicInfo]] = []
    others: list[exp.Table] = []
    for t in tree.find_all(exp.Table):
        if not t.name:
            continue
        if not t.db and t.name in ctes:
            continue
        info = lookup(t.db or session_keyspace, t.name)
        if info is not None:
            topics.append((t, info))
        else:
            others.append(t)
    if not topics:
        return None
    first = topics[0][1]
    target: exp.Expression | None = None
    if isinstance(tree, (exp.Update, exp.Delete, exp.Insert)):
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        if isinstance(tree, exp.Delete) and tree.args.get("tables"):
            target = tree.args["tables"][0]
    target_topic = next((i for t, i in topics if t is target or (isinstance(target, exp.Table) and t.name == target.name
                                                                   and (t.db or None) == (target.db or None))), None)
    if isinstance(tree, (exp.Update, exp.Delete)) or (isinstance(tree, exp.Insert) and tree.args.get("overwrite")):
        verb = "UPDATE" if isinstance(tree, exp.Update) else "DELETE"
        if target_topic is not None:
            raise ProxyError(ER_NON_UPDATABLE_TABLE, f"The target table {target_topic.name} of the {verb} is not updatable"
                             " (topics are append-only)", "HY000")
        raise ProxyError(ER_NOT_SUPPORTED_YET, f"{verb} reading a topic is not supported")
    one_shard = all((i.keyspace, i.shard) == (first.keyspace, first.shard) for _, i in topics) and (
        not others or (not sharded(first.keyspace) and all(not t.db or t.db == first.keyspace for t in others)))
    if not one_shard:
        if target_topic is not None:
            names = ", ".join(sorted({t.name for t in others} | {i.name for _, i in topics} - {target_topic.name}))
            raise ProxyError(ER_NOT_SUPPORTED_YET, f"INSERT into topic {target_topic.name} reading {names} (beyond"
                             f" its shard) is not supported")
        return Routed(first.keyspace, first.shard, sql, None, planned=True)
    qualified = [t for t, _ in topics if t.db] + [t for t in others if t.db]
    if qualified:
        for t in qualified:
            t.set("db", None)
            t.set("catalog", None)
        sql = tree.sql(dialect=DIALECT)
    insert_into = target_topic if isinstance(tree, exp.Insert) else None
    return Routed(first.keyspace, first.shard, sql, insert_into)
