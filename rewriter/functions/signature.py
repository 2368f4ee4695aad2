"""What a function of the evaluator is: how to compile a call into ``fn(row, bindvars)``
and how to tell the call's MySQL result type (``ValueKind``) from its arguments' types.

Kinds: ``int``, ``decimal`` (with its scale), ``double``, ``string``, ``date``,
``datetime`` and ``time`` (with fractional digits), ``null`` (the NULL literal: takes the
other operands' type).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlglot import exp

from rewriter.dialect import DIALECT
from rewriter.errors import unsupported
from rewriter.nodes import ValueKind

Fn = Callable[[list[Any], Mapping[str, Any]], Any]
KindOf = Callable[[int], ValueKind]
KindFn = Callable[[KindOf, Mapping[str, Any]], ValueKind]
Resolve = Callable[[exp.Expression], int | None]
Compile = Callable[[exp.Expression], Fn]
CompileKind = Callable[[exp.Expression], KindFn]

INT: ValueKind = ("int", 0)
DOUBLE: ValueKind = ("double", 0)
STRING: ValueKind = ("string", 0)
DATE: ValueKind = ("date", 0)
TEMPORAL_KINDS = frozenset({"date", "datetime", "time"})


@dataclass(frozen=True, slots=True)
class Function:
    """One SQL function (or operator form) the evaluator computes."""

    value: Callable[[exp.Expression, Compile], Fn]
    kind: Callable[[exp.Expression, CompileKind], KindFn]


def refuse(e: exp.Expression, why: str = "") -> Exception:
    return unsupported(f"expression evaluated at the proxy: {e.sql(dialect=DIALECT)}{why}")


def constant(e: exp.Expression, node: exp.Expression, what: str) -> Callable[[Mapping[str, Any]], Any]:
    """An argument that must be a constant (a function's result type depends on it): a
    literal, or the bind variable the normalizer made of one (its value at execution)."""
    negative = isinstance(node, exp.Neg)
    inner = node.this if negative else node
    if isinstance(inner, exp.Placeholder):
        name = inner.name
        return (lambda bv: -bv[name]) if negative else (lambda bv: bv[name])
    if isinstance(inner, exp.Literal):
        value: Any = inner.this if inner.is_string else _number_literal(inner.this)
        if negative:
            if isinstance(value, str):
                raise refuse(e, f" ({what} must be a constant)")
            value = -value
        return lambda bv: value
    raise refuse(e, f" ({what} must be a constant)")


def _number_literal(text: str) -> Any:
    if text.isdigit():
        return int(text)
    return float(text) if "e" in text.lower() else Decimal(text)


def strict(args: Sequence[Fn], impl: Callable[..., Any]) -> Fn:
    """A call that is NULL when any argument is NULL, else ``impl(*values)``."""
    if len(args) == 1:
        (f,) = args

        def one(row: list[Any], bv: Mapping[str, Any]) -> Any:
            v = f(row, bv)
            return None if v is None else impl(v)

        return one
    if len(args) == 2:
        fa, fb = args

        def two(row: list[Any], bv: Mapping[str, Any]) -> Any:
            a = fa(row, bv)
            if a is None:
                return None
            b = fb(row, bv)
            return None if b is None else impl(a, b)

        return two

    def many(row: list[Any], bv: Mapping[str, Any]) -> Any:
        values = [f(row, bv) for f in args]
        return None if any(v is None for v in values) else impl(*values)

    return many


def fixed(kind: ValueKind) -> Callable[[exp.Expression, CompileKind], KindFn]:
    """A function whose result type does not depend on its arguments."""
    return lambda e, k: lambda kind_of, bv: kind


def same_as(arg: str = "this") -> Callable[[exp.Expression, CompileKind], KindFn]:
    """A result of the type of one argument (a string argument read as a number: DOUBLE)."""

    def kind(e: exp.Expression, k: CompileKind) -> KindFn:
        ka = k(e.args[arg])

        def of(kind_of: KindOf, bv: Mapping[str, Any]) -> ValueKind:
            name, scale = ka(kind_of, bv)
            if name in ("int", "decimal", "double"):
                return name, scale
            if name == "null":
                return INT
            if name in TEMPORAL_KINDS:
                return ("decimal", scale) if scale else INT
            return DOUBLE

        return of

    return kind


def merge_kinds(kinds: Sequence[ValueKind]) -> ValueKind:
    """The type of a result that is one of several values (CASE, IF, COALESCE, GREATEST):
    MySQL's type aggregation. NULL takes the others' type; one temporal type stays itself
    (DATE with DATETIME is DATETIME); any string or a temporal type mixed with anything
    else is a string; else DOUBLE over DECIMAL over integer."""
    real = [k for k in kinds if k[0] != "null"]
    if not real:
        return STRING
    names = {k[0] for k in real}
    scale = max(k[1] for k in real)
    if names <= TEMPORAL_KINDS:
        if len(names) == 1:
            return real[0][0], scale
        if names == {"date", "datetime"}:
            return "datetime", scale
        return STRING
    if "string" in names or names & TEMPORAL_KINDS:
        return STRING
    if "double" in names:
        return DOUBLE
    if "decimal" in names:
        return "decimal", scale
    return INT


def merged(exprs: Callable[[exp.Expression], Sequence[exp.Expression]]) -> Callable[[exp.Expression, CompileKind],
                                                                                        KindFn]:
    """The merged type of the result-carrying arguments ``exprs(e)`` picks."""

    def kind(e: exp.Expression, k: CompileKind) -> KindFn:
        parts = [k(x) for x in exprs(e)]
        return lambda kind_of, bv: merge_kinds([p(kind_of, bv) for p in parts])

    return kind
