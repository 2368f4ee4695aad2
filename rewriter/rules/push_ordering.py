"""Rule: ORDER BY over a scatter goes to the shards (each sorts its rows) and the proxy
merges the sorted streams (a Route with ``order_by``); over an aggregation the proxy
sorts the merged groups (``MemorySort``)."""

from __future__ import annotations

import dataclasses

from rewriter.operators import Aggregator, Distinct, Filter, Operator, Ordering, Projection, Route
from rewriter.rules.planning import Planning


def apply(op: Operator, p: Planning) -> Operator | None:
    if not isinstance(op, Ordering) or op.pushed:
        return None
    below = op.input
    while isinstance(below, Distinct | Projection | Filter):
        below = below.input
    if isinstance(below, Aggregator) and below.pushed or isinstance(below, Route) and not p.one_shard(below):
        return dataclasses.replace(op, pushed=True)
    return None
