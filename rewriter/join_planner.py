"""Cross-shard joins: a left-deep tree of nested-loop ``Join`` nodes.

Each table gets its own route selecting the columns the query needs from it; a
predicate is evaluated by the route of the last table (in FROM order) it mentions,
with columns of earlier tables passed as bind variables taken from each left row
(``:<alias>_<column>``, as Vitess names them). The joined row is the concatenation
of all routes' columns; ORDER BY sorts it at the proxy, then the select list is
projected, DISTINCT and LIMIT applied. Aggregation over a join is planned by
``aggregation_layout.aggregate_over_join``: the join returns one "partial" per row
(``COUNT(*)`` -> 1, ``COUNT(x)`` -> ``x IS NOT NULL``, ``SUM/MIN/MAX(x)`` -> ``x``),
sorted by the group keys at the proxy and aggregated like shard partials.

Supported: inner joins and LEFT JOINs with ON conditions, select items that are
expressions over one table (optionally aliased; computed by its route), select items and
ORDER BY expressions over several tables (computed at the proxy over the joined row by the
one evaluator, ``rewriter.evaluate``), ORDER BY/LIMIT/DISTINCT, aggregates. Refused with
VT12001 (never answered wrongly): ``*`` (the column lists are not known without an
authoritative schema), expressions over several tables the evaluator does not compute,
USING/NATURAL/RIGHT joins, derived tables and subqueries, WHERE conditions on the nullable
side of a LEFT JOIN.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter import errors, select_items
from rewriter.aggregates import has_aggregate
from rewriter.aggregation_layout import aggregate_over_join
from rewriter.context import PlanContext, to_sql
from rewriter.errors import unsupported
from rewriter.evaluate import compile_expr, compile_kind
from rewriter.join_strategy import BATCH_ROWS, KeyPair, choose, equi_keys, estimated_rows
from rewriter.nodes import (
    BatchedJoin,
    Computed,
    Distinct,
    HashJoin,
    Join,
    Limit,
    MemorySort,
    Opcode,
    OrderKey,
    Plan,
    Projection,
    SimpleProjection,
)
from rewriter.route_primitive import make_route
from rewriter.routing import RouteInfo, choose_route, column_table, conjuncts
from rewriter.select_items import limit_values, positional
from rewriter.tables import TableRef, rewrite_table_node
from rewriter.whole_route import from_sources, resolve_scope


def plan_join(sel: exp.Select, ctx: PlanContext) -> Plan:
    scope = resolve_scope(sel, ctx)
    if scope.derived or len(from_sources(sel)) != len(scope.refs):
        raise unsupported("derived table in a cross-shard join")
    refs = scope.refs
    if len(refs) < 2:
        raise unsupported("subquery on a sharded table that does not stay within one route")
    if sel.args.get("group") or sel.args.get("having") or any(has_aggregate(e) for e in sel.expressions):
        return aggregate_over_join(sel, ctx, plan_join)
    if sel.args.get("with_") or sel.args.get("with"):
        raise unsupported("WITH in a cross-shard join")
    for node in sel.walk():
        if isinstance(node, exp.Subquery | exp.Exists) or (isinstance(node, exp.Select) and node is not sel):
            raise unsupported("subquery in a cross-shard join")
    for r in refs:
        if r.system:
            raise unsupported("join of system tables with keyspace tables")

    # which tables are on the nullable side of a LEFT JOIN, and the ON conditions
    nullable: set[int] = set()
    on_preds: list[tuple[int, exp.Expression]] = []  # (table index it belongs to, predicate)
    joins = sel.args.get("joins") or []
    for k, j in enumerate(joins, start=1):
        side = (j.args.get("side") or "").upper()
        kind = (j.args.get("kind") or "").upper()
        if j.args.get("using") or kind in ("NATURAL",) or side in ("RIGHT", "FULL"):
            raise unsupported(f"{side or kind or 'USING'} join across shards")
        if side == "LEFT":
            nullable.add(k)
        for p in conjuncts(j.args.get("on")):
            on_preds.append((k, p))
    where = sel.args.get("where")
    where_preds = conjuncts(where.this if where else None)

    def tables_of(e: exp.Expression) -> set[int]:
        out = set()
        for col in e.find_all(exp.Column):
            if isinstance(col.this, exp.Star):
                raise unsupported("'*' expression in cross-shard query")
            r = column_table(col, refs)
            if r is None:
                raise errors.PlanningError(f"Column '{col.name}' in field list is ambiguous")
            out.add(refs.index(r))
        return out

    assigned: list[list[exp.Expression]] = [[] for _ in refs]
    for p in where_preds:
        ts = tables_of(p)
        if ts & nullable:
            raise unsupported("WHERE condition on the outer side of a LEFT JOIN across shards")
        assigned[max(ts) if ts else 0].append(p)
    for k, p in on_preds:
        ts = tables_of(p)
        if ts and max(ts) > k:
            raise unsupported("ON condition referencing a later table")
        assigned[k].append(p)

    # columns each table must return: select items first, then helpers
    cols: list[list[exp.Expression]] = [[] for _ in refs]
    col_keys: list[dict[str, int]] = [{} for _ in refs]

    def need(t: int, e: exp.Expression) -> int:
        key = to_sql(e).lower()
        if key not in col_keys[t]:
            col_keys[t][key] = len(cols[t])
            cols[t].append(e)
        return col_keys[t][key]

    items: list[tuple[int, int]] = []  # (table, column index within that table)
    sel.set("expressions", _expand_stars(sel.expressions, refs))
    # expressions computed at the proxy over the joined row (the one evaluator,
    # rewriter.evaluate): select items over several tables, ORDER BY expressions. Each fills
    # a NULL placeholder column of the first table's route: (that column, expression, name)
    over_tables: list[tuple[int, exp.Expression, str]] = []
    names = select_items.select_items(sel, ctx)

    def at_proxy(e: exp.Expression, name: str, what: str) -> int:
        if e.find(exp.AggFunc, exp.Window, exp.Subquery, exp.Select) is not None:
            raise unsupported(f"{what}: {to_sql(e)}")
        for col in e.find_all(exp.Column):
            need(refs.index(column_table(col, refs)), col)  # type: ignore[arg-type]  # tables_of found each
        slot = need(0, exp.Alias(this=exp.Null(), alias=exp.to_identifier(f"__sg_expr{len(over_tables)}")))
        over_tables.append((slot, e, name))
        return slot

    for k, e in enumerate(sel.expressions):
        inner = e.this if isinstance(e, exp.Alias) else e
        ts = tables_of(inner)
        if len(ts) > 1:
            items.append((0, at_proxy(inner, names[k].name, "expression over several tables in a cross-shard join")))
            continue
        t = ts.pop() if ts else 0
        if t in nullable and not isinstance(inner, exp.Column):
            # the right route computes it per matching row; a row padded with NULLs
            # would need it computed over NULLs (CASE/COALESCE/IS NULL differ)
            raise unsupported(f"expression over the outer side of a LEFT JOIN across shards: {to_sql(inner)}")
        items.append((t, need(t, e)))

    # tables joined by comparable column equalities only: matched at the proxy (batched
    # lookups or a hash join, rewriter.join_strategy) instead of a query per left row
    table_of = {id(c): refs.index(column_table(c, refs)) for p in (q for ps in assigned for q in ps)  # type: ignore[arg-type]
                for c in p.find_all(exp.Column)}
    keyed: dict[int, list[KeyPair]] = {}
    for t in range(1, len(refs)):
        pairs = equi_keys(t, assigned[t], refs, table_of, ctx)
        if pairs is not None and not refs[t].system:
            keyed[t] = pairs
            for kp in pairs:
                need(t, exp.column(kp.column, table=refs[t].alias))
                need(kp.left_table, exp.column(kp.left_column, table=refs[kp.left_table].alias))

    # bind variables: columns of earlier tables used by a later table's predicates
    var_of: dict[tuple[int, str], str] = {}
    rewritten: list[list[exp.Expression]] = [[] for _ in refs]
    for t, preds in enumerate(assigned):
        if t in keyed:
            rewritten[t] = [p.copy() for p in preds
                            if all(table_of[id(c)] == t for c in p.find_all(exp.Column))]
            continue
        for p in preds:
            q = p.copy()
            for col in list(q.find_all(exp.Column)):
                r = column_table(col, refs)  # type: ignore[assignment]  # asserted not None on the next line
                assert r is not None
                ct = refs.index(r)
                if ct == t:
                    continue
                key = (ct, col.name.lower())
                if key not in var_of:
                    var_of[key] = f"{r.alias}_{col.name}"
                    need(ct, exp.column(col.name, table=r.alias))
                col.replace(exp.Placeholder(this=var_of[key]))
            rewritten[t].append(q)

    order_cols: list[tuple[int, int, bool, str]] = []
    order = sel.args.get("order")
    for o in (order.expressions if order else []):
        e = o.this
        pos = positional(e)
        if pos is not None:
            if not 1 <= pos <= len(items):
                raise errors.UnknownColumn(f"Unknown column '{pos}' in 'order clause'")
            t, c = items[pos - 1]
        else:
            alias_hit = None
            if isinstance(e, exp.Column) and not e.table:
                for i, s in enumerate(sel.expressions):
                    if isinstance(s, exp.Alias) and s.alias.lower() == e.name.lower():
                        alias_hit = items[i]
            if alias_hit is not None:
                t, c = alias_hit
            else:
                ts = tables_of(e)
                if len(ts) == 1 and isinstance(e, exp.Column):
                    t = ts.pop()
                    c = need(t, e)
                else:  # at the proxy: the right route would not see the rows a LEFT JOIN pads
                    t, c = 0, at_proxy(e, to_sql(e), f"ORDER BY {to_sql(e)} in a cross-shard join")
        order_cols.append((t, c, bool(o.args.get("desc")), to_sql(e)))

    # a table that only filters (no column needed) still returns one column per row
    for t in range(len(refs)):
        if not cols[t]:
            need(t, exp.Literal.number(1))

    # how each keyed table is joined, from the shards' row estimates
    strategy: dict[int, str] = {}
    batch_var: dict[int, str] = {}
    left_rows = estimated_rows(refs[0], len(rewritten[0]), ctx)
    for t in range(1, len(refs)):
        right_rows = estimated_rows(refs[t], len(rewritten[t]), ctx)
        if t in keyed:
            first = _batch_key(refs[t], keyed[t])
            keyed[t].remove(first)
            keyed[t].insert(0, first)
            vindex_col = _primary_vindex_column(refs[t])
            strategy[t] = choose(left_rows, right_rows, len(ctx.vschema.shards(refs[t].keyspace)),
                                 vindex_col is not None and vindex_col == first.column.lower())
            if strategy[t] == "batched":
                batch_var[t] = ctx.new_var("__sg_batch")
        left_rows = None if left_rows is None or right_rows is None else max(left_rows, right_rows)

    # one route per table
    routes: list[Plan] = []
    for t, r in enumerate(refs):
        rewrite_table_node(r)
        q = exp.Select(expressions=[c.copy() for c in cols[t]])
        q.set("from_", exp.From(this=r.node.copy()))
        preds = rewritten[t]
        list_vars = ctx.list_vars
        if t in batch_var:
            preds = preds + [exp.In(this=exp.column(keyed[t][0].column, table=r.alias),
                                    expressions=[exp.Placeholder(this=batch_var[t])])]
            list_vars = list_vars | {batch_var[t]}
        if preds:
            # exp.and_ parenthesises OR operands: AND binds tighter than OR
            cond = exp.and_(*(p.copy() for p in preds)) if len(preds) > 1 else preds[0]
            q.set("where", exp.Where(this=cond))
        routes.append(route_for_table(r, q, preds, list_vars))

    offsets = []
    total = 0
    for t in range(len(refs)):
        offsets.append(total)
        total += len(cols[t])
    plan: Plan = routes[0]
    left_width = len(cols[0])
    for t in range(1, len(refs)):
        vars_ = {name: offsets[ct] + _col_index(col_keys[ct], refs[ct].alias, cname)
                 for (ct, cname), name in var_of.items() if ct < t and _used_by(rewritten[t], name)}
        width_r = len(cols[t])
        join_cols = [-(i + 1) for i in range(left_width)] + [i + 1 for i in range(width_r)]
        table_name = "_".join(r.name for r in refs[: t + 1])
        if t in keyed:
            left_keys = [offsets[kp.left_table] + _col_index(col_keys[kp.left_table], refs[kp.left_table].alias,
                                                             kp.left_column) for kp in keyed[t]]
            right_keys = [_col_index(col_keys[t], refs[t].alias, kp.column) for kp in keyed[t]]
            predicate = " and ".join(
                f"{refs[t].alias}.{kp.column} = {refs[kp.left_table].alias}.{kp.left_column}" for kp in keyed[t])
            if strategy[t] == "hash":
                plan = HashJoin(plan, routes[t], join_cols, left_keys, right_keys, predicate,
                                left_join=t in nullable, table_name=table_name)
            else:
                plan = BatchedJoin(plan, routes[t], join_cols, left_keys, right_keys, batch_var[t], predicate,
                                   left_join=t in nullable, table_name=table_name, batch_size=BATCH_ROWS)
        else:
            plan = Join(plan, routes[t], join_cols, vars_, left_join=t in nullable, table_name=table_name)
        left_width += width_r
    if over_tables:
        plan = Projection(_computed_over_tables(over_tables, offsets, col_keys, refs), plan)
    if order_cols:
        plan = MemorySort([OrderKey(offsets[t] + c, d, txt) for t, c, d, txt in order_cols], plan)
    plan = SimpleProjection([offsets[t] + c for t, c in items], plan)
    if sel.args.get("distinct"):
        plan = Distinct(plan)
    count, offset = limit_values(sel, ctx)
    if count is not None:
        plan = Limit(count, offset, plan)
    return plan


def _computed_over_tables(over_tables: list[tuple[int, exp.Expression, str]], offsets: list[int],
                          col_keys: list[dict[str, int]], refs: list[TableRef]) -> list[Computed]:
    """The expressions evaluated over the joined row (over NULLs for a row a LEFT JOIN
    pads, as MySQL does); refused (VT12001) if the evaluator does not know a function, so
    the statement goes to Compute."""

    def resolve(e: exp.Expression) -> int | None:
        if not isinstance(e, exp.Column):
            return None
        t = refs.index(column_table(e, refs))  # type: ignore[arg-type]  # placed when the item was read
        return offsets[t] + col_keys[t][to_sql(e).lower()]

    return [Computed(offsets[0] + slot, compile_expr(e, resolve), compile_kind(e, resolve), name, to_sql(e))
            for slot, e, name in over_tables]


def _expand_stars(expressions: list[exp.Expression], refs: list[TableRef]) -> list[exp.Expression]:
    """``*`` / ``t.*`` -> the tables' columns, when the vschema lists them authoritatively
    (as Vitess does); otherwise the column list is unknown and the query is refused."""
    out: list[exp.Expression] = []
    for e in expressions:
        if isinstance(e, exp.Star):
            targets = refs
        elif isinstance(e, exp.Column) and isinstance(e.this, exp.Star):
            targets = [r for r in refs if r.alias == e.table]
            if not targets:
                raise errors.PlanningError(f"Unknown table '{e.table}'")
        else:
            out.append(e)
            continue
        for r in targets:
            table = r.table
            cols = getattr(table, "columns", None) or []
            if not cols or not getattr(table, "column_list_authoritative", False):
                raise unsupported("'*' expression in cross-shard query")
            out.extend(exp.column(c.name, table=r.alias) for c in cols)
    return out


def _primary_vindex_column(ref: TableRef) -> str | None:
    cv = ref.primary_vindex() if ref.sharded and not ref.is_reference else None
    return cv.columns[0].lower() if cv is not None and cv.columns else None


def _batch_key(ref: TableRef, pairs: list[KeyPair]) -> KeyPair:
    """The key whose values a batch binds as its IN list: the right table's vindex
    column if it is one of them (the lookup then routes to the shards holding them)."""
    vindex_col = _primary_vindex_column(ref)
    return next((kp for kp in pairs if kp.column.lower() == vindex_col), pairs[0])


def _col_index(keys: dict[str, int], alias: str, cname: str) -> int:
    return keys[to_sql(exp.column(cname, table=alias)).lower()]


def _used_by(preds: list[exp.Expression], name: str) -> bool:
    return any(p.name == name for q in preds for p in q.find_all(exp.Placeholder))


def route_for_table(ref: TableRef, q: exp.Select, preds: list[exp.Expression],
                    list_vars: frozenset[str]) -> Plan:
    """The route that runs ``q`` (a SELECT over ``ref`` alone, WHERE ``preds``)."""
    if ref.system:
        info = RouteInfo(Opcode.DBA, ref.keyspace, ref.sharded, tables=[ref])
    elif not ref.sharded:
        info = RouteInfo(Opcode.Unsharded, ref.keyspace, False, tables=[ref])
    elif ref.is_reference:
        info = RouteInfo(Opcode.Reference, ref.keyspace, True, tables=[ref])
    elif ref.pinned is not None:
        info = RouteInfo(Opcode.ByDestination, ref.keyspace, True, tables=[ref], target_ksid=ref.pinned)
    else:
        c = choose_route(ref, [ref], preds, list_vars)
        info = RouteInfo(c.opcode, ref.keyspace, True, choice=c, tables=[ref])
    fq = q.copy()
    fq.set("where", exp.Where(this=exp.NEQ(this=exp.Literal.number(1), expression=exp.Literal.number(1))))
    return make_route(info, to_sql(q), to_sql(fq).replace(" WHERE 1 <> 1", " WHERE 1 != 1"))
