"""Rule: a Route that reaches at most one shard takes every operator above it (Vitess
pushes aggregation, projection, DISTINCT, ORDER BY and LIMIT into a single-shard
route): that shard computes the whole statement. Over a scatter Route only the
select list goes down whole (each row's values come from one shard); what combines
rows across shards stays for the other rules (``split_aggregation``,
``push_ordering``, ``push_limit``)."""

from __future__ import annotations

import dataclasses

from rewriter.operators import Aggregator, Distinct, Limit, Operator, Ordering, Projection, Route
from rewriter.rules.planning import Planning

_CLAUSE = {Aggregator: "group", Projection: "select", Distinct: "distinct", Ordering: "order", Limit: "limit"}


def apply(op: Operator, p: Planning) -> Operator | None:
    clause = _CLAUSE.get(type(op))
    if clause is None:
        return None
    route = op.input  # type: ignore[attr-defined]
    if not isinstance(route, Route):
        return None
    if not (p.one_shard(route) or (clause == "select" and "group" not in route.absorbed)):
        return None
    return dataclasses.replace(route, absorbed=route.absorbed | {clause})
