"""Planning a read (SELECT, set operations): the one entry for every caller.

Every statement goes one way: its logical operator tree (``operator_builder``:
a Route carrying the whole statement when all of it stays on one route, whatever it
contains), rewritten by the rules (``rules``), emitted as engine primitives
(``to_primitives``). What the operators do not express across shards — and ROLLUP or
window functions kept correct only on one whole route — is finished by ``Compute``
(``compute_planner``), exactly as one MySQL would.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter import errors
from rewriter.compute_planner import plan_compute
from rewriter.context import PlanContext
from rewriter.errors import unsupported
from rewriter.nodes import Plan, Route, VindexLookup, Window
from rewriter.operator_builder import whole_statement
from rewriter.operator_planner import logical_plan
from rewriter.operators import Route as OperatorRoute
from rewriter.rules.planning import Planning
from rewriter.semantics import check_set_operation_widths, qualify_correlated_columns
from rewriter.to_primitives import to_primitives
from rewriter.window_pushdown import windows_within_shards


def plan_read(stmt: exp.Expression, ctx: PlanContext) -> Plan:
    check_set_operation_widths(stmt)
    return _plan(stmt, ctx, compute=True)


def plan_part(stmt: exp.Expression, ctx: PlanContext) -> Plan:
    """A statement that primitives run on their own (a pulled-out subquery, a UNION
    arm, a derived table's query): planned as ``plan_read`` plans, but refused
    (``Unsupported``) where only Compute would answer it, so the enclosing statement is
    computed whole instead."""
    return _plan(stmt, ctx, compute=False)


def _compute(stmt: exp.Expression, ctx: PlanContext, compute: bool) -> Plan:
    if not compute:
        raise unsupported("subquery, UNION arm or derived table across shards")
    return plan_compute(stmt, ctx)


def _plan(stmt: exp.Expression, ctx: PlanContext, *, compute: bool) -> Plan:
    while isinstance(stmt, exp.Subquery) and not stmt.alias:
        stmt = stmt.this  # ``(SELECT ...)``: the statement in the parentheses
    if any(True for _ in stmt.find_all(exp.CTE)):
        pristine = stmt.copy()
        try:
            logical = logical_plan(stmt, ctx, plan_part)
            planned = to_primitives(logical[0], stmt, logical[1]) if logical is not None else None
        except errors.PlanningError as e:
            if not _computable_refusal(e):
                raise
            planned = None
        return planned if planned is not None else _compute(pristine, ctx, compute)
    qualify_correlated_columns(stmt, ctx)
    try:
        logical = logical_plan(stmt, ctx, plan_part)  # leaves stmt as it is
    except errors.PlanningError as e:
        if not _computable_refusal(e):
            raise
        return _compute(stmt, ctx, compute)
    if logical is not None and isinstance(logical[0], OperatorRoute) and "whole" not in logical[0].absorbed:
        # one route takes the statement: emitting it cannot be refused, so no copy
        # is kept for Compute (a deep copy is ~20% of planning a point select); a
        # whole statement over a scatter may be (its layout refuses what shards
        # cannot combine)
        planned = to_primitives(logical[0], stmt, logical[1])
        if planned is not None:
            return planned
    pristine = stmt.copy()
    try:
        planned = to_primitives(logical[0], stmt, logical[1]) if logical is not None else None
        if planned is None and logical is not None:
            # an operator without a primitive here: the statement whole on one route
            whole = whole_statement(stmt, ctx)
            if whole is not None:
                planned = to_primitives(whole, stmt, Planning(ctx, plan_part))
    except errors.PlanningError as e:
        if not _computable_refusal(e):
            raise
        return _compute(pristine, ctx, compute)
    if planned is None:
        return _compute(pristine, ctx, compute)
    if _whole_route_only(pristine) and not isinstance(planned, Route | VindexLookup) \
            and not _windows_at_proxy(planned) and not windows_within_shards(pristine, ctx):
        return _compute(pristine, ctx, compute)
    return planned


def _whole_route_only(stmt: exp.Expression) -> bool:
    """Constructs the scatter layouts only handle when the statement goes to one route
    whole (ROLLUP rows and window functions need all rows together)."""
    return any(isinstance(node, exp.Window | exp.Rollup) for node in stmt.walk())


def _windows_at_proxy(plan: Plan) -> bool:
    """Whether ``plan`` computes its window functions at the proxy (``window_planner``:
    a chain of one-input primitives over a Window)."""
    node: object = plan
    while not isinstance(node, Window):
        node = getattr(node, "input", None)
        if node is None:
            return False
    return True


def _computable_refusal(e: errors.PlanningError) -> bool:
    """A refusal of the operators' layouts that Compute may answer: a construct they
    cannot split across shards, or a column they could not place."""
    return isinstance(e, errors.Unsupported) or e.message.startswith("Column '")
