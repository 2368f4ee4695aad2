"""Whether a whole statement fits one route, and which (Vitess merges every part of such a
statement into one Route operator, whatever constructs it contains).

A statement fits one route when every table it reads, subqueries included, is on one
unsharded keyspace (system tables alongside), is a reference table of the keyspace,
or is sharded and tied to the others by equal primary vindex values: joined on the
same vindex column, or a subquery correlated on it (``WHERE inner.v = outer.v``) or
``outer.v IN (SELECT inner.v ...)``. The operator builder (``rewriter.operator_builder``)
builds one Route for such a statement when a construct in it has no operator yet; the
DML planner asks the same of the tables an UPDATE/DELETE reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from rewriter.context import PlanContext, to_sql
from rewriter.errors import unsupported
from rewriter.nodes import Opcode
from rewriter.routing import RouteInfo, column_table, conjuncts, sharded_route, vindex_identity
from rewriter.tables import TableRef, ambient_keyspace, names_cte, resolve_table

# ---------------------------------------------------------------- table scopes


@dataclass(slots=True)
class Scope:
    """The tables of one SELECT's FROM clause (not of nested subqueries)."""

    refs: list[TableRef]
    derived: list[exp.Subquery] = field(default_factory=list)


def from_sources(sel: exp.Select) -> list[exp.Expression]:
    out: list[exp.Expression] = []
    frm = sel.args.get("from_") or sel.args.get("from")
    if frm is not None:
        out.append(frm.this)
        out.extend(frm.expressions or [])
    for j in sel.args.get("joins") or []:
        out.append(j.this)
    return out


def resolve_scope(sel: exp.Select, ctx: PlanContext) -> Scope:
    refs: list[TableRef] = []
    derived: list[exp.Subquery] = []
    for src in from_sources(sel):
        if isinstance(src, exp.Table):
            if src.name.lower() == "dual" and not src.args.get("db"):
                continue
            refs.append(resolve_table(src, ctx.vschema, ctx.keyspace))
        elif isinstance(src, exp.Subquery):
            derived.append(src)
        else:
            raise unsupported(f"table expression {to_sql(src)}")
    return Scope(refs, derived)


# ---------------------------------------------------------------- route of a statement


def all_tables_in(node: exp.Expression, ctx: PlanContext) -> list[TableRef]:
    """Every table in the statement, subqueries included (for the single-route check)."""
    refs = []
    for t in node.find_all(exp.Table):
        if t.name.lower() == "dual" and not t.args.get("db"):
            continue
        if isinstance(t.parent, exp.Schema) or names_cte(t):
            continue
        refs.append(resolve_table(t, ctx.vschema, ctx.keyspace))
    return refs


def _merged_sharded_components(sel: exp.Select, sharded: list[TableRef], ctx: PlanContext) -> bool:
    """True when all sharded tables of this SELECT are joined on the same primary vindex
    (so each shard can compute the join alone)."""
    if len(sharded) <= 1:
        return True
    parent = {id(r): id(r) for r in sharded}

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    preds = conjuncts(sel.args.get("where").this if sel.args.get("where") else None)  # type: ignore[union-attr]  # the conditional tests the same get()
    for j in sel.args.get("joins") or []:
        preds.extend(conjuncts(j.args.get("on")))
        using = j.args.get("using")
        if using:
            right = j.this
            for ident in using:
                for r in sharded:
                    if r.node is right:
                        continue
                    lcol = exp.column(ident.name, table=None)
                    rcol = exp.column(ident.name, table=right.alias_or_name)
                    lcol.set("table", None)
                    preds.append(exp.EQ(this=lcol, expression=rcol))
    for p in preds:
        if not isinstance(p, exp.EQ):
            continue
        a, b = p.this, p.expression
        if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
            continue
        ra, rb = column_table(a, sharded), column_table(b, sharded)
        if ra is None or rb is None or ra is rb:
            continue
        va, vb = ra.primary_vindex(), rb.primary_vindex()
        if va is None or vb is None:
            continue
        if len(va.columns) != 1 or len(vb.columns) != 1:
            continue
        if va.columns[0].lower() != a.name.lower() or vb.columns[0].lower() != b.name.lower():
            continue
        if vindex_identity(va) != vindex_identity(vb):
            continue
        parent[find(id(ra))] = find(id(rb))
    roots = {find(id(r)) for r in sharded}
    return len(roots) == 1


def _primary_vindex_column(r: TableRef) -> str | None:
    cv = r.primary_vindex()
    if cv is None or len(cv.columns) != 1:
        return None
    return cv.columns[0].lower()


def _same_vindex(a: TableRef, b: TableRef) -> bool:
    va, vb = a.primary_vindex(), b.primary_vindex()
    return va is not None and vb is not None and vindex_identity(va) == vindex_identity(vb)


def _subqueries_merge(sel: exp.Select, top: list[TableRef], inner: list[TableRef],
                      ctx: PlanContext) -> bool:
    """True when every sharded table of a subquery is tied to an outer sharded table by
    equal primary vindex values (Vitess merges such subqueries into the outer route):
    ``WHERE inner.v = outer.v`` inside the subquery (any subquery kind, EXISTS and NOT
    IN included: every row it may read lives on the outer row's shard), or
    ``outer.v IN (SELECT inner.v ...)`` (not negated)."""
    anchored = {id(r.node): r for r in top}
    pending = list(inner)
    progress = True
    while pending and progress:
        progress = False
        for r in list(pending):
            if _anchored(r, anchored, ctx):
                anchored[id(r.node)] = r
                pending.remove(r)
                progress = True
    return not pending


def _anchored(r: TableRef, anchored: dict[int, TableRef], ctx: PlanContext) -> bool:
    col = _primary_vindex_column(r)
    if col is None or r.pinned is not None:
        return False
    sub = r.node.find_ancestor(exp.Select)
    if sub is None:
        return False
    if any(not isinstance(t, exp.Table) for t in from_sources(sub)):
        return False
    own = [x for x in resolve_scope(sub, ctx).refs]
    outer = list(anchored.values())
    where = sub.args.get("where")
    for p in conjuncts(where.this if where is not None else None):
        if not isinstance(p, exp.EQ):
            continue
        a, b = p.this, p.expression
        if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
            continue
        for mine, theirs in ((a, b), (b, a)):
            mine_ref = column_table(mine, own)
            if mine_ref is None or mine_ref.node is not r.node or mine.name.lower() != col:
                continue
            if any(x.alias == theirs.table for x in own):
                continue  # not correlated: names a table of the subquery itself
            o = next((x for x in outer if x.alias == theirs.table), None)
            if o is not None and _primary_vindex_column(o) == theirs.name.lower() and _same_vindex(r, o):
                return True
    # outer.v IN (SELECT r.v FROM r ...)
    subquery = sub.parent
    if isinstance(subquery, exp.Subquery):
        subquery = subquery.parent
    if isinstance(subquery, exp.In) and subquery.args.get("query") is not None \
            and not isinstance(subquery.parent, exp.Not) and len(sub.expressions) == 1:
        left, item = subquery.this, sub.expressions[0]
        if isinstance(item, exp.Alias):
            item = item.this
        item_ref = column_table(item, own) if isinstance(item, exp.Column) else None
        if isinstance(left, exp.Column) and item_ref is not None and item_ref.node is r.node \
                and item.name.lower() == col:
            o = next((x for x in outer if x.alias == left.table), None)
            if o is not None and _primary_vindex_column(o) == left.name.lower() and _same_vindex(r, o):
                return True
    return False


def _reference_rows_padded_per_shard(sel: exp.Select, ctx: PlanContext) -> bool:
    """An outer join whose preserved side reads only reference tables and whose other
    side a sharded one: sent whole to every shard, each would pad the reference rows
    without a match on that shard (rewriter.rules.merge_joins refuses the same)."""
    joins = sel.args.get("joins") or []
    sources = from_sources(sel)
    sides = [""] * (len(sources) - len(joins)) + [(j.args.get("side") or "").upper() for j in joins]
    seen_sharded = False
    for src, side in zip(sources, sides, strict=True):
        ref = resolve_table(src, ctx.vschema, ctx.keyspace) if isinstance(src, exp.Table) else None
        sharded = ref is not None and ref.sharded and not ref.is_reference and not ref.system
        if side == "LEFT" and sharded and not seen_sharded or side == "RIGHT" and not sharded and seen_sharded:
            return True
        seen_sharded |= sharded
    return False


def single_route(sel: exp.Expression, scope_sel: exp.Select | None, ctx: PlanContext) -> RouteInfo | None:
    """The one route that can run ``sel`` whole, or None."""
    refs = all_tables_in(sel, ctx)
    if not refs:
        ks = ambient_keyspace(ctx.vschema, ctx.keyspace)
        return RouteInfo(Opcode.Reference, ks, ctx.vschema.keyspaces[ks].sharded)
    if all(r.system for r in refs):
        return RouteInfo(Opcode.DBA, refs[0].keyspace, refs[0].sharded, tables=refs)
    if any(r.system for r in refs):
        # system schemas exist on every MySQL server: fine next to one unsharded keyspace
        user = [r for r in refs if not r.system]
        if len({r.keyspace for r in user}) == 1 and not user[0].sharded:
            return RouteInfo(Opcode.Unsharded, user[0].keyspace, False, tables=refs)
        return None
    keyspaces = {r.keyspace for r in refs}
    if len(keyspaces) != 1:
        return None
    ks = refs[0].keyspace
    if not refs[0].sharded:
        return RouteInfo(Opcode.Unsharded, ks, False, tables=refs)
    sharded = [r for r in refs if not r.is_reference]
    if not sharded:
        return RouteInfo(Opcode.Reference, ks, True, tables=refs)
    if scope_sel is None:
        return None
    top_scope = {id(r.node) for r in resolve_scope(scope_sel, ctx).refs}
    top = [r for r in sharded if id(r.node) in top_scope]
    # sharded tables inside subqueries would see only one shard's rows, unless the
    # subquery only reads rows that share the outer row's vindex value
    inner = [r for r in sharded if id(r.node) not in top_scope]
    if inner and not _subqueries_merge(scope_sel, top, inner, ctx):
        return None
    if not _merged_sharded_components(scope_sel, top, ctx):
        return None
    if len(top) > 1 and any(r.pinned is not None for r in top):
        return None
    if _reference_rows_padded_per_shard(scope_sel, ctx):
        return None
    where = scope_sel.args.get("where")
    preds = conjuncts(where.this if where else None)
    # for inner joins ON conditions restrict rows like WHERE does
    for j in scope_sel.args.get("joins") or []:
        if not j.args.get("side"):
            preds.extend(conjuncts(j.args.get("on")))
    return sharded_route(ks, refs, top, preds, ctx.list_vars)

