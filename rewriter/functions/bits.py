"""Bit operators: ``&``, ``|``, ``^``, ``~``, ``<<``, ``>>``.

MySQL's rules: the operands are read as 64-bit unsigned integers (a negative integer wraps
modulo 2^64, a DECIMAL, a DOUBLE or a string's number is rounded half away from zero to an
integer first), the result is a BIGINT UNSIGNED; a shift by 64 or more gives 0; NULL in any
operand gives NULL.
"""

from __future__ import annotations

import decimal
import math
import operator
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sqlglot import exp

from rewriter.functions.signature import INT, Compile, Fn, Function, fixed, strict
from rewriter.functions.values import as_number

_MASK = (1 << 64) - 1


def as_uint64(v: Any) -> int:
    n = as_number(v)
    if isinstance(n, float):
        if not math.isfinite(n):
            return _MASK if n > 0 else 0
        n = int(Decimal(repr(n)).quantize(Decimal(1), rounding=decimal.ROUND_HALF_UP))  # 2.5e0 & 7 is 3
    elif isinstance(n, Decimal):
        n = int(n.quantize(Decimal(1), rounding=decimal.ROUND_HALF_UP))
    if n > _MASK:
        return _MASK  # a number beyond the range saturates
    if n < -(1 << 63):
        return 1 << 63
    return n & _MASK


def _shift(left: bool) -> Callable[[int, int], int]:
    def shift(a: int, b: int) -> int:
        if b >= 64:
            return 0
        return (a << b) & _MASK if left else a >> b

    return shift


def _binary(op: Callable[[int, int], int]) -> Callable[[exp.Expression, Compile], Fn]:
    return lambda e, c: strict([c(e.this), c(e.expression)], lambda a, b: op(as_uint64(a), as_uint64(b)))


def _not(e: exp.Expression, c: Compile) -> Fn:
    return strict([c(e.this)], lambda v: ~as_uint64(v) & _MASK)


FUNCTIONS: dict[type[exp.Expression] | str, Function] = {
    exp.BitwiseAnd: Function(_binary(operator.and_), fixed(INT)),
    exp.BitwiseOr: Function(_binary(operator.or_), fixed(INT)),
    exp.BitwiseXor: Function(_binary(operator.xor), fixed(INT)),
    exp.BitwiseNot: Function(_not, fixed(INT)),
    exp.BitwiseLeftShift: Function(_binary(_shift(True)), fixed(INT)),
    exp.BitwiseRightShift: Function(_binary(_shift(False)), fixed(INT)),
}
