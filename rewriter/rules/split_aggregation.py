"""Rule: aggregation over a scatter Route splits in two halves (Vitess's
``splitAggregationsToLeftAndRight`` / ``pushAggregation``): each shard computes
partial aggregates of its rows, grouped and ordered by the group keys (the shard
half, inside the route's query), and the proxy merges the shards' sorted partials
(the proxy half: ``Aggregate`` Ordered or Scalar)."""

from __future__ import annotations

import dataclasses

from rewriter.operators import Aggregator, Operator, Route
from rewriter.rules.planning import Planning


def apply(op: Operator, p: Planning) -> Operator | None:
    if not isinstance(op, Aggregator) or op.pushed or not isinstance(op.input, Route):
        return None
    if p.one_shard(op.input):
        return None  # route_takes_statement: the shard aggregates alone
    return dataclasses.replace(op, pushed=True)
