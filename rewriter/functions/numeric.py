"""Numeric functions: ABS, ROUND, TRUNCATE, FLOOR, CEIL/CEILING, SIGN, POW/POWER, SQRT,
EXP, LN, PI (MOD is the ``%`` operator in ``rewriter.evaluate``).

MySQL's rules: an exact argument (integer, DECIMAL) gives an exact result, rounded half
away from zero; a DOUBLE (or a string, read as a DOUBLE) is rounded as MariaDB's
``my_double_round`` does: ``rint(x * 10^d) / 10^d`` (ties to even on the scaled binary
value, so ``ROUND(2.5e0)`` is 2 but ``ROUND(1.235e0, 2)`` is 1.24). ROUND/TRUNCATE keep
the argument's type, with at most ``d`` decimals; FLOOR/CEIL of an exact value are
integers. SQRT and LN of values outside their domain are NULL; a DOUBLE result out of
range (POW(10, 400), EXP(1000), POW(0, -1)) fails the statement with MySQL's 1690 (raised
here as ``OverflowError``, answered by the engine). The decimals argument must be a constant
(the result's type depends on it).
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from sqlglot import exp

from rewriter.functions.signature import (
    DOUBLE,
    INT,
    Compile,
    CompileKind,
    Fn,
    Function,
    KindFn,
    KindOf,
    constant,
    fixed,
    same_as,
    strict,
)
from rewriter.functions.values import as_int, as_number
from rewriter.nodes import ValueKind

_DECIMAL = decimal.Context(prec=65)


def _number(v: Any) -> int | Decimal | float:
    n = as_number(v)
    return float(n) if not isinstance(n, int | Decimal | float) else n


def double_round(value: float, dec: int, truncate: bool) -> float:
    """MariaDB's ``my_double_round``."""
    if abs(dec) > 308:  # 10^dec is infinite
        return value if dec > 0 else 0.0
    tmp = 10.0 ** abs(dec)
    if dec < 0 and math.isinf(tmp):
        return 0.0
    scaled = value / tmp if dec < 0 else value * tmp
    if dec >= 0 and math.isinf(scaled):
        return value
    if truncate:
        r = float(math.floor(scaled) if value >= 0 else math.ceil(scaled))
    else:
        r = _rint(scaled)
    return r * tmp if dec < 0 else r / tmp


def _rint(x: float) -> float:
    if math.isinf(x) or math.isnan(x):
        return x
    return float(round(x))  # round-half-even, as C's rint in the default rounding mode


def round_exact(x: int | Decimal, dec: int, truncate: bool) -> int | Decimal:
    mode = decimal.ROUND_DOWN if truncate else decimal.ROUND_HALF_UP
    if isinstance(x, int):
        if dec >= 0:
            return x
        q = Decimal(1).scaleb(-dec)
        return int((Decimal(x) / q).quantize(Decimal(1), rounding=mode) * q)
    if dec >= 0:
        exponent = x.as_tuple().exponent
        if isinstance(exponent, int) and -exponent <= dec:
            return x
        return x.quantize(Decimal(1).scaleb(-dec), rounding=mode, context=_DECIMAL)
    return x.scaleb(dec).quantize(Decimal(1), rounding=mode, context=_DECIMAL).scaleb(-dec)


def _decimals(e: exp.Expression) -> Callable[[Mapping[str, Any]], int]:
    """The decimals argument of ROUND/TRUNCATE (0 when absent), a constant: the result's
    type depends on it."""
    d = e.args.get("decimals")
    if d is None:
        return lambda bv: 0
    value = constant(e, d, "the number of decimals")
    return lambda bv: as_int(value(bv)) or 0


def _rounder(truncate: bool) -> Callable[[exp.Expression, Compile], Fn]:
    def compile_(e: exp.Expression, c: Compile) -> Fn:
        decimals, f = _decimals(e), c(e.this)

        def run(row: list[Any], bv: Mapping[str, Any]) -> Any:
            v = f(row, bv)
            if v is None:
                return None
            dec = decimals(bv)
            n = _number(v)
            if isinstance(n, float):
                return double_round(n, dec, truncate)
            r = round_exact(n, dec, truncate)
            return abs(r) if r == 0 else r  # no negative zero (ROUND(-0.125) is 0)

        return run

    return compile_


def _round_kind(e: exp.Expression, k: CompileKind) -> KindFn:
    decimals = _decimals(e)
    arg = same_as()(e, k)

    def kind(kind_of: KindOf, bv: Mapping[str, Any]) -> ValueKind:
        name, scale = arg(kind_of, bv)
        dec = decimals(bv)
        if name == "double" and dec > 30:
            return DOUBLE  # 31 decimals and more: MariaDB's "not fixed"
        if name in ("decimal", "double"):
            # MariaDB shows the asked decimals: ROUND(2.500, 5) is 2.50000, ROUND(1e0, 1) 1.0
            return name, min(max(dec, 0), 30)
        return name, scale

    return kind


def _floor_ceil(floor: bool) -> Callable[[exp.Expression, Compile], Fn]:
    def run(v: Any) -> Any:
        n = _number(v)
        if isinstance(n, float):
            return float(math.floor(n) if floor else math.ceil(n)) if math.isfinite(n) else n
        if isinstance(n, int):
            return n
        return int(n.to_integral_value(rounding=decimal.ROUND_FLOOR if floor else decimal.ROUND_CEILING))

    return lambda e, c: strict([c(e.this)], run)


def _floor_kind(e: exp.Expression, k: CompileKind) -> KindFn:
    arg = same_as()(e, k)

    def kind(kind_of: KindOf, bv: Mapping[str, Any]) -> ValueKind:
        name, _ = arg(kind_of, bv)
        return DOUBLE if name == "double" else INT

    return kind


def _abs(e: exp.Expression, c: Compile) -> Fn:
    return strict([c(e.this)], lambda v: abs(_number(v)))


def _sign(e: exp.Expression, c: Compile) -> Fn:
    def sign(v: Any) -> int:
        n = _number(v)
        return (n > 0) - (n < 0)

    return strict([c(e.this)], sign)


def _double_fn(impl: Callable[..., float | None], *args: str) -> Callable[[exp.Expression, Compile], Fn]:
    def compile_(e: exp.Expression, c: Compile) -> Fn:
        def run(*values: Any) -> float | None:
            try:
                r = impl(*(float(_number(v)) for v in values))
            except (ValueError, ZeroDivisionError) as err:  # MariaDB: out of range (POW(0, -1), POW(-8, 0.5))
                raise OverflowError("DOUBLE value is out of range") from err
            if r is not None and (math.isnan(r) or math.isinf(r)):
                raise OverflowError("DOUBLE value is out of range")
            return r

        return strict([c(e.args[a]) for a in args], run)

    return compile_


def _sqrt(x: float) -> float | None:
    return math.sqrt(x) if x >= 0 else None


def _ln(x: float) -> float | None:
    return math.log(x) if x > 0 else None


FUNCTIONS: dict[type[exp.Expression] | str, Function] = {
    exp.Abs: Function(_abs, same_as()),
    exp.Round: Function(_rounder(False), _round_kind),
    exp.Trunc: Function(_rounder(True), _round_kind),
    exp.Floor: Function(_floor_ceil(True), _floor_kind),
    exp.Ceil: Function(_floor_ceil(False), _floor_kind),
    exp.Sign: Function(_sign, fixed(INT)),
    exp.Pow: Function(_double_fn(math.pow, "this", "expression"), fixed(DOUBLE)),
    exp.Sqrt: Function(_double_fn(_sqrt, "this"), fixed(DOUBLE)),
    exp.Exp: Function(_double_fn(math.exp, "this"), fixed(DOUBLE)),
    exp.Ln: Function(_double_fn(_ln, "this"), fixed(DOUBLE)),
    exp.Pi: Function(lambda e, c: lambda row, bv: math.pi, fixed(("double", 6))),  # MySQL shows 3.141593
}
