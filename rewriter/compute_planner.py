"""Planning a statement no single route can answer: the ``Compute`` primitive.

Every base table the statement reads becomes one input: a route that fetches only
the columns the statement uses, with the predicates that hold for that table's rows
alone evaluated at the shards (``rewriter.semantics``). Inputs are fetched in order
— those with pushed filters first — and an input joined by equality to an earlier
one is fetched with the earlier one's values as an ``IN`` list when there are few
enough (a semi-join reduction; on a vindex column it also routes to only the shards
holding them). The statement itself then runs over the materialised inputs on one
shard's server, so everything MySQL can compute (correlated subqueries, CTEs,
recursive ones too, windows, ROLLUP, GROUP_CONCAT, JSON aggregates, collations,
NULL semantics) is computed exactly as one MySQL would.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.context import PlanContext, select_item_texts, to_sql
from rewriter.errors import unsupported
from rewriter.join_planner import route_for_table
from rewriter.nodes import Compute, Plan, TempInput, TempReduction
from rewriter.semantics import (
    SELECT_TAG,
    TAG,
    Bound,
    Occurrence,
    bind,
    conjuncts,
    simplify_exists,
    tag_tables,
)
from rewriter.sqltemplate import parse_template
from rewriter.tables import TableRef
from sqltext.quoting import quote_identifier

TEMP_PREFIX = "_sg_tmp_"

# Functions that read the connection they run on: on the compute connection they
# would answer for it, not for the client's session.
_SESSION_FUNCTIONS = frozenset({"last_insert_id", "connection_id", "found_rows", "row_count"})


def plan_compute(stmt: exp.Expression, ctx: PlanContext) -> Plan:
    """``stmt``: an unmodified parse of the client's SELECT (or UNION)."""
    stmt = stmt.copy()
    _check_computable(stmt)
    simplify_exists(stmt)
    refs = tag_tables(stmt, ctx)
    if not refs:
        raise unsupported("query without tables that spans shards")
    if any(r.system for r in refs.values()):
        raise unsupported("system tables in a query that spans shards")
    bound = bind(stmt, ctx)
    keyspace, shard = _compute_location(list(refs.values()), ctx)
    order = _input_order(bound)
    position = {tag: i for i, tag in enumerate(order)}
    inputs: list[TempInput] = []
    for tag in order:
        occ = bound.occurrences[tag]
        inputs.append(_input(occ, bound, position, inputs, keyspace, ctx))
    query = _compute_query(stmt, bound, ctx)
    return Compute(
        keyspace=keyspace,
        shard=shard,
        inputs=inputs,
        query=parse_template(to_sql(query)),
        output_names=_output_names(stmt, ctx),  # type: ignore[arg-type]  # _output_names returns templates or None
        original_tables={_temp_name(t): o.ref.name for t, o in bound.occurrences.items()},
    )


def _check_computable(stmt: exp.Expression) -> None:
    if isinstance(stmt, exp.Select) and stmt.args.get("locks"):
        raise unsupported("locking read (FOR UPDATE / LOCK IN SHARE MODE) across shards")
    for node in stmt.walk():
        if isinstance(node, exp.Select) and any(
                m.name.upper() == "SQL_CALC_FOUND_ROWS" for m in node.args.get("operation_modifiers") or []):
            raise unsupported("SQL_CALC_FOUND_ROWS across shards")
        if isinstance(node, exp.PropertyEQ):
            raise unsupported("user variable assignment across shards")
        if isinstance(node, exp.Parameter):
            raise unsupported("user variables in a query that spans shards")
        if isinstance(node, exp.Into):
            raise unsupported("SELECT INTO")
        if (isinstance(node, exp.Subquery) and not node.alias and isinstance(node.this, exp.Table)
                and node.this.args.get("joins")):
            raise unsupported("a parenthesised join nested in an outer join across shards")
        if isinstance(node, exp.Anonymous) and node.name.lower() in _SESSION_FUNCTIONS:
            raise unsupported(f"{node.name.upper()}() in a query that spans shards")


def _compute_location(refs: list[TableRef], ctx: PlanContext) -> tuple[str, str]:
    """The shard whose server finishes the statement: the first shard of the first
    sharded table's keyspace (its tables are then copied in place, not through the
    proxy), else of the first table's keyspace."""
    sharded = [r for r in refs if r.sharded]
    ks = (sharded or refs)[0].keyspace
    return ks, ctx.vschema.shards(ks)[0]


def _input_order(bound: Bound) -> list[int]:
    """Inputs others can be reduced by come first; among those that are free to go,
    filtered ones (likely small), then reference and unsharded tables."""
    occs = bound.occurrences

    remaining = set(occs)
    order: list[int] = []

    def key(tag: int) -> tuple[int, int, int, int, int]:
        o = occs[tag]
        reference = 0 if (o.ref.is_reference or not o.ref.sharded) else 1
        reducible = 0 if any(r.source not in remaining for r in o.reductions) else 1
        size = o.schema.rows if o.schema is not None else 0
        return (reducible, 0 if o.predicates else 1, reference, size, tag)

    while remaining:
        free = [t for t in remaining
                if not any(r.source in remaining for r in occs[t].reductions)]
        pick = min(free or remaining, key=key)
        order.append(pick)
        remaining.discard(pick)
    return order


def _temp_name(tag: int) -> str:
    return f"{TEMP_PREFIX}{tag}"


def _fetch(occ: Occurrence, extra: list[exp.Expression], columns: list[str]) -> exp.Select:
    alias = occ.alias
    if columns:
        projections: list[exp.Expression] = [exp.column(c, table=alias) for c in columns]
    else:
        projections = [exp.Column(this=exp.Star(), table=exp.to_identifier(alias))]
    sel = exp.select(*projections).from_(
        exp.Table(this=exp.to_identifier(occ.ref.name),
                  alias=exp.TableAlias(this=exp.to_identifier(alias))))
    preds = [_for_shard(p.copy()) for p in occ.predicates] + extra
    if preds:
        sel = sel.where(exp.and_(*preds) if len(preds) > 1 else preds[0])
    if occ.existence_only and columns:
        sel = sel.distinct()
    return sel


def _for_shard(pred: exp.Expression) -> exp.Expression:
    """A predicate of the qualified copy as a shard runs it: tables inside its
    subqueries named without their keyspace (shards name their own database)."""
    for t in pred.find_all(exp.Table):
        t.set("db", None)
        t.set("catalog", None)
    return pred


def _route(occ: Occurrence, sel: exp.Select, list_vars: frozenset[str]) -> Plan:
    where = sel.args.get("where")
    return route_for_table(occ.ref, sel, conjuncts(where.this if where is not None else None), list_vars)


def _input(occ: Occurrence, bound: Bound, position: dict[int, int], done: list[TempInput],
           compute_keyspace: str, ctx: PlanContext) -> TempInput:
    name = _temp_name(occ.tag)
    columns = list(occ.columns)
    if not columns and occ.schema is not None and occ.schema.columns:
        columns = [occ.schema.columns[0].name]  # rows matter, not values (COUNT(*))
    sel = _fetch(occ, [], columns)
    source = _route(occ, sel, ctx.list_vars)
    same_ks = occ.ref.keyspace == compute_keyspace
    create = local = None
    if same_ks:
        empty = sel.copy()
        empty.set("where", exp.Where(this=exp.false()))
        keys = [c for c in columns if c in occ.join_keys and _indexable(occ, c)]
        index_sql = ", ".join(f"INDEX ({quote_identifier(c)})" for c in keys[:16])
        create = parse_template(
            f"CREATE TEMPORARY TABLE {quote_identifier(name)} "
            + (f"({index_sql}) " if index_sql else "")
            + to_sql(empty))
        local = parse_template(to_sql(sel))
    reductions: list[TempReduction] = []
    reduction_preds: list[exp.Expression] = []
    seen_reductions: set[tuple[str, int, str]] = set()
    for red in occ.reductions:
        if (red.column.lower(), red.source, red.source_column.lower()) in seen_reductions:
            continue
        seen_reductions.add((red.column.lower(), red.source, red.source_column.lower()))
        src_pos = position.get(red.source)
        if src_pos is None or src_pos >= len(done):
            continue  # the source comes later: no reduction in this direction
        src_input = done[src_pos]
        try:
            from_column = [c.lower() for c in src_input.columns].index(red.source_column.lower())
        except ValueError:
            continue
        var = ctx.new_var("__sg_red")
        pred = exp.In(this=exp.column(red.column, table=occ.alias),
                      expressions=[exp.Placeholder(this=var)])
        rsel = _fetch(occ, [pred], columns)
        rsource = _route(occ, rsel, ctx.list_vars | {var})
        reductions.append(TempReduction(var, src_pos, from_column, rsource))
        reduction_preds.append(pred)
    all_reduced = None
    if len(reductions) > 1:
        all_vars = ctx.list_vars | {r.var for r in reductions}
        all_reduced = _route(occ, _fetch(occ, [p.copy() for p in reduction_preds], columns), all_vars)
    return TempInput(
        name=name,
        table=occ.ref.qualified(),
        columns=columns,
        source=source,
        create=create,
        indexes=sorted(occ.join_keys),
        local_query=local,
        reductions=reductions,
        all_reduced=all_reduced,
    )


_UNINDEXABLE = ("text", "blob", "json", "geometry", "point", "linestring", "polygon")


def _indexable(occ: Occurrence, column: str) -> bool:
    """Plain indexes only (a TEXT/BLOB key would need a prefix length)."""
    info = occ.schema.column(column) if occ.schema is not None else None
    return info is not None and not info.data_type.lower().endswith(_UNINDEXABLE)


def _compute_query(stmt: exp.Expression, bound: Bound, ctx: PlanContext) -> exp.Expression:
    """The client's statement over the temporary tables (aliases kept, so every
    column reference and ``*`` means what it meant)."""
    q = stmt.copy()
    keyspaces = set(ctx.vschema.keyspaces)
    for sel in list(q.find_all(exp.Select)):
        if sel.meta.get(SELECT_TAG) not in bound.absorbed_selects or sel.root() is not q:
            continue
        _stated_conjunct(sel).replace(exp.true())  # applied where the rows were fetched
    for t in list(q.find_all(exp.Table)):
        tag = t.meta.get(TAG)
        if tag is None:
            continue
        alias = t.alias or t.name
        repl = exp.Table(this=exp.to_identifier(_temp_name(tag)),
                         alias=exp.TableAlias(this=exp.to_identifier(alias)))
        t.replace(repl)
    for col in q.find_all(exp.Column):
        db = col.args.get("db")
        if db is not None and db.name in keyspaces:
            col.set("db", None)
            col.set("catalog", None)
    return q


def _stated_conjunct(node: exp.Expression) -> exp.Expression:
    """The WHERE (or ON) conjunct ``node`` lies in, as the semantic analysis split them:
    below the clause, AND nodes (and parentheses around one) are only the split; the
    first other node down the path is the conjunct (``NOT (...)`` whole, never a part)."""
    path = [node]
    while path[-1].parent is not None and not isinstance(path[-1].parent, exp.Where | exp.Join):
        path.append(path[-1].parent)  # type: ignore[arg-type]  # sqlglot types parses and parents as Expr, Expression's base
    for n in reversed(path):
        if isinstance(n, exp.And) or (isinstance(n, exp.Paren) and isinstance(n.this, exp.And)):
            continue
        return n
    return node


def _first_select(stmt: exp.Expression) -> exp.Select | None:
    while isinstance(stmt, exp.SetOperation | exp.Subquery):
        stmt = stmt.this
    return stmt if isinstance(stmt, exp.Select) else None


def _output_names(stmt: exp.Expression, ctx: PlanContext) -> list[object]:
    """Names for the result columns MySQL names after the client's text (unaliased
    expressions); None where the name comes out right anyway."""
    sel = _first_select(stmt)
    if sel is None or not ctx.source:
        return []
    items = sel.expressions
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
           for e in items):
        return []
    texts = select_item_texts(ctx.names_source, len(items))
    out: list[object] = []
    for i, e in enumerate(items):
        if isinstance(e, exp.Alias) or isinstance(e, exp.Column) or texts is None:
            out.append(None)
        else:
            out.append(parse_template(texts[i]))
    return out


__all__ = ["plan_compute", "TEMP_PREFIX"]
