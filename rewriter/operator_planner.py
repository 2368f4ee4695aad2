"""Planning a SELECT through the logical operators: build the initial tree
(``operator_builder``), rewrite it to a fixpoint (``rules``), emit primitives
(``to_primitives``). Answers None for what it does not plan; the caller then computes
the statement at the proxy (``compute_planner``)."""

from __future__ import annotations

from sqlglot import exp

from rewriter.context import PlanContext
from rewriter.nodes import Plan
from rewriter.operator_builder import build
from rewriter.operators import Operator
from rewriter.rules import rewrite
from rewriter.rules.planning import Planning, StatementPlanner
from rewriter.to_primitives import to_primitives


def logical_plan(stmt: exp.Expression, ctx: PlanContext,
                 plan_statement: StatementPlanner | None = None) -> tuple[Operator, Planning] | None:
    """The rewritten operator tree of ``stmt`` (``stmt`` is not changed), or None.
    ``plan_statement`` plans the statements primitives run on their own (pulled-out
    subqueries, UNION arms, derived tables)."""
    op = build(stmt, ctx)
    if op is None:
        return None
    planning = Planning(ctx, plan_statement)
    return rewrite(op, planning), planning


def plan_with_operators(stmt: exp.Expression, ctx: PlanContext,
                        plan_statement: StatementPlanner | None = None) -> Plan | None:
    logical = logical_plan(stmt, ctx, plan_statement)
    return to_primitives(logical[0], stmt, logical[1]) if logical is not None else None
