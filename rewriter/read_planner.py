"""Planning a read (SELECT, set operations): the one entry for every caller.

The route planners (``select_planner``, ``join_planner``, ``subquery_planner``) go
first: they push whole statements to one route, split aggregation between shards and
proxy, and join with nested loops. What they refuse — and ROLLUP or window functions
they could only keep correct on one whole route — is finished by ``Compute``
(``compute_planner``), exactly as one MySQL would.
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from rewriter import errors
from rewriter.compute_planner import plan_compute
from rewriter.context import PlanContext, to_sql
from rewriter.cte_inlining import inline_ctes
from rewriter.nodes import SINGLE_SHARD, Plan, Route, VindexLookup, Window
from rewriter.operator_planner import logical_plan, plan_with_operators
from rewriter.operators import Route as OperatorRoute
from rewriter.route_primitive import field_query_of
from rewriter.select_planner import plan_select
from rewriter.semantics import check_set_operation_widths, qualify_correlated_columns
from rewriter.sqltemplate import parse_template
from rewriter.to_primitives import to_primitives
from rewriter.window_pushdown import windows_within_shards


def plan_read(stmt: exp.Expression, ctx: PlanContext) -> Plan:
    check_set_operation_widths(stmt)
    if any(True for _ in stmt.find_all(exp.CTE)):
        pristine = stmt.copy()
        try:
            planned = plan_with_operators(stmt, ctx)
        except errors.PlanningError as e:
            if not _computable_refusal(e):
                raise
            planned = None
        if planned is not None:
            return planned
        # sent whole when every table it reads is on one unsharded keyspace (or a
        # reference table, or none at all); else the CTEs are computed
        if isinstance(stmt, exp.Select):
            try:
                planned = plan_select(stmt, ctx)
            except errors.PlanningError as e:
                if not _computable_refusal(e):
                    raise
            else:
                if isinstance(planned, Route) and planned.opcode in SINGLE_SHARD:
                    return planned
            whole = _cte_statement_on_one_shard(pristine, ctx)  # type: ignore[arg-type]  # pristine is the Select checked above
            if whole is not None:
                return whole
        return plan_compute(pristine, ctx)
    qualify_correlated_columns(stmt, ctx)
    try:
        logical = logical_plan(stmt, ctx)  # leaves stmt as it is
    except errors.PlanningError as e:
        if not _computable_refusal(e):
            raise
        return plan_compute(stmt, ctx)
    if logical is not None and isinstance(logical[0], OperatorRoute):
        # one route takes the statement: emitting it cannot be refused, so no copy
        # is kept for Compute (a deep copy is ~20% of planning a point select)
        planned = to_primitives(logical[0], stmt, logical[1])
        if planned is not None:
            return planned
    pristine = stmt.copy()
    try:
        planned = (to_primitives(logical[0], stmt, logical[1]) if logical is not None else None) \
            or plan_select(stmt, ctx)
    except errors.PlanningError as e:
        if not _computable_refusal(e):
            raise
        return plan_compute(pristine, ctx)
    if _whole_route_only(pristine) and not isinstance(planned, Route | VindexLookup) \
            and not _windows_at_proxy(planned) and not windows_within_shards(pristine, ctx):
        return plan_compute(pristine, ctx)
    return planned


def _cte_statement_on_one_shard(stmt: exp.Select, ctx: PlanContext) -> Route | None:
    """The WITH statement sent whole to the one shard its CTEs, inlined, route to
    (rewriter.cte_inlining); None when they span shards."""
    inlined = inline_ctes(stmt)
    if inlined is None:
        return None
    try:
        planned = plan_select(inlined, dataclasses.replace(ctx, source=""))
    except errors.PlanningError:
        return None
    if not isinstance(planned, Route) or planned.opcode not in SINGLE_SHARD:
        return None
    original = stmt.copy()
    keyspaces = set(ctx.vschema.keyspaces)
    for t in original.find_all(exp.Table):
        if t.args.get("db") is not None and t.args["db"].name in keyspaces:
            t.set("db", None)  # a shard names its own database
    return dataclasses.replace(planned, query=parse_template(to_sql(original)),
                               field_query=field_query_of(original))


def _whole_route_only(stmt: exp.Expression) -> bool:
    """Constructs the route planners only handle when the statement goes to one route
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
    """A refusal of the route planners that Compute may answer: a construct they
    cannot split across shards, or a column they could not place."""
    return isinstance(e, errors.Unsupported) or e.message.startswith("Column '")
