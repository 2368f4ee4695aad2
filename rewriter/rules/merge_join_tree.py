"""Rule: inner joins of several tables merge regardless of their written order
(Vitess's ``greedySolve`` over a join's tables): a tree of inner ApplyJoins over Routes
is flattened into its Routes and predicates, any two Routes tied by a predicate
(``merge_joins``'s conditions) merge, repeatedly, and the Routes left are joined again
in their FROM order, each predicate on the first join that has all its tables.
``a JOIN b ON a.x = b.y JOIN c ON c.id = a.id AND c.id = b.id`` is one route when
``id`` is the vindex column of all three, though ``a`` and ``b`` are not tied alone."""

from __future__ import annotations

from sqlglot import exp

from rewriter.operators import ApplyJoin, Operator, Route
from rewriter.rules import merge_joins
from rewriter.rules.planning import Planning, tables_of


def apply(op: Operator, p: Planning) -> Operator | None:
    if not isinstance(op, ApplyJoin) or op.outer or not isinstance(op.left, ApplyJoin):
        return None
    routes: list[Route] = []
    preds: list[exp.Expression] = []
    if not _flatten(op, routes, preds):
        return None
    merged = False
    progress = True
    while progress and len(routes) > 1:
        progress = False
        for i in range(len(routes)):
            for j in range(i + 1, len(routes)):
                m = merge_joins.apply(ApplyJoin(routes[i], routes[j], tuple(preds)), p)
                if m is None:
                    continue
                assert isinstance(m, Route)
                routes[i] = _with_own_predicates(m, routes[i], routes[j], preds)
                del routes[j]
                merged = progress = True
                break
            if progress:
                break
    if not merged:
        return None
    return _rejoin(routes, preds)


def _flatten(op: Operator, routes: list[Route], preds: list[exp.Expression]) -> bool:
    if isinstance(op, Route):
        routes.append(op)
        return True
    if isinstance(op, ApplyJoin) and not op.outer:
        preds.extend(op.predicates)
        return _flatten(op.left, routes, preds) and _flatten(op.right, routes, preds)
    return False


def _covered(pred: exp.Expression, route: Route) -> bool:
    aliases = {t.alias for t in route.tables}
    cols = list(pred.find_all(exp.Column))
    return bool(cols) and all(c.table in aliases for c in cols)


def _with_own_predicates(merged: Route, a: Route, b: Route, preds: list[exp.Expression]) -> Route:
    """``merged`` (built with every join predicate as its own) keeps only the
    predicates over its tables; they leave the list of those still to place."""
    own = [q for q in preds if _covered(q, merged)]
    for q in own:
        preds.remove(q)
    return Route(merged.keyspace, merged.sharded, merged.tables, a.predicates + b.predicates + tuple(own),
                 merged.absorbed)


def _rejoin(routes: list[Route], preds: list[exp.Expression]) -> Operator:
    if len(routes) == 1:
        r = routes[0]
        return Route(r.keyspace, r.sharded, r.tables, r.predicates + tuple(preds), r.absorbed)
    op: Operator = routes[0]
    left_tables = tables_of(op)
    pending = list(preds)
    for r in routes[1:]:
        left_tables = left_tables + list(r.tables)
        aliases = {t.alias for t in left_tables}
        here = [q for q in pending if all(c.table in aliases for c in q.find_all(exp.Column))]
        for q in here:
            pending.remove(q)
        if r is routes[-1]:
            here += pending
        op = ApplyJoin(op, r, tuple(here))
    return op
