"""Compile a small SQL expression subset into a Python function over a decoded row.

Used where the proxy itself must evaluate (HAVING over aggregated rows). The
``resolve`` callback maps a sub-expression to a row index (or None if it is not a
column of the row); anything the compiler does not know raises ``Unsupported``, so
an expression is never evaluated with different semantics than MySQL's.

Semantics follow MySQL: three-valued logic with NULL, strings compare with the
default case- and accent-insensitive collation, numbers as numbers.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from sqlglot import exp

from rewriter.collation import general_ci_key
from rewriter.dialect import DIALECT
from rewriter.errors import unsupported

Fn = Callable[[list[Any], Mapping[str, Any]], Any]

_CMP: dict[type, Callable[[Any, Any], bool]] = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
}


def _comparable(a: Any, b: Any) -> tuple[Any, Any]:
    if isinstance(a, str) and isinstance(b, str):
        return general_ci_key(a), general_ci_key(b)
    if isinstance(a, str) and not isinstance(b, str | bytes):
        return _to_number(a), b
    if isinstance(b, str) and not isinstance(a, str | bytes):
        return a, _to_number(b)
    if isinstance(a, float) and isinstance(b, Decimal):
        return Decimal(a), b
    if isinstance(b, float) and isinstance(a, Decimal):
        return a, Decimal(b)
    return a, b


def _numeric_operands(a: Any, b: Any) -> tuple[Any, Any]:
    """Both operands of an arithmetic operator, strings read as numbers (NULL stays None)."""
    if isinstance(a, str):
        a = _to_number(a)
    if isinstance(b, str):
        b = _to_number(b)
    return a, b


def _to_number(s: str) -> Any:
    try:
        return Decimal(s.strip() or "0")
    except ArithmeticError:
        return Decimal(0)


def _truthy(v: Any) -> bool | None:
    if v is None:
        return None
    if isinstance(v, str):
        return _to_number(v) != 0
    return bool(v)


def compile_expr(e: exp.Expression, resolve: Callable[[exp.Expression], int | None]) -> Fn:
    idx = resolve(e)
    if idx is not None:
        return lambda row, bv, i=idx: row[i]
    if isinstance(e, exp.Paren):
        return compile_expr(e.this, resolve)
    if isinstance(e, exp.Literal):
        if e.is_string:
            s = e.this
            return lambda row, bv: s
        text = e.this
        num: Any = int(text) if text.lstrip("-").isdigit() else Decimal(text)
        return lambda row, bv: num
    if isinstance(e, exp.Null):
        return lambda row, bv: None
    if isinstance(e, exp.Boolean):
        b = 1 if e.this else 0
        return lambda row, bv: b
    if isinstance(e, exp.Placeholder):
        name = e.name
        return lambda row, bv: bv[name]
    if isinstance(e, exp.Neg):
        f = compile_expr(e.this, resolve)

        def neg(row: list[Any], bv: Mapping[str, Any]) -> Any:
            v = f(row, bv)
            return None if v is None else -v

        return neg
    if type(e) in _CMP:
        op = _CMP[type(e)]
        fa, fb = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)

        def cmp(row: list[Any], bv: Mapping[str, Any]) -> Any:
            a, b = fa(row, bv), fb(row, bv)
            if a is None or b is None:
                return None
            a, b = _comparable(a, b)
            return 1 if op(a, b) else 0

        return cmp
    if isinstance(e, exp.And | exp.Or):
        fa, fb = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)
        is_and = isinstance(e, exp.And)

        def logic(row: list[Any], bv: Mapping[str, Any]) -> Any:
            a, b = _truthy(fa(row, bv)), _truthy(fb(row, bv))
            if is_and:
                if a is False or b is False:
                    return 0
                return None if a is None or b is None else 1
            if a is True or b is True:
                return 1
            return None if a is None or b is None else 0

        return logic
    if isinstance(e, exp.Not):
        f = compile_expr(e.this, resolve)

        def not_(row: list[Any], bv: Mapping[str, Any]) -> Any:
            v = _truthy(f(row, bv))
            return None if v is None else (0 if v else 1)

        return not_
    if isinstance(e, exp.Is) and isinstance(e.expression, exp.Null):
        f = compile_expr(e.this, resolve)
        return lambda row, bv: 1 if f(row, bv) is None else 0
    if isinstance(e, exp.Div):
        fa, fb = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)

        def div(row: list[Any], bv: Mapping[str, Any]) -> Any:
            a, b = _numeric_operands(fa(row, bv), fb(row, bv))
            if a is None or b is None:
                return None
            if b == 0:
                return None  # MySQL: division by zero is NULL
            if isinstance(a, float) or isinstance(b, float):
                return float(a) / float(b)
            return Decimal(a) / Decimal(b)

        return div
    if isinstance(e, exp.Add | exp.Sub | exp.Mul):
        op2 = {exp.Add: operator.add, exp.Sub: operator.sub, exp.Mul: operator.mul}[type(e)]
        fa, fb = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)

        def arith(row: list[Any], bv: Mapping[str, Any]) -> Any:
            a, b = _numeric_operands(fa(row, bv), fb(row, bv))
            if a is None or b is None:
                return None
            if isinstance(a, float) or isinstance(b, float):
                return op2(float(a), float(b))
            return op2(a, b)

        return arith
    if isinstance(e, exp.Between):
        fx = compile_expr(e.this, resolve)
        flo, fhi = compile_expr(e.args["low"], resolve), compile_expr(e.args["high"], resolve)

        def between(row: list[Any], bv: Mapping[str, Any]) -> Any:
            x, lo, hi = fx(row, bv), flo(row, bv), fhi(row, bv)
            if x is None or lo is None or hi is None:
                return None
            a, b = _comparable(x, lo)
            c, d = _comparable(x, hi)
            return 1 if a >= b and c <= d else 0

        return between
    if isinstance(e, exp.In) and not e.args.get("query"):
        fx = compile_expr(e.this, resolve)
        items = [compile_expr(i, resolve) for i in e.expressions]

        def in_(row: list[Any], bv: Mapping[str, Any]) -> Any:
            x = fx(row, bv)
            if x is None:
                return None
            values: list[Any] = []
            for f in items:
                v = f(row, bv)
                values.extend(v if isinstance(v, list) else [v])
            saw_null = False
            for v in values:
                if v is None:
                    saw_null = True
                    continue
                a, b = _comparable(x, v)
                if a == b:
                    return 1
            return None if saw_null else 0

        return in_
    raise unsupported(f"expression evaluated at the proxy: {e.sql(dialect=DIALECT)}")


KindFn = Callable[[Callable[[int], tuple[str, int]], Mapping[str, Any]], tuple[str, int]]


def _literal_kind(v: Any) -> tuple[str, int]:
    if isinstance(v, bool | int):
        return ("int", 0)
    if isinstance(v, Decimal):
        exp_ = v.as_tuple().exponent
        return ("decimal", -exp_ if isinstance(exp_, int) and exp_ < 0 else 0)
    if isinstance(v, float):
        return ("double", 0)
    return ("string", 0)


def compile_kind(e: exp.Expression, resolve: Callable[[exp.Expression], int | None]) -> KindFn:
    """The MySQL result type of an arithmetic expression, from its operands' types:
    any DOUBLE -> DOUBLE; ``/`` -> DECIMAL with the dividend's scale + 4
    (``div_precision_increment``); ``*`` adds scales; ``+``/``-`` keep the larger one;
    integers stay BIGINT."""
    idx = resolve(e)
    if idx is not None:
        return lambda kind_of, bv, i=idx: kind_of(i)
    if isinstance(e, exp.Paren | exp.Neg):
        return compile_kind(e.this, resolve)
    if isinstance(e, exp.Literal):
        if e.is_string:
            return lambda kind_of, bv: ("string", 0)
        k = _literal_kind(int(e.this) if e.this.lstrip("-").isdigit() else Decimal(e.this))
        return lambda kind_of, bv: k
    if isinstance(e, exp.Placeholder):
        name = e.name
        return lambda kind_of, bv: _literal_kind(bv[name])
    if isinstance(e, exp.Add | exp.Sub | exp.Mul | exp.Div):
        ka, kb = compile_kind(e.this, resolve), compile_kind(e.expression, resolve)
        op = type(e)

        def kind(kind_of: Callable[[int], tuple[str, int]], bv: Mapping[str, Any]) -> tuple[str, int]:
            (a, sa), (b, sb) = ka(kind_of, bv), kb(kind_of, bv)
            if "double" in (a, b) or "string" in (a, b):
                return ("double", 0)
            if op is exp.Div:
                return ("decimal", min(sa + 4, 30))
            if op is exp.Mul:
                return ("decimal", sa + sb) if "decimal" in (a, b) else ("int", 0)
            return ("decimal", max(sa, sb)) if "decimal" in (a, b) else ("int", 0)

        return kind
    raise unsupported(f"expression computed at the proxy: {e.sql(dialect=DIALECT)}")
