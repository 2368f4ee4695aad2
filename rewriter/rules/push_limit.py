"""Rule: LIMIT over a scatter: each shard returns at most offset+count rows (in the
pushed order) and the proxy applies the real limit over the merged stream."""

from __future__ import annotations

import dataclasses

from rewriter.operators import (
    Aggregator,
    Distinct,
    Filter,
    Limit,
    Operator,
    Ordering,
    Projection,
    Route,
)
from rewriter.rules.planning import Planning


def apply(op: Operator, p: Planning) -> Operator | None:
    if not isinstance(op, Limit) or op.pushed:
        return None
    below = op.input
    if isinstance(below, Ordering) and not below.pushed:
        return None
    while isinstance(below, Ordering | Distinct | Projection | Filter):
        below = below.input
    if isinstance(below, Aggregator) and below.pushed or isinstance(below, Route) and not p.one_shard(below):
        return dataclasses.replace(op, pushed=True)
    return None
