"""Telling aggregation apart: which calls aggregate (MySQL's aggregate functions, also
those sqlglot parses as anonymous functions) and whether an expression aggregates in
its own scope."""

from __future__ import annotations

from sqlglot import exp

AGGREGATE_TYPES = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)

# MySQL aggregate functions sqlglot may parse as anonymous functions
AGGREGATE_NAMES = frozenset({
    "bit_and", "bit_or", "bit_xor", "std", "stddev", "stddev_pop", "stddev_samp", "var_pop",
    "var_samp", "variance", "json_arrayagg", "json_objectagg", "group_concat", "count", "sum",
    "avg", "min", "max",
})


def is_aggregate_call(node: exp.Expression) -> bool:
    if isinstance(node, exp.AggFunc):
        return True
    return isinstance(node, exp.Anonymous) and str(node.this).lower() in AGGREGATE_NAMES


def has_aggregate(e: exp.Expression) -> bool:
    """Whether ``e`` aggregates in its own scope (subqueries aggregate on their own)."""
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Window):
            # SUM(x) OVER (...) is a window, not a grouping aggregate; its arguments,
            # PARTITION BY and ORDER BY may still aggregate (SUM(SUM(x)) OVER ())
            stack.extend(c for c in node.iter_expressions() if c is not node.this)
            stack.extend(node.this.iter_expressions())
            continue
        if is_aggregate_call(node):
            return True
        for child in node.iter_expressions():
            if isinstance(child, exp.Subquery | exp.Select):
                continue
            stack.append(child)
    return False
