"""Rule: a WHERE subquery merges into the outer Route when every row it reads is on
the shards the outer rows are (Vitess's ``tryMergeSubqueryWithOuter``): all tables
of one unsharded keyspace (system tables alongside), a subquery reading only
reference tables of the outer keyspace (or no table), or
``outer.v IN (SELECT inner.v FROM inner ...)`` where ``v`` is both tables' primary
vindex column of the same vindex (each outer row's candidates live on its shard).
Correlated ones too, when the subquery's WHERE equates its table's vindex column
with the outer table's (``o.customer_id = c.customer_id``, Vitess's example).
The merged Route keeps the outer route's routing. Otherwise the SubQuery stays: it
is pulled out (run first, its values bound into the outer query)."""

from __future__ import annotations

from sqlglot import exp

from rewriter.operators import Operator, Route, SubQuery
from rewriter.routing import RouteInfo, column_table, conjuncts, vindex_identity
from rewriter.rules.planning import Planning, tables_of
from rewriter.tables import TableRef


def apply(op: Operator, p: Planning) -> Operator | None:
    if not isinstance(op, SubQuery) or not isinstance(op.outer, Route):
        return None
    outer = op.outer
    inner = tables_of(op.inner)
    tables = outer.tables + tuple(inner)
    if all(t.system for t in tables) or not tables:
        return Route(outer.keyspace, outer.sharded, tables, outer.predicates, outer.absorbed)
    user = [t for t in tables if not t.system]
    if len({t.keyspace for t in user}) != 1:
        return None
    if any(t.system for t in tables) or not user[0].sharded:
        return None if user[0].sharded else Route(user[0].keyspace, False, tables, outer.predicates,
                                                   outer.absorbed)
    vindexed_inner = [t for t in inner if not t.is_reference]
    if vindexed_inner and any(True for _ in _statement(op.predicate).find_all(exp.Subquery, exp.Exists)):
        # a subquery with subqueries of its own (operator_builder pulls it out): the
        # anchoring below reads only its own scope, so its nested sharded tables
        # would be read on one shard (whole_route.single_route judged the statement)
        return None
    anchors = outer.vindexed_tables()
    if not all(_correlated_on_vindex(op.predicate, t, inner, anchors) or _in_on_vindex(op.predicate, t, inner, anchors)
               for t in vindexed_inner):
        return None
    if not outer.vindexed_tables():
        return None if vindexed_inner else Route(outer.keyspace, True, tables, outer.predicates, outer.absorbed)
    info = p.routing(outer)
    fixed = RouteInfo(info.opcode, info.keyspace, True, choice=info.choice, tables=list(tables),
                      target_ksid=info.target_ksid)
    return Route(outer.keyspace, True, tables, outer.predicates, outer.absorbed, fixed=fixed)


def _in_on_vindex(pred: exp.Expression, ref: TableRef, own: list[TableRef], outer: list[TableRef]) -> bool:
    """``o.v IN (SELECT r.v ...)``, not negated, ``v`` the primary vindex column of
    ``o`` (an outer table, named by its alias) and of ``r``, the same vindex."""
    if not isinstance(pred, exp.In) or isinstance(pred.parent, exp.Not) or ref.pinned is not None:
        return False
    sub = _statement(pred)
    if not isinstance(sub, exp.Select) or len(sub.expressions) != 1 or not _tables_only(sub):
        return False
    item = sub.expressions[0]
    item = item.this if isinstance(item, exp.Alias) else item
    left = pred.this
    if not isinstance(item, exp.Column) or not isinstance(left, exp.Column) or column_table(item, own) is not ref:
        return False
    rv = ref.primary_vindex()
    o = next((t for t in outer if t.alias == left.table), None)
    ov = o.primary_vindex() if o is not None else None
    if rv is None or ov is None or len(rv.columns) != 1 or len(ov.columns) != 1:
        return False
    return (rv.columns[0].lower() == item.name.lower() and ov.columns[0].lower() == left.name.lower()
            and vindex_identity(rv) == vindex_identity(ov))


def _tables_only(sub: exp.Select) -> bool:
    frm = sub.args.get("from_") or sub.args.get("from")
    sources = ([frm.this, *frm.expressions] if frm is not None else []) + [j.this for j in sub.args.get("joins") or []]
    return all(isinstance(s, exp.Table) for s in sources)


def _correlated_on_vindex(pred: exp.Expression, ref: TableRef, own: list[TableRef], outer: list[TableRef]) -> bool:
    """The subquery's WHERE has ``r.v = o.v``: ``r`` its table, ``o`` an outer table
    (by alias), ``v`` both primary vindex columns of the same vindex — every row the
    subquery reads for an outer row is on that row's shard."""
    if ref.pinned is not None:
        return False
    sub = _statement(pred)
    if not isinstance(sub, exp.Select) or not _tables_only(sub):
        return False
    rv = ref.primary_vindex()
    if rv is None or len(rv.columns) != 1:
        return False
    where = sub.args.get("where")
    own_aliases = {t.alias for t in own}
    for p in conjuncts(where.this if where is not None else None):
        if not isinstance(p, exp.EQ) or not isinstance(p.this, exp.Column) or not isinstance(p.expression, exp.Column):
            continue
        for mine, theirs in ((p.this, p.expression), (p.expression, p.this)):
            if column_table(mine, own) is not ref or mine.name.lower() != rv.columns[0].lower():
                continue
            if theirs.table in own_aliases:
                continue
            o = next((t for t in outer if t.alias == theirs.table), None)
            ov = o.primary_vindex() if o is not None else None
            if ov is not None and len(ov.columns) == 1 and ov.columns[0].lower() == theirs.name.lower() \
                    and vindex_identity(ov) == vindex_identity(rv):
                return True
    return False


def _statement(pred: exp.Expression) -> exp.Expression:
    if isinstance(pred, exp.In):
        q = pred.args["query"]
        return q.this if isinstance(q, exp.Subquery) else q
    return pred.this
