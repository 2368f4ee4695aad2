"""``STREAM * FROM [ks.]t [WHERE predicate]``: parsing, and the predicate as Python and as SQL.

Vitess's grammar is ``STREAM [comments] select_expr FROM table_name``; the select expression is
ignored (a stream always returns the table's streamed fields). Beyond Vitess, an optional WHERE
on the streamed columns filters what a subscriber receives. The predicate is evaluated **in
Python over decoded values** for each receiver (the authority), and also **pushed into the
poller's SQL** when every subscriber of a manager is filtered, so unmatched rows never fill the
cache. Supported: comparisons, ``AND/OR/NOT``, ``IN``, ``BETWEEN``, ``LIKE``, ``IS [NOT] NULL``,
literals, streamed columns and ``+ - * /``; text compares case-insensitively as MySQL's default
collations do.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from proxy.engine.result import Field, Row, decode_value
from proxy.errors import ProxyError, SyntaxError_
from rewriter.dialect import DIALECT
from rewriter.errors import PlanningError

_STREAM = re.compile(r"^\s*stream\s+(?:/\*.*?\*/\s*)*(?P<expr>.+?)\s+from\s+(?P<rest>.+?)\s*;?\s*$", re.I | re.S)
ER_BAD_FIELD_ERROR = 1054


@dataclass(frozen=True, slots=True)
class StreamStatement:
    table: str
    keyspace: str | None
    where: exp.Expression | None

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
    )


# -- the predicate ---------------------------------------------------------------------------


def _number(v: Any) -> Any:
    if isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool):
        return v
    if isinstance(v, bool):
        return int(v)
    text = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    m = re.match(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text)
    return decimal.Decimal(m.group(0).strip()) if m else 0


def _comparable(a: Any, b: Any) -> tuple[Any, Any]:
    numeric = (int, float, decimal.Decimal)
    if isinstance(a, numeric) or isinstance(b, numeric):
        a, b = _number(a), _number(b)
        if isinstance(a, float) or isinstance(b, float):
            return float(a), float(b)
        return decimal.Decimal(a), decimal.Decimal(b)
    if isinstance(a, bytes) or isinstance(b, bytes):
        a = a if isinstance(a, bytes) else str(a).encode()
        b = b if isinstance(b, bytes) else str(b).encode()
        return a, b
    return str(a).casefold(), str(b).casefold()


def _like(value: Any, pattern: Any) -> bool:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    pat = pattern.decode("utf-8", "replace") if isinstance(pattern, bytes) else str(pattern)
    rx = ""
    i = 0
    while i < len(pat):
        c = pat[i]
        if c == "\\" and i + 1 < len(pat):
            rx += re.escape(pat[i + 1])
            i += 2
            continue
        rx += ".*" if c == "%" else "." if c == "_" else re.escape(c)
        i += 1
    return re.fullmatch(rx, text, re.S | re.I) is not None


Evaluator = Callable[[Sequence[Any]], Any]


def _compile(node: exp.Expression, columns: dict[str, int]) -> Evaluator:  # noqa: C901 - one case per node type
    if isinstance(node, exp.Paren):
        return _compile(node.this, columns)
    if isinstance(node, exp.Column):
        name = node.name.lower()
        if name not in columns:
            raise ProxyError(ER_BAD_FIELD_ERROR, f"Unknown column '{node.name}' in 'where clause'")
        idx = columns[name]
        return lambda row: row[idx]
    if isinstance(node, exp.Null):
        return lambda row: None
    if isinstance(node, exp.Boolean):
        value = 1 if node.this else 0
        return lambda row: value
    if isinstance(node, exp.Literal):
        if node.is_string:
            text = node.this
            return lambda row: text
        num = decimal.Decimal(node.this)
        const: Any = int(num) if num == num.to_integral_value() and "." not in node.this else num
        return lambda row: const
    if isinstance(node, exp.Neg):
        inner = _compile(node.this, columns)
        return lambda row: None if (v := inner(row)) is None else -_number(v)
    if isinstance(node, exp.Not):
        inner = _compile(node.this, columns)
        return lambda row: None if (v := inner(row)) is None else not _truthy(v)
    if isinstance(node, exp.And):
        left, right = _compile(node.left, columns), _compile(node.right, columns)

        def and_(row: Sequence[Any]) -> Any:
            a, b = left(row), right(row)
            if (a is not None and not _truthy(a)) or (b is not None and not _truthy(b)):
                return False
            return None if a is None or b is None else True

        return and_
    if isinstance(node, exp.Or):
        left, right = _compile(node.left, columns), _compile(node.right, columns)

        def or_(row: Sequence[Any]) -> Any:
            a, b = left(row), right(row)
            if (a is not None and _truthy(a)) or (b is not None and _truthy(b)):
                return True
            return None if a is None or b is None else False

        return or_
    comparisons: dict[type, Callable[[Any, Any], bool]] = {
        exp.EQ: lambda a, b: a == b,
        exp.NEQ: lambda a, b: a != b,
        exp.GT: lambda a, b: a > b,
        exp.GTE: lambda a, b: a >= b,
        exp.LT: lambda a, b: a < b,
        exp.LTE: lambda a, b: a <= b,
    }
    for kind, op in comparisons.items():
        if isinstance(node, kind):
            left, right = _compile(node.left, columns), _compile(node.right, columns)

            def compare(
                row: Sequence[Any], op: Callable[[Any, Any], bool] = op, left: Evaluator = left, right: Evaluator = right
            ) -> Any:
                a, b = left(row), right(row)
                if a is None or b is None:
                    return None
                return op(*_comparable(a, b))

            return compare
    if isinstance(node, exp.NullSafeEQ):
        left, right = _compile(node.left, columns), _compile(node.right, columns)

        def null_safe(row: Sequence[Any]) -> Any:
            a, b = left(row), right(row)
            if a is None or b is None:
                return a is None and b is None
            x, y = _comparable(a, b)
            return x == y

        return null_safe
    arithmetic: dict[type, Callable[[Any, Any], Any]] = {
        exp.Add: lambda a, b: a + b,
        exp.Sub: lambda a, b: a - b,
        exp.Mul: lambda a, b: a * b,
        exp.Div: lambda a, b: None if b == 0 else decimal.Decimal(a) / decimal.Decimal(b),
    }
    for kind, op in arithmetic.items():
        if isinstance(node, kind):
            left, right = _compile(node.left, columns), _compile(node.right, columns)

            def arith(
                row: Sequence[Any], op: Callable[[Any, Any], Any] = op, left: Evaluator = left, right: Evaluator = right
            ) -> Any:
                a, b = left(row), right(row)
                if a is None or b is None:
                    return None
                return op(_number(a), _number(b))

            return arith
    if isinstance(node, exp.Is):
        inner = _compile(node.this, columns)
        if isinstance(node.expression, exp.Null):
            return lambda row: inner(row) is None
        raise ProxyError(1235, f"STREAM ... WHERE does not support {node.sql(dialect=DIALECT)}")
    if isinstance(node, exp.In):
        inner = _compile(node.this, columns)
        if node.args.get("query") is not None:
            raise ProxyError(1235, "STREAM ... WHERE does not support subqueries")
        options = [_compile(e, columns) for e in node.expressions]

        def in_(row: Sequence[Any]) -> Any:
            v = inner(row)
            if v is None:
                return None
            saw_null = False
            for opt in options:
                o = opt(row)
                if o is None:
                    saw_null = True
                    continue
                a, b = _comparable(v, o)
                if a == b:
                    return True
            return None if saw_null else False

        return in_
    if isinstance(node, exp.Between):
        inner = _compile(node.this, columns)
        low, high = _compile(node.args["low"], columns), _compile(node.args["high"], columns)

        def between(row: Sequence[Any]) -> Any:
            v, lo, hi = inner(row), low(row), high(row)
            if v is None or lo is None or hi is None:
                return None
            a, b = _comparable(v, lo)
            c, d = _comparable(v, hi)
            return a >= b and c <= d

        return between
    if isinstance(node, exp.Like):
        inner, pattern = _compile(node.this, columns), _compile(node.expression, columns)

        def like(row: Sequence[Any]) -> Any:
            v, p = inner(row), pattern(row)
            if v is None or p is None:
                return None
            return _like(v, p)

        return like
    raise ProxyError(1235, f"STREAM ... WHERE does not support {node.sql(dialect=DIALECT)}")


def _truthy(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    return _number(v) != 0


@dataclass(frozen=True, slots=True)
class StreamPredicate:
    """A subscriber's filter: ``matches(row)`` over text-protocol rows, and its SQL text."""

    sql: str
    matches: Callable[[Row], bool]


def compile_predicate(where: exp.Expression, columns: Sequence[str], fields: Sequence[Field]) -> StreamPredicate:
    """Compile a WHERE on the streamed ``columns`` (errors name an unknown column as MySQL does)."""
    index = {c.lower(): i for i, c in enumerate(columns)}
    evaluate = _compile(where, index)
    field_list = list(fields)

    def matches(row: Row) -> bool:
        values = [decode_value(f, v) for f, v in zip(field_list, row, strict=True)]
        result = evaluate(values)
        return result is not None and _truthy(result)

    return StreamPredicate(sql=where.sql(dialect=DIALECT), matches=matches)
