"""The function a call (a sqlglot node) names, among the families the evaluator knows."""

from __future__ import annotations

from sqlglot import exp

from rewriter.functions import bits, cast, control, numeric, strings, temporal
from rewriter.functions.signature import Function

FUNCTIONS: dict[type[exp.Expression] | str, Function] = {
    **control.FUNCTIONS, **strings.FUNCTIONS, **numeric.FUNCTIONS, **cast.FUNCTIONS, **temporal.FUNCTIONS,
    **bits.FUNCTIONS,
}


def lookup(e: exp.Expression) -> Function | None:
    """The function ``e`` calls, or ``None`` (not one the proxy evaluates)."""
    if isinstance(e, exp.Anonymous):
        return FUNCTIONS.get(str(e.this).upper())
    if isinstance(e, exp.Add | exp.Sub) and (isinstance(e.expression, exp.Interval)
                                             or isinstance(e.this, exp.Interval)):
        return temporal.INTERVAL_ARITHMETIC
    return FUNCTIONS.get(type(e))
