"""Control-flow functions: CASE (both forms), IF, IFNULL/COALESCE, NULLIF, GREATEST/LEAST.

MySQL's rules: a condition is true when it is a non-zero number (NULL and 0 are not);
``CASE x WHEN v`` compares as ``x = v`` (NULL never matches); COALESCE (IFNULL is read as
COALESCE) returns the first non-NULL argument; NULLIF(a, b) is NULL when ``a = b``;
GREATEST/LEAST are NULL if any argument is, compare numbers as numbers, strings with
the collation, a temporal value with strings as that temporal type, and numbers with
strings as numbers. The result type is the arguments' merged type
(``signature.merge_kinds``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from rewriter.functions.signature import (
    TEMPORAL_KINDS,
    Compile,
    CompileKind,
    Fn,
    Function,
    KindFn,
    KindOf,
    merge_kinds,
    merged,
)
from rewriter.functions.values import TEMPORAL, as_number, comparable, is_number, truthy
from rewriter.nodes import ValueKind


def _case(e: exp.Expression, c: Compile) -> Fn:
    subject = c(e.this) if e.this is not None else None
    arms = [(c(i.this), c(i.args["true"])) for i in e.args["ifs"]]
    default = c(e.args["default"]) if e.args.get("default") is not None else None

    def case(row: list[Any], bv: Mapping[str, Any]) -> Any:
        x = subject(row, bv) if subject is not None else None
        for when, then in arms:
            w = when(row, bv)
            if subject is None:
                hit = truthy(w) is True
            else:
                hit = x is not None and w is not None and (lambda p: p[0] == p[1])(comparable(x, w))
            if hit:
                return then(row, bv)
        return default(row, bv) if default is not None else None

    return case


def _case_results(e: exp.Expression) -> list[exp.Expression]:
    out = [i.args["true"] for i in e.args["ifs"]]
    return [*out, e.args["default"]] if e.args.get("default") is not None else [*out, exp.Null()]


def _if(e: exp.Expression, c: Compile) -> Fn:
    cond, yes = c(e.this), c(e.args["true"])
    no = c(e.args["false"]) if e.args.get("false") is not None else (lambda row, bv: None)
    return lambda row, bv: yes(row, bv) if truthy(cond(row, bv)) is True else no(row, bv)


def _if_results(e: exp.Expression) -> list[exp.Expression]:
    return [e.args["true"], e.args.get("false") or exp.Null()]


def _coalesce(e: exp.Expression, c: Compile) -> Fn:
    args = [c(x) for x in [e.this, *e.expressions]]

    def coalesce(row: list[Any], bv: Mapping[str, Any]) -> Any:
        for f in args:
            v = f(row, bv)
            if v is not None:
                return v
        return None

    return coalesce


def _nullif(e: exp.Expression, c: Compile) -> Fn:
    fa, fb = c(e.this), c(e.expression)

    def nullif(row: list[Any], bv: Mapping[str, Any]) -> Any:
        a = fa(row, bv)
        if a is None:
            return None
        b = fb(row, bv)
        if b is not None:
            x, y = comparable(a, b)
            if x == y:
                return None
        return a

    return nullif


def _nullif_kind(e: exp.Expression, k: CompileKind) -> KindFn:
    ka = k(e.this)
    return lambda kind_of, bv: merge_kinds([ka(kind_of, bv)])


def _extreme(want_greatest: bool) -> Any:
    def compile_(e: exp.Expression, c: Compile) -> Fn:
        args = [c(x) for x in [e.this, *e.expressions]]

        def extreme(row: list[Any], bv: Mapping[str, Any]) -> Any:
            values = [f(row, bv) for f in args]
            if any(v is None for v in values):
                return None
            numeric = any(is_number(v) for v in values) and not any(isinstance(v, TEMPORAL) for v in values)
            if numeric and not all(is_number(v) for v in values):
                values = [float(as_number(v)) for v in values]  # numbers with strings: as DOUBLE
            best = values[0]
            for v in values[1:]:
                x, y = comparable(v, best)
                if (x > y) if want_greatest else (x < y):
                    best = v
            return best

        return extreme

    return compile_


def _extreme_kind(e: exp.Expression, k: CompileKind) -> KindFn:
    parts = [k(x) for x in [e.this, *e.expressions]]

    def kind(kind_of: KindOf, bv: Mapping[str, Any]) -> ValueKind:
        kinds = [p(kind_of, bv) for p in parts]
        names = {n for n, _ in kinds}
        if "string" in names and names & {"int", "decimal", "double"}:
            return ("double", 0)  # compared, and returned, as numbers
        temporal = names & TEMPORAL_KINDS
        if temporal and names <= TEMPORAL_KINDS | {"string", "null"}:
            return merge_kinds([k for k in kinds if k[0] in TEMPORAL_KINDS])  # strings read as that type
        merged_kind = merge_kinds(kinds)
        if "null" in names and merged_kind[0] in ("int", "decimal", "double"):
            return ("double", merged_kind[1])  # MariaDB types GREATEST(1.5, NULL) as DOUBLE(18,1)
        return merged_kind

    return kind


FUNCTIONS: dict[type[exp.Expression] | str, Function] = {
    exp.Case: Function(_case, merged(_case_results)),
    exp.If: Function(_if, merged(_if_results)),
    exp.Coalesce: Function(_coalesce, merged(lambda e: [e.this, *e.expressions])),
    exp.Nullif: Function(_nullif, _nullif_kind),
    exp.Greatest: Function(_extreme(True), _extreme_kind),
    exp.Least: Function(_extreme(False), _extreme_kind),
}
