"""The one expression evaluator: SQL expressions compiled into Python functions over a
decoded row, with MySQL's semantics, for whatever the proxy computes itself (HAVING and
projections over aggregated or joined rows, filters over derived aggregations, expressions
over window functions, ``STREAM ... WHERE`` subscriber filters).

``compile_expr(e, resolve)`` returns ``fn(row, bindvars)``; ``resolve`` maps a
sub-expression to a row index (``None``: not a column of the row). ``compile_kind(e,
resolve)`` gives the result's MySQL type (``ValueKind``) from the columns' types, which the
Projection sends as column metadata. Anything outside what is implemented raises
``Unsupported`` naming it, so an expression is never evaluated with semantics other than
MySQL's (the planner then sends the statement to ``Compute``, where MySQL evaluates it).

Operators are here; MySQL's functions (CASE, IF, COALESCE, string, numeric, CAST, date and
time functions) are in ``rewriter.functions``, one module per family, and MySQL's implicit
conversions in ``rewriter.functions.values``. Rows come decoded by the engine's
``evaluator_value`` (DATE/DATETIME/TIME as ``datetime`` objects).

MySQL's rules, as implemented (checked against MariaDB in tests/engine/test_evaluate_oracle.py
and tests/engine/test_evaluate_functions_oracle.py):
- three-valued logic: NULL in a comparison, arithmetic or IN gives NULL; ``AND`` is 0
  if either side is 0, ``OR`` 1 if either is 1; ``<=>`` never NULL; booleans are 1/0;
- a string read as a number takes its longest numeric prefix (``'12abc'`` is 12,
  ``'abc'`` is 0) as a DOUBLE: in arithmetic, in truth tests, and when compared with a
  number; a temporal value is its number (``DATE '2024-01-31' + 1`` is 20240132);
- numbers: integers and DECIMALs exact (65 digits), any DOUBLE makes the result DOUBLE;
  ``/`` of exact operands is DECIMAL; division and ``MOD``/``DIV`` by zero are NULL;
  ``MOD`` takes the dividend's sign, ``DIV`` truncates;
- text compares with the column's default collation ``utf8mb4_general_ci`` (case- and
  accent-insensitive, trailing spaces ignored); a binary string (``bytes``) compares
  byte by byte, as does text against one; ``LIKE`` likewise (``%``, ``_``, ``\\``); a
  temporal value compared with a string that reads as one compares as that type.
"""

from __future__ import annotations

import decimal
import math
import operator
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from sqlglot import exp

from rewriter.collation import general_ci_fold
from rewriter.dialect import DIALECT
from rewriter.errors import unsupported
from rewriter.functions import registry
from rewriter.functions.signature import INT, TEMPORAL_KINDS, Fn, KindFn, Resolve
from rewriter.functions.values import (
    ShownDecimal,
    as_number,
    comparable,
    decimal_scale,
    string_to_double,
    to_text,
    truthy,
)
from rewriter.nodes import ValueKind

__all__ = ["comparable", "compile_condition", "compile_expr", "compile_kind", "like", "string_to_double", "truthy"]


# DECIMAL arithmetic as MySQL's: up to 65 digits.
_DECIMAL = decimal.Context(prec=65)

_CMP: dict[type, Callable[[Any, Any], bool]] = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
}

def like(value: Any, pattern: Any) -> bool:
    binary = isinstance(value, bytes) or isinstance(pattern, bytes)
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else to_text(value)
    pat = pattern.decode("utf-8", "replace") if isinstance(pattern, bytes) else str(pattern)
    fold = (lambda t: t) if binary else general_ci_fold
    rx: list[str] = []
    i = 0
    while i < len(pat):
        c = pat[i]
        if c == "\\" and i + 1 < len(pat):
            rx.append(re.escape(fold(pat[i + 1])))
            i += 2
            continue
        rx.append(".*" if c == "%" else "." if c == "_" else re.escape(fold(c)))
        i += 1
    return re.fullmatch("".join(rx), fold(text), re.S) is not None


def _arith(op: type[exp.Expression], a: Any, b: Any) -> Any:
    a, b = as_number(a), as_number(b)
    if isinstance(a, float) or isinstance(b, float):
        x, y = float(a), float(b)
        if op in (exp.Add, exp.Sub, exp.Mul, exp.Div):
            if op is exp.Div and y == 0:
                return None
            r = x + y if op is exp.Add else x - y if op is exp.Sub else x * y if op is exp.Mul else x / y
            if math.isinf(r) and math.isfinite(x) and math.isfinite(y):
                raise OverflowError("DOUBLE value is out of range")  # MySQL's 1690, answered by the engine
            return r
        if y == 0:
            return None
        if op is exp.Mod:
            return _fmod(x, y)
        return int(x / y)  # DIV
    if op in (exp.Add, exp.Sub, exp.Mul):
        if not (isinstance(a, Decimal) or isinstance(b, Decimal)):
            return a + b if op is exp.Add else a - b if op is exp.Sub else a * b
        exact = (_DECIMAL.add if op is exp.Add else _DECIMAL.subtract if op is exp.Sub else _DECIMAL.multiply)(a, b)
        if isinstance(a, ShownDecimal) or isinstance(b, ShownDecimal):  # a division's digits shown: as its type
            sa, sb = decimal_scale(a), decimal_scale(b)
            return ShownDecimal(exact, sa + sb if op is exp.Mul else max(sa, sb))
        return exact
    if b == 0:
        return None
    if op is exp.Div:
        return _divide(Decimal(a), Decimal(b), decimal_scale(a))
    if op is exp.Mod:
        if isinstance(a, int) and isinstance(b, int):
            r = abs(a) % abs(b)
            return -r if a < 0 else r
        return _DECIMAL.remainder(Decimal(a), Decimal(b))  # truncating: the dividend's sign
    q = _DECIMAL.divide_int(Decimal(a), Decimal(b))  # DIV truncates toward zero
    return int(q)


def _divide(a: Decimal, b: Decimal, scale: int) -> Decimal:
    """MySQL's exact division: the dividend's scale + ``div_precision_increment`` (4),
    carried internally rounded up to whole 9-digit words (so ``1/3*3`` is 1.0000, as in
    MySQL); the result column shows the scale + 4 (``compile_kind``), and so does its text
    (``ShownDecimal``)."""
    shown = min(scale + 4, 30)
    internal = -(-shown // 9) * 9
    # the long division stops at the word boundary: digits past it are cut, not rounded
    # ((-0.125 / 3) / 2 is -0.02083333300: the inner quotient is -0.041666666)
    q = _DECIMAL.divide(a, b).quantize(Decimal(1).scaleb(-internal), rounding=decimal.ROUND_DOWN, context=_DECIMAL)
    return ShownDecimal(q, shown)


def _fmod(x: float, y: float) -> float:
    r = abs(x) % abs(y)
    return -r if x < 0 else r


_ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)


def compile_expr(e: exp.Expression, resolve: Resolve) -> Fn:  # noqa: C901 - one case per node type
    idx = resolve(e)
    if idx is not None:
        return lambda row, bv, i=idx: row[i]  # type: ignore[misc]  # a default argument binds the index
    if e.args.get("negate") and not isinstance(e, exp.Like):
        raise unsupported(f"expression evaluated at the proxy: {e.sql(dialect=DIALECT)}")
    if isinstance(e, exp.Paren):
        return compile_expr(e.this, resolve)
    if isinstance(e, exp.Literal):
        if e.is_string:
            s = e.this
            return lambda row, bv: s
        text = e.this
        num: Any = int(text) if text.lstrip("-").isdigit() else (
            float(text) if "e" in text.lower() else Decimal(text))
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
            return None if v is None else -as_number(v)

        return neg
    if type(e) in _CMP:
        op = _CMP[type(e)]
        fa, fb = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)

        def cmp(row: list[Any], bv: Mapping[str, Any]) -> Any:
            a, b = fa(row, bv), fb(row, bv)
            if a is None or b is None:
                return None
            return 1 if op(*comparable(a, b)) else 0

        return cmp
    if isinstance(e, exp.NullSafeEQ):
        fa, fb = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)

        def null_safe_eq(row: list[Any], bv: Mapping[str, Any]) -> Any:
            a, b = fa(row, bv), fb(row, bv)
            if a is None or b is None:
                return 1 if a is None and b is None else 0
            x, y = comparable(a, b)
            return 1 if x == y else 0

        return null_safe_eq
    if isinstance(e, exp.And | exp.Or):
        fa, fb = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)
        is_and = isinstance(e, exp.And)

        def logic(row: list[Any], bv: Mapping[str, Any]) -> Any:
            a, b = truthy(fa(row, bv)), truthy(fb(row, bv))
            if is_and:
                if a is False or b is False:
                    return 0
                return None if a is None or b is None else 1
            if a is True or b is True:
                return 1
            return None if a is None or b is None else 0

        return logic
    if isinstance(e, exp.Xor) and e.expression is not None:
        fa, fb = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)

        def xor(row: list[Any], bv: Mapping[str, Any]) -> Any:
            a, b = truthy(fa(row, bv)), truthy(fb(row, bv))
            return None if a is None or b is None else (1 if a != b else 0)

        return xor
    if isinstance(e, exp.Not):
        f = compile_expr(e.this, resolve)

        def not_(row: list[Any], bv: Mapping[str, Any]) -> Any:
            v = truthy(f(row, bv))
            return None if v is None else (0 if v else 1)

        return not_
    if isinstance(e, exp.Is):
        f = compile_expr(e.this, resolve)
        if isinstance(e.expression, exp.Null):
            return lambda row, bv: 1 if f(row, bv) is None else 0
        if isinstance(e.expression, exp.Boolean):  # IS TRUE / IS FALSE: never NULL
            want = bool(e.expression.this)
            return lambda row, bv: 1 if truthy(f(row, bv)) is want else 0
    function = registry.lookup(e)
    if function is not None:
        return function.value(e, lambda x: compile_expr(x, resolve))
    if isinstance(e, _ARITH):
        op2 = type(e)
        fa, fb = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)

        def arith(row: list[Any], bv: Mapping[str, Any]) -> Any:
            a, b = fa(row, bv), fb(row, bv)
            if a is None or b is None:
                return None
            return _arith(op2, a, b)

        return arith
    if isinstance(e, exp.Between):
        fx = compile_expr(e.this, resolve)
        flo, fhi = compile_expr(e.args["low"], resolve), compile_expr(e.args["high"], resolve)

        def between(row: list[Any], bv: Mapping[str, Any]) -> Any:
            x, lo, hi = fx(row, bv), flo(row, bv), fhi(row, bv)
            below = None if x is None or lo is None else (lambda p: p[0] < p[1])(comparable(x, lo))
            above = None if x is None or hi is None else (lambda p: p[0] > p[1])(comparable(x, hi))
            if below or above:
                return 0
            return None if below is None or above is None else 1

        return between
    if isinstance(e, exp.In) and not e.args.get("query") and not e.args.get("unnest"):
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
                a, b = comparable(x, v)
                if a == b:
                    return 1
            return None if saw_null else 0

        return in_
    if isinstance(e, exp.Like):
        fv, fp = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)
        matched = 0 if e.args.get("negate") else 1  # NOT LIKE

        def like_(row: list[Any], bv: Mapping[str, Any]) -> Any:
            v, p = fv(row, bv), fp(row, bv)
            if v is None or p is None:
                return None
            return matched if like(v, p) else 1 - matched

        return like_
    raise unsupported(f"expression evaluated at the proxy: {e.sql(dialect=DIALECT)}")



def _literal_kind(v: Any) -> ValueKind:
    if isinstance(v, bool | int):
        return ("int", 0)
    if isinstance(v, Decimal):
        exp_ = v.as_tuple().exponent
        return ("decimal", -exp_ if isinstance(exp_, int) and exp_ < 0 else 0)
    if isinstance(v, float):
        return ("double", 0)
    return ("string", 0)


def compile_condition(e: exp.Expression, resolve: Resolve) -> Callable[[list[Any], Mapping[str, Any]], bool]:
    """``e`` as a condition (WHERE, HAVING): true only when its value is a non-zero number
    as MySQL reads it (``'abc'`` and ``'0'`` are false, ``'12abc'`` true, NULL not true).
    A Filter's predicate must be this, not ``compile_expr``'s raw value."""
    f = compile_expr(e, resolve)
    return lambda row, bv: truthy(f(row, bv)) is True


# Expressions whose value is 1, 0 or NULL: BIGINT.
_PREDICATES = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.And, exp.Or, exp.Xor,
               exp.Not, exp.Is, exp.Between, exp.In, exp.Like)


def _numeric_kind(k: ValueKind) -> ValueKind:
    """An operand's type in arithmetic: a temporal value is its number (an integer, or a
    DECIMAL with its fractional digits); NULL is taken as an integer."""
    name, scale = k
    if name in TEMPORAL_KINDS:
        return ("decimal", scale) if scale else INT
    return INT if name == "null" else k


def compile_kind(e: exp.Expression, resolve: Resolve) -> KindFn:
    """The MySQL result type of an arithmetic expression, from its operands' types:
    any DOUBLE (or string) -> DOUBLE; ``/`` -> DECIMAL with the dividend's scale + 4
    (``div_precision_increment``); ``*`` adds scales; ``+``/``-``/``MOD`` keep the larger
    one; integers stay BIGINT; ``DIV`` is BIGINT."""
    idx = resolve(e)
    if idx is not None:
        return lambda kind_of, bv, i=idx: kind_of(i)  # type: ignore[misc]  # a default argument binds the index
    if isinstance(e, exp.Paren):
        return compile_kind(e.this, resolve)
    if isinstance(e, exp.Neg):  # a number: a date's, a string's DOUBLE
        inner = compile_kind(e.this, resolve)

        def negated(kind_of: Callable[[int], ValueKind], bv: Mapping[str, Any]) -> ValueKind:
            k = _numeric_kind(inner(kind_of, bv))
            return ("double", 0) if k[0] == "string" else k

        return negated
    if isinstance(e, exp.Literal):
        if e.is_string:
            return lambda kind_of, bv: ("string", 0)
        text = e.this
        k = _literal_kind(int(text) if text.lstrip("-").isdigit() else (
            float(text) if "e" in text.lower() else Decimal(text)))
        return lambda kind_of, bv: k
    if isinstance(e, exp.Placeholder):
        name = e.name
        return lambda kind_of, bv: _literal_kind(bv[name])
    if isinstance(e, exp.Null):
        return lambda kind_of, bv: ("null", 0)
    if isinstance(e, exp.Boolean):
        return lambda kind_of, bv: INT
    function = registry.lookup(e)
    if function is not None:
        return function.kind(e, lambda x: compile_kind(x, resolve))
    if isinstance(e, _ARITH):
        ka, kb = compile_kind(e.this, resolve), compile_kind(e.expression, resolve)
        op = type(e)

        def kind(kind_of: Callable[[int], ValueKind], bv: Mapping[str, Any]) -> ValueKind:
            (a, sa), (b, sb) = _numeric_kind(ka(kind_of, bv)), _numeric_kind(kb(kind_of, bv))
            if op is exp.IntDiv:
                return ("int", 0)
            if "double" in (a, b) or "string" in (a, b):
                # a DOUBLE with fixed decimals (ROUND(x, 2), PI()) keeps them when the other
                # operand's are fixed too: the larger (PI() * 2 shows 6.283185), + 4 for "/"
                if "string" in (a, b) or (a == "double" and not sa) or (b == "double" and not sb):
                    return ("double", 0)
                return ("double", min(sa + 4 if op is exp.Div else max(sa, sb), 30))
            if op is exp.Div:
                return ("decimal", min(sa + 4, 30))
            if op is exp.Mul:
                return ("decimal", sa + sb) if "decimal" in (a, b) else ("int", 0)
            return ("decimal", max(sa, sb)) if "decimal" in (a, b) else ("int", 0)

        return kind
    if isinstance(e, _PREDICATES):
        return lambda kind_of, bv: INT
    raise unsupported(f"expression computed at the proxy: {e.sql(dialect=DIALECT)}")
