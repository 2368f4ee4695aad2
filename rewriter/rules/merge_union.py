"""Rule: the arms of a UNION that go to the same single place merge into one Route
sending the UNION whole (Vitess's ``tryMergeUnionShardedRouting`` and unsharded
merging): arms of one unsharded keyspace (with system tables), arms reading only
reference tables of one keyspace, or arms routed EqualUnique to the same value of
the same vindex (one shard: it computes the UNION, DISTINCT included)."""

from __future__ import annotations

from rewriter.nodes import Opcode
from rewriter.operators import Operator, Route, Union
from rewriter.routing import RouteInfo
from rewriter.rules.planning import Planning


def apply(op: Operator, p: Planning) -> Operator | None:
    if not isinstance(op, Union) or not all(isinstance(s, Route) and s.absorbed for s in op.sources):
        return None
    routes: list[Route] = list(op.sources)  # type: ignore[arg-type]
    infos = [p.routing(r) for r in routes]
    kinds = {i.opcode for i in infos}
    tables = tuple(t for r in routes for t in r.tables)
    absorbed = frozenset().union(*(r.absorbed for r in routes))
    if kinds <= {Opcode.Unsharded, Opcode.DBA}:
        user = {r.keyspace for r in routes if not r.system_only}
        if len(user) > 1:
            return None
        keyspace = user.pop() if user else routes[0].keyspace
        sharded = False if kinds & {Opcode.Unsharded} else routes[0].sharded
        return Route(keyspace, sharded, tables, absorbed=absorbed)
    if len({r.keyspace for r in routes}) != 1:
        return None
    if kinds == {Opcode.Reference}:
        return Route(routes[0].keyspace, routes[0].sharded, tables, absorbed=absorbed)
    if kinds == {Opcode.EqualUnique} and _same_vindex_value(infos):
        first = infos[0]
        fixed = RouteInfo(first.opcode, first.keyspace, True, choice=first.choice, tables=list(tables))
        return Route(routes[0].keyspace, True, tables, absorbed=absorbed, fixed=fixed)
    return None


def _same_vindex_value(infos: list[RouteInfo]) -> bool:
    """One value (same type: 1 and TRUE compare equal in Python, not in a vindex) of
    the same vindex of the keyspace, not a lookup: the same shard for every arm."""
    choices = [i.choice for i in infos]
    if any(c is None or c.needs_lookup or len(c.values) != 1 for c in choices):
        return False
    first = choices[0].values[0]  # type: ignore[union-attr]
    return all(c.vindex_name == choices[0].vindex_name  # type: ignore[union-attr]
               and c.values[0] == first and type(c.values[0].const) is type(first.const)  # type: ignore[union-attr]
               for c in choices)
