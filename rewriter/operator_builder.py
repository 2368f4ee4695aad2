"""A SELECT -> its initial logical operator tree (Vitess's ``operators.translateQueryToOp``).

Bottom up, as SQL evaluates it: a Route per table of the FROM clause (each knowing
its keyspace and vindexes), ApplyJoins in FROM order with their ON conditions, a
Filter for WHERE, an Aggregator when the statement groups or aggregates, a Filter for
HAVING, the Projection, Distinct, Ordering and Limit. Nothing is decided here: the
rules (``rewriter.rules``) merge and push.

The builder takes the statements whose every part has an operator today: one SELECT
over base tables (inner, LEFT and RIGHT joins with ON, USING or NATURAL) or over one
derived table of such a SELECT, with subqueries in WHERE and in the select list,
windows, non-recursive CTEs (inlined), without named windows, ROLLUP, FULL joins; and
UNION [ALL] chains of such SELECTs. A statement with any other construct is one Route
operator carrying the whole statement when every part of it stays on one route
(``rewriter.whole_route``: one unsharded keyspace, reference tables, one shard, sharded
tables tied by equal vindex values — Vitess merges such a statement into one Route
whatever it contains); an uncorrelated WHERE subquery with subqueries of its own, or
beside a derived table, is a SubQuery pulled out when the whole statement is not one
route. For anything else the builder answers
None and the statement is computed at the proxy (``rewriter.compute_planner``).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter import errors
from rewriter.aggregates import has_aggregate
from rewriter.context import PlanContext
from rewriter.cte_inlining import inline_ctes
from rewriter.named_windows import resolve_named_windows
from rewriter.nodes import SINGLE_SHARD
from rewriter.operators import (
    Aggregator,
    ApplyJoin,
    Derived,
    Distinct,
    Filter,
    Limit,
    Operator,
    Ordering,
    Projection,
    Route,
    SubQuery,
    Union,
    Window,
)
from rewriter.routing import conjuncts
from rewriter.subquery_planner import candidates, correlated, outer_aliases
from rewriter.tables import TableRef, ambient_keyspace, resolve_table
from rewriter.whole_route import single_route
from vschema.tracked_schema import columns_of

# Nodes that put a statement outside what the operators express today.
_OUTSIDE = (exp.Subquery, exp.Exists, exp.Rollup, exp.Cube, exp.PropertyEQ, exp.CTE,
            exp.Union, exp.Except, exp.Intersect)


# ``Route.absorbed`` of a Route carrying a whole statement (``whole_statement``).
WHOLE = frozenset({"whole"})


def build(sel: exp.Expression, ctx: PlanContext) -> Operator | None:
    """The initial operator tree of ``sel`` (its Table nodes are shared with the AST),
    or None when ``sel`` uses a construct without an operator yet and does not fit
    one route whole."""
    op = _build(sel, ctx, nested=False)
    if op is not None:
        return op
    whole = whole_statement(sel, ctx)
    if whole is not None:
        return whole
    # WHERE subqueries with subqueries of their own: pulled out, each planned alone
    return _build(sel, ctx, nested=True) if isinstance(sel, exp.Select) else None


def whole_statement(stmt: exp.Expression, ctx: PlanContext) -> Route | None:
    """One Route carrying all of ``stmt`` when every table it reads (subqueries, CTEs
    and set operations included) stays on one route (``whole_route.single_route``); a
    WITH statement or a set operation only when that route is one shard (MySQL then
    evaluates the CTEs / INTERSECT / EXCEPT itself). None otherwise, and for SELECT
    ... INTO (never sent to a shard)."""
    if isinstance(stmt, exp.Select):
        if stmt.args.get("into") is not None:
            return None
        if stmt.args.get("with_") or stmt.args.get("with"):
            info = single_route(stmt, None, ctx)
            if info is None or info.opcode not in SINGLE_SHARD:
                return None
        else:
            info = single_route(stmt, stmt, ctx)
    elif isinstance(stmt, exp.SetOperation):
        info = single_route(stmt, None, ctx)
        if info is None or info.opcode not in SINGLE_SHARD:
            return None
    else:
        return None
    if info is None:
        return None
    return Route(info.keyspace, info.sharded, tuple(info.tables), absorbed=WHOLE, fixed=info)


def _build(sel: exp.Expression, ctx: PlanContext, *, nested: bool) -> Operator | None:
    if isinstance(sel, exp.Union) and not isinstance(sel, exp.Except | exp.Intersect):
        return _union(sel, ctx)
    if isinstance(sel, exp.Select) and (sel.args.get("with_") or sel.args.get("with")):
        # Vitess reads a CTE as the derived table it names: the tree of the statement
        # with every (non-recursive) CTE inlined (to_primitives sends the WITH text)
        inlined = inline_ctes(sel)
        return build(inlined, ctx) if inlined is not None else None
    if not isinstance(sel, exp.Select):
        return None
    if sel.args.get("windows") and not resolve_named_windows(sel):
        return None
    try:
        in_where, in_select = _subqueries(sel)
    except errors.PlanningError:
        return None  # ANY / ALL
    if not _expressible(sel, in_where, in_select, nested):
        return None
    op = _from_clause(sel, ctx)
    if op is None:
        return None
    where = sel.args.get("where")
    if where is not None:
        op = Filter(op, tuple(conjuncts(where.this)))
    outer = outer_aliases(sel) if in_where or in_select else set()
    for pred in in_where + in_select:
        q = _subquery_statement(pred)
        inner = build(q, ctx)
        if inner is None:
            return None
        op = SubQuery(inner, op, pred, pullout=any(p is pred for p in in_where) and not correlated(q, outer))
    group = sel.args.get("group")
    having = sel.args.get("having")
    order = sel.args.get("order")
    aggregates = tuple(e for e in sel.expressions if has_aggregate(e))
    if group is not None or aggregates or (having is not None and has_aggregate(having.this)) \
            or (order is not None and any(has_aggregate(o.this) for o in order.expressions)):
        op = Aggregator(op, tuple(group.expressions) if group is not None else (), aggregates)
    if having is not None:
        op = Filter(op, tuple(conjuncts(having.this)), clause="having")
    windows = tuple(w for e in [*sel.expressions, *(order.expressions if order is not None else [])]
                    for w in e.find_all(exp.Window))
    if windows:
        op = Window(op, windows, sel)
    op = Projection(op, tuple(sel.expressions))
    if sel.args.get("distinct"):
        op = Distinct(op)
    return _order_and_limit(sel, op)


def union_arms(u: exp.Union) -> tuple[list[exp.Select], bool] | None:
    """The SELECTs of a UNION chain and whether it removes duplicates; None for what
    one Union operator cannot express: INTERSECT/EXCEPT, ``(A UNION B) UNION ALL C``
    (C keeps its duplicates), ORDER BY/LIMIT inside the chain (those over the whole
    UNION are Ordering and Limit over the Union: ``_union``)."""
    arms: list[exp.Select] = []
    distinct = False

    def walk(node: exp.Expression, under_all: bool) -> bool:
        nonlocal distinct
        if isinstance(node, exp.Except | exp.Intersect):
            return False
        if isinstance(node, exp.Union):
            clauses = ("with_", "with") if node is u else ("order", "limit", "offset", "with_", "with")
            if any(node.args.get(k) for k in clauses):
                return False
            if node.args.get("distinct"):
                if under_all:
                    return False
                distinct = True
            all_here = under_all or not node.args.get("distinct")
            return walk(node.this, all_here) and walk(node.expression, all_here)
        while isinstance(node, exp.Subquery) and not node.alias:
            node = node.this
        if not isinstance(node, exp.Select):
            return False
        arms.append(node)
        return True

    return (arms, distinct) if walk(u, False) else None


def _union(u: exp.Union, ctx: PlanContext) -> Operator | None:
    found = union_arms(u)
    if found is None:
        return None
    sources = []
    for arm in found[0]:
        op = build(arm, ctx)
        if op is None:
            return None
        sources.append(op)
    return _order_and_limit(u, Union(tuple(sources), distinct=found[1]))


def _order_and_limit(stmt: exp.Query, op: Operator) -> Operator:
    """``op`` under the statement's ORDER BY and LIMIT / OFFSET."""
    order = stmt.args.get("order")
    if order is not None:
        op = Ordering(op, tuple(order.expressions))
    limit = stmt.args.get("limit")
    if limit is not None or stmt.args.get("offset") is not None:
        count = limit.expression if limit is not None and limit.expression is not None else \
            (limit.this if limit is not None else None)
        offset = stmt.args.get("offset") or (limit.args.get("offset") if limit is not None else None)
        op = Limit(op, count, offset)
    return op


def _expressible(sel: exp.Select, in_where: list[exp.Expression], in_select: list[exp.Expression],
                 nested: bool) -> bool:
    """Whether every part of ``sel`` has an operator; ``nested``: also uncorrelated WHERE
    subqueries holding subqueries or over a derived table (pulled out: each statement
    planned on its own)."""
    if sel.args.get("into") is not None or sel.args.get("windows"):
        return False
    if any(str(m.this).upper() == "SQL_CALC_FOUND_ROWS" for m in sel.args.get("operation_modifiers") or []):
        return False
    group = sel.args.get("group")
    if group is not None and (group.args.get("rollup") or group.args.get("cube") or group.args.get("totals")):
        return False
    derived = _derived_table(sel)
    subqueries = in_where + in_select
    outer = outer_aliases(sel) if nested and in_where else set()
    if subqueries and derived is not None and not (
            nested and not in_select and not any(correlated(_subquery_statement(p), outer) for p in in_where)):
        return False  # over a derived table only WHERE subqueries pulled out (planned on their own)
    own: set[int] = set()
    for pred in subqueries:
        q = _subquery_statement(pred)
        if any(True for _ in q.find_all(exp.Subquery, exp.Exists)):
            pulled_out = nested and any(p is pred for p in in_where) and not correlated(q, outer)
            if not pulled_out:
                return False
        own.add(id(pred))
    stack: list[exp.Expression] = [sel]
    while stack:
        node = stack.pop()
        if node is derived or id(node) in own:
            continue  # built on its own (build)
        if isinstance(node, _OUTSIDE) or (isinstance(node, exp.Select) and node is not sel):
            return False
        stack.extend(node.iter_expressions())
    return True


def _subqueries(sel: exp.Select) -> tuple[list[exp.Expression], list[exp.Expression]]:
    """The WHERE predicates holding a subquery (``subquery_planner.candidates``: IN,
    EXISTS, scalar) and the select list's subqueries (scalar or ``EXISTS``), not those
    nested in them."""
    where = sel.args.get("where")
    in_where = candidates(where.this) if where is not None else []
    in_select: list[exp.Expression] = []
    stack: list[exp.Expression] = list(sel.expressions)
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Subquery | exp.Exists):
            in_select.append(node)
            continue
        stack.extend(node.iter_expressions())
    return in_where, in_select


def _subquery_statement(pred: exp.Expression) -> exp.Expression:
    if isinstance(pred, exp.In):
        q = pred.args["query"]
        return q.this if isinstance(q, exp.Subquery) else q
    return pred.this  # Exists(Select), Subquery(Select)


def _derived_table(sel: exp.Select) -> exp.Subquery | None:
    """The derived table when it is the only table expression of ``sel``."""
    frm = sel.args.get("from_") or sel.args.get("from")
    if frm is None or frm.expressions or sel.args.get("joins") or not isinstance(frm.this, exp.Subquery):
        return None
    return frm.this if frm.this.alias else None


def _from_clause(sel: exp.Select, ctx: PlanContext) -> Operator | None:
    frm = sel.args.get("from_") or sel.args.get("from")
    sources: list[tuple[exp.Expression, exp.Join | None]] = []
    if frm is not None:
        sources.append((frm.this, None))
        sources.extend((e, None) for e in frm.expressions or [])
    for j in sel.args.get("joins") or []:
        sources.append((j.this, j))
    op: Operator | None = None
    derived = _derived_table(sel)
    if derived is not None:
        inner = build(derived.this, ctx)
        return Derived(inner, derived.alias) if inner is not None else None
    for node, join in sources:
        if not isinstance(node, exp.Table):
            return None
        if node.name.lower() == "dual" and not node.args.get("db"):
            continue
        ref = resolve_table(node, ctx.vschema, ctx.keyspace)
        route = Route(ref.keyspace, ref.sharded, (ref,))
        if op is None:
            op = route
            continue
        side = (join.args.get("side") or "").upper() if join is not None else ""
        if side == "FULL":
            return None
        preds = _join_predicates(join, op, ref, ctx) if join is not None else ()
        if preds is None:
            return None
        op = ApplyJoin(op, route, preds, left_join=side == "LEFT", right_join=side == "RIGHT")
    if op is None:
        ks = ambient_keyspace(ctx.vschema, ctx.keyspace)
        return Route(ks, ctx.vschema.keyspaces[ks].sharded, ())
    return op


def _join_predicates(join: exp.Join, left: Operator, right: TableRef,
                     ctx: PlanContext) -> tuple[exp.Expression, ...] | None:
    """The ON conditions; ``USING (c)`` and ``NATURAL`` as ``l.c = r.c`` for the left
    table holding ``c`` (None when the columns are not known: no schema, or ``c`` in
    several left tables, which MySQL refuses as ambiguous)."""
    names: list[str]
    if str(join.args.get("method") or "").upper() == "NATURAL":
        right_cols = _columns(right, ctx)
        if right_cols is None:
            return None
        left_cols: list[str] = []
        for t in _tables(left):
            cols = _columns(t, ctx)
            if cols is None:
                return None
            left_cols.extend(cols)
        names = [c for c in right_cols if c in left_cols]
        if names:
            # as ``USING`` of the common columns from here on (same rows, same ``*``): the
            # later steps carry USING's columns across shards, NATURAL's would be lost (a
            # cross join between two routes)
            join.set("method", None)
            join.set("using", [exp.to_identifier(n) for n in names])
    elif join.args.get("using"):
        names = [i.name.lower() for i in join.args["using"]]
    else:
        return tuple(conjuncts(join.args.get("on")))
    out: list[exp.Expression] = []
    for name in names:
        owners = [t for t in _tables(left) if name in (_columns(t, ctx) or ())]
        if len(owners) != 1:
            if len(_tables(left)) != 1:
                return None
            owners = _tables(left)
        out.append(exp.EQ(this=exp.column(name, table=owners[0].alias),
                          expression=exp.column(name, table=right.alias)))
    return tuple(out)


def _tables(op: Operator) -> list[TableRef]:
    if isinstance(op, Route):
        return list(op.tables)
    return [t for i in op.inputs() for t in _tables(i)]


def _columns(t: TableRef, ctx: PlanContext) -> list[str] | None:
    if t.system:
        return None
    cols = columns_of(ctx.vschema, ctx.schema, t.keyspace, t.name)
    return [c.lower() for c in cols] if cols is not None else None
