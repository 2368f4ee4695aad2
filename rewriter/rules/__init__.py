"""Rewrite rules over the logical operator tree (``rewriter.operators``), one module
per rule in the style of sqlglot's ``optimizer/``; ``rewrite`` applies them bottom up
until no rule changes anything (Vitess's ``runRewriters`` to a fixpoint).

A rule is ``apply(op, planning) -> Operator | None``: the replacement of ``op`` or
None when it does not apply. Rules never mutate an operator.
"""

from __future__ import annotations

from collections.abc import Callable

from rewriter.errors import PlanningError
from rewriter.operators import (
    Aggregator,
    ApplyJoin,
    Derived,
    Distinct,
    Filter,
    Limit,
    Operator,
    Ordering,
    Projection,
    SubQuery,
    Union,
    Window,
)
from rewriter.rules import (
    merge_derived,
    merge_join_tree,
    merge_joins,
    merge_subquery,
    merge_union,
    push_filter,
    push_limit,
    push_ordering,
    push_window,
    route_takes_statement,
    split_aggregation,
)
from rewriter.rules.planning import Planning

Rule = Callable[[Operator, Planning], Operator | None]

# Each rule with the operator types it rewrites (a node is offered only its rules:
# planning a point select runs the driver on every statement that misses the cache).
RULES: tuple[tuple[tuple[type[Operator], ...], Rule], ...] = (
    ((Filter,), push_filter.apply),
    ((ApplyJoin,), merge_joins.apply),
    ((ApplyJoin,), merge_join_tree.apply),
    ((Union,), merge_union.apply),
    ((Derived,), merge_derived.apply),
    ((SubQuery,), merge_subquery.apply),
    ((Aggregator, Projection, Distinct, Ordering, Limit), route_takes_statement.apply),
    ((Aggregator,), split_aggregation.apply),
    ((Window,), push_window.apply),
    ((Ordering,), push_ordering.apply),
    ((Limit,), push_limit.apply),
)
_BY_TYPE: dict[type[Operator], tuple[Rule, ...]] = {
    t: tuple(rule for types, rule in RULES if t in types) for types, _ in RULES for t in types}

# Each pass rewrites at least one node or ends; a tree of n operators settles in a few
# passes. The cap only guards against two rules undoing each other.
MAX_PASSES = 100


def rewrite(op: Operator, planning: Planning) -> Operator:
    """``op`` with every rule applied until none applies."""
    for _ in range(MAX_PASSES):
        op, changed = _pass(op, planning)
        if not changed:
            return op
    raise PlanningError(f"the operator rewrite rules did not settle in {MAX_PASSES} passes")


def _pass(op: Operator, planning: Planning) -> tuple[Operator, bool]:
    changed = False
    inputs = op.inputs()
    if inputs:
        new_inputs = []
        for i in inputs:
            n, c = _pass(i, planning)
            new_inputs.append(n)
            changed |= c
        if changed:
            op = op.with_inputs(tuple(new_inputs))
    for rule in _BY_TYPE.get(type(op), ()):
        out = rule(op, planning)
        if out is not None:
            op = out
            changed = True
            if type(op) not in _BY_TYPE:
                break
    return op, changed
