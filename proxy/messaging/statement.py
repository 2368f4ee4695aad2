"""``STREAM * FROM [ks.]t [WHERE predicate]``: parsing, and the predicate as Python and as SQL.

Vitess's grammar is ``STREAM [comments] select_expr FROM table_name``; the select expression is
ignored (a stream always returns the table's streamed fields). Beyond Vitess, an optional WHERE
on the streamed columns filters what a subscriber receives. The predicate is evaluated **in
Python over decoded values** for each receiver (the authority: the proxy's one evaluator,
``rewriter.evaluate``, with MySQL's semantics), and also **pushed into the poller's SQL** when
every subscriber of a manager is filtered, so unmatched rows never fill the cache. Supported:
comparisons, ``<=>``, ``AND/OR/NOT``, ``IN``, ``BETWEEN``, ``LIKE``, ``IS [NOT] NULL|TRUE|FALSE``,
literals, streamed columns and ``+ - * / DIV MOD``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from proxy.engine.result import Field, Row, evaluator_value
from proxy.errors import ER_BAD_FIELD_ERROR, ER_NOT_SUPPORTED_YET, ProxyError, SyntaxError_
from rewriter.dialect import DIALECT
from rewriter.errors import PlanningError
from rewriter.evaluate import compile_expr, truthy

_STREAM = re.compile(r"^\s*stream\s+(?:/\*.*?\*/\s*)*(?P<expr>.+?)\s+from\s+(?P<rest>.+?)\s*;?\s*$", re.I | re.S)


@dataclass(frozen=True, slots=True)
class StreamStatement:
    table: str
    keyspace: str | None
    where: exp.Expression | None
    select: str = "*"  # the select expression as written (message tables ignore it, as Vitess)

    @property
    def where_sql(self) -> str | None:
        return None if self.where is None else self.where.sql(dialect=DIALECT)


def is_stream_statement(sql: str) -> bool:
    return _STREAM.match(sql) is not None


def parse_stream(sql: str) -> StreamStatement:
    m = _STREAM.match(sql)
    if not m:
        raise SyntaxError_(f"syntax error in STREAM statement: {sql!r}; expected STREAM * FROM table [WHERE ...]")
    try:
        tree = sqlglot.parse_one(f"SELECT * FROM {m.group('rest')}", read=DIALECT)
    except ParseError as e:
        raise SyntaxError_(f"syntax error in STREAM statement: {e}") from e
    except PlanningError as e:  # too deep, or a construct refused (rewriter.dialect)
        raise ProxyError(e.code, e.message) from e
    if not isinstance(tree, exp.Select):
        raise SyntaxError_("syntax error in STREAM statement: expected STREAM * FROM table [WHERE ...]")
    extra = [k for k in ("joins", "group", "having", "order", "limit", "offset") if tree.args.get(k)]
    if extra:
        raise SyntaxError_(f"STREAM supports only FROM table [WHERE ...], not {extra[0].upper()}")
    source = tree.args.get("from_") or tree.args.get("from")
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table):
        raise SyntaxError_("syntax error in STREAM statement: expected a table name")
    where = tree.args.get("where")
    return StreamStatement(
        table=table.name,
        keyspace=table.db or None,
        where=where.this if where is not None else None,
        select=m.group("expr").strip(),
    )


# -- the predicate ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamPredicate:
    """A subscriber's filter: ``matches(row)`` over text-protocol rows, and its SQL text."""

    sql: str
    matches: Callable[[Row], bool]


def compile_predicate(where: exp.Expression, columns: Sequence[str], fields: Sequence[Field]) -> StreamPredicate:
    """Compile a WHERE on the streamed ``columns`` with the proxy's one evaluator
    (``rewriter.evaluate``); errors name an unknown column as MySQL does."""
    index = {c.lower(): i for i, c in enumerate(columns)}

    def resolve(e: exp.Expression) -> int | None:
        if not isinstance(e, exp.Column):
            return None
        if e.name.lower() not in index:
            raise ProxyError(ER_BAD_FIELD_ERROR, f"Unknown column '{e.name}' in 'where clause'")
        return index[e.name.lower()]

    if where.find(exp.Subquery, exp.Select) is not None:
        raise ProxyError(ER_NOT_SUPPORTED_YET, "STREAM ... WHERE does not support subqueries")
    try:
        evaluate = compile_expr(where, resolve)
    except PlanningError as e:
        raise ProxyError(e.code, e.message) from e
    field_list = list(fields)

    def matches(row: Row) -> bool:
        values = [evaluator_value(f, v) for f, v in zip(field_list, row, strict=True)]
        return truthy(evaluate(values, {})) is True

    return StreamPredicate(sql=where.sql(dialect=DIALECT), matches=matches)
