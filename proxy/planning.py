"""A client statement's plan: the bridge between the executor and the planner
(``rewriter``, pure), with the planner's errors as the client's."""

from __future__ import annotations

from typing import Any

import rewriter
from proxy.cluster_state import ClusterState
from proxy.errors import ProxyError
from rewriter.dialect import DIALECT
from rewriter.errors import StackOverrun
from rewriter.nodes import Plan
from vschema.model import VSchema
from vschema.tracked_schema import TrackedSchema

# The vschema and tracked schema a statement is planned with: the cluster's, or an overlay
# (topics plan with one in which each topic is a table pinned to its shard).
Catalog = tuple[VSchema, TrackedSchema]


def plan_statement(
    state: ClusterState, target: str | None, sql: str, catalog: Catalog | None = None
) -> tuple[Plan, dict[str, Any]]:
    """Plan ``sql`` for a session using ``target`` (``ks``, or ``ks:-80`` for a session
    targeting a shard: the plan then sends the statement there); ``catalog`` instead of the
    cluster's vschema and schema when given."""
    vschema, schema = catalog if catalog is not None else (state.vschema, state.schema)
    try:
        return rewriter.plan_query(sql, vschema, target, schema=schema)
    except rewriter.PlanningError as e:
        raise ProxyError(e.code, e.message) from e
    except RecursionError as e:
        # rewriter.dialect refuses statements nested deeper than the planner goes
        # before parsing them; should a walk still run out of stack, answer MySQL's
        # error for that, never an internal error
        err = StackOverrun(DIALECT.max_nesting + 1, DIALECT.max_nesting)
        raise ProxyError(err.code, err.message) from e


__all__ = ["Catalog", "plan_statement"]
