"""Rule: window functions over a scatter go to the shards when every ``PARTITION BY``
holds the table's unique vindex column (each partition lies whole on one shard), as
Vitess pushes them (``window_pushdown.windows_within_shards`` says when). Otherwise
the Window stays at the proxy (``to_primitives``: ``window_planner``, or Compute for
what it has no primitive for)."""

from __future__ import annotations

import dataclasses

from rewriter.operators import Operator, Route, Window
from rewriter.rules.planning import Planning
from rewriter.window_pushdown import windows_within_shards


def apply(op: Operator, p: Planning) -> Operator | None:
    if not isinstance(op, Window) or not isinstance(op.input, Route):
        return None
    route = op.input
    if p.one_shard(route) or windows_within_shards(op.statement, p.ctx):
        return dataclasses.replace(route, absorbed=route.absorbed | {"window"})
    return None
