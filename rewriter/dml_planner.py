"""Planning INSERT, UPDATE and DELETE.

INSERT into a sharded table routes each row by its primary vindex (rows are grouped
per shard at execution), fills ``auto_increment`` columns from the table's sequence,
and carries the values of owned lookup vindexes so their lookup rows are created.
UPDATE/DELETE pick their shards like SELECT (vindex equality -> one shard, IN -> those
shards, else all). Changing a primary vindex column is refused, as in Vitess.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from rewriter import errors
from rewriter.context import PlanContext, to_sql
from rewriter.errors import unsupported
from rewriter.nodes import (
    AutoIncrement,
    Delete,
    DMLOpcode,
    Insert,
    InsertSelect,
    Opcode,
    Plan,
    Update,
    Val,
    VindexValues,
)
from rewriter.routing import choose_route, conjuncts, value_of
from rewriter.select_planner import _all_tables_in
from rewriter.sqltemplate import SqlTemplate, parse_template
from rewriter.tables import TableRef, resolve_table, rewrite_table_node

SEQ_VAR = "__seq"

_ROUTE_TO_DML = {
    Opcode.EqualUnique: DMLOpcode.EqualUnique,
    Opcode.Equal: DMLOpcode.Equal,
    Opcode.IN: DMLOpcode.IN,
    Opcode.MultiEqual: DMLOpcode.MultiEqual,
    Opcode.Scatter: DMLOpcode.Scatter,
    Opcode.None_: DMLOpcode.None_,
}


def _target(stmt: exp.Expression, ctx: PlanContext) -> TableRef:
    t = stmt.this
    if isinstance(t, exp.Schema):
        t = t.this
    if not isinstance(t, exp.Table):
        raise unsupported(f"DML target {to_sql(t)}")
    return resolve_table(t, ctx.vschema, ctx.keyspace)


def _whole_statement(stmt: exp.Expression, ref: TableRef, ctx: PlanContext) -> SqlTemplate:
    changed = rewrite_table_node(ref)
    for col in stmt.find_all(exp.Column):
        db = col.args.get("db")
        if db is not None and db.name in ctx.vschema.keyspaces:
            col.set("db", None)
            changed = True
    return parse_template(to_sql(stmt) if changed or not ctx.source else ctx.source)


def _check_single_keyspace_unsharded(stmt: exp.Expression, ref: TableRef, ctx: PlanContext) -> None:
    for other in _all_tables_in(stmt, ctx):
        if other.keyspace != ref.keyspace or other.sharded:
            raise unsupported("cross-keyspace or sharded table in an unsharded DML statement")


# ---------------------------------------------------------------- INSERT


def plan_insert(stmt: exp.Insert, ctx: PlanContext) -> Plan:
    ref = _target(stmt, ctx)
    if ref.system:
        raise unsupported("INSERT into a system table")
    schema = stmt.this if isinstance(stmt.this, exp.Schema) else None
    columns = [c.name for c in schema.expressions] if schema is not None else []
    values = stmt.expression
    auto = getattr(ref.table, "auto_increment", None)
    if not ref.sharded:
        if isinstance(values, exp.Values) and auto is not None:
            return _plan_insert_rows(stmt, ref, columns, values, ctx)
        if not isinstance(values, exp.Values) and (auto is not None or not _all_in_keyspace(stmt, ref, ctx)):
            return _plan_insert_select(stmt, ref, columns, ctx)
        _check_single_keyspace_unsharded(stmt, ref, ctx)
        tpl = _whole_statement(stmt, ref, ctx)
        return Insert(DMLOpcode.Unsharded, ref.keyspace, ref.name, tpl, [], tpl, [], query=tpl)
    if ref.is_reference:
        raise unsupported("DML on reference table in a sharded keyspace")
    if not isinstance(values, exp.Values):
        return _plan_insert_select(stmt, ref, columns, ctx)
    if not columns:
        raise unsupported("VT09004: INSERT should contain column list or the table should have authoritative columns in vschema")
    return _plan_insert_rows(stmt, ref, columns, values, ctx)


def _all_in_keyspace(stmt: exp.Expression, ref: TableRef, ctx: PlanContext) -> bool:
    return all(t.keyspace == ref.keyspace and not t.sharded for t in _all_tables_in(stmt, ctx))


def _plan_insert_select(stmt: exp.Insert, ref: TableRef, columns: list[str], ctx: PlanContext) -> Plan:
    """INSERT ... SELECT whose rows must be routed (or numbered) by the proxy."""
    from rewriter.select_planner import plan_select

    query = stmt.expression
    if not isinstance(query, exp.Select | exp.Union | exp.Subquery):
        raise unsupported("INSERT form")
    if not columns:
        raise unsupported("VT09004: INSERT should contain column list or the table should have "
                          "authoritative columns in vschema")
    source = plan_select(query.copy(), PlanContext(ctx.vschema, ctx.keyspace, ctx.list_vars, "", ctx.schema, ctx.counter))
    lower = [c.lower() for c in columns]
    table: Any = ref.table
    columns = list(columns)
    auto_column = None
    auto_appended = False
    sequence = None
    auto = getattr(table, "auto_increment", None)
    if auto is not None:
        seq_table = getattr(auto, "sequence_table", None)
        seq_ks = seq_table.keyspace if seq_table is not None else auto.sequence.split(".", 1)[0]
        seq_name = seq_table.name if seq_table is not None else auto.sequence.rsplit(".", 1)[-1]
        sequence = (seq_ks, seq_name)
        if auto.column.lower() not in lower:
            columns.append(auto.column)
            lower.append(auto.column.lower())
            auto_appended = True
        auto_column = lower.index(auto.column.lower())
    vindex_columns: list[tuple[str, Any, tuple[int, ...], bool]] = []
    if ref.sharded:
        cvs = list(getattr(table, "column_vindexes", None) or [])
        for k, cv in enumerate(cvs):
            owned = k > 0 and getattr(cv, "owned", False)
            if k > 0 and not owned:
                continue
            missing = [c for c in cv.columns if c.lower() not in lower]
            if missing:
                if k == 0 and ref.pinned is None:
                    raise errors.PlanningError(
                        f"VT09003: INSERT query does not have sharding column '{missing[0]}' in the column list")
                continue
            vindex_columns.append((cv.name, cv.vindex, tuple(lower.index(c.lower()) for c in cv.columns), owned))
    rewrite_table_node(ref)
    target = ref.node
    prefix = ("INSERT " + ("IGNORE " if stmt.args.get("ignore") else "") + "INTO " + to_sql(target)
              + " (" + ", ".join(to_sql(exp.to_identifier(c)) for c in columns) + ") VALUES ")
    conflict = stmt.args.get("conflict")
    suffix = " " + to_sql(conflict) if conflict is not None else ""
    return InsertSelect(ref.keyspace, ref.name, ref.sharded, columns, source, parse_template(prefix),
                        parse_template(suffix), vindex_columns, auto_column, auto_appended, sequence,
                        bool(stmt.args.get("ignore")), ref.pinned)


def _plan_insert_rows(stmt: exp.Insert, ref: TableRef, columns: list[str], values: exp.Values,
                      ctx: PlanContext) -> Insert:
    if not columns:
        raise unsupported("INSERT without a column list into a table with auto_increment")
    rows = values.expressions
    for r in rows:
        if not isinstance(r, exp.Tuple) or len(r.expressions) != len(columns):
            raise errors.PlanningError("Column count doesn't match value count at row 1")
    lower = [c.lower() for c in columns]
    stmt = stmt.copy()
    schema = stmt.this
    values = stmt.expression
    rows = values.expressions
    table: Any = ref.table
    # auto_increment: give each row its own bind var for the column
    auto_plan: AutoIncrement | None = None
    auto = getattr(table, "auto_increment", None)
    if auto is not None:
        col = auto.column
        seq_table = getattr(auto, "sequence_table", None)
        seq_ks = seq_table.keyspace if seq_table is not None else (auto.sequence.split(".", 1)[0] if "." in auto.sequence else "")
        seq_name = seq_table.name if seq_table is not None else auto.sequence.rsplit(".", 1)[-1]
        if col.lower() not in lower:
            schema.append("expressions", exp.to_identifier(col))
            columns = [*columns, col]
            lower.append(col.lower())
            for r in rows:
                r.append("expressions", exp.Null())
        pos = lower.index(col.lower())
        given: list[Val | None] = []
        row_vars: list[str] = []
        for i, r in enumerate(rows):
            v = value_of(r.expressions[pos], ctx.list_vars)
            if v is None:
                raise unsupported(f"auto_increment column {col} set to an expression")
            given.append(v)
            name = f"{SEQ_VAR}{i}"
            row_vars.append(name)
            r.expressions[pos].replace(exp.Placeholder(this=name))
        auto_plan = AutoIncrement(col, seq_ks, seq_name, tuple(row_vars), tuple(given))

    vindex_values: list[VindexValues] = []
    if ref.sharded:
        cvs = list(getattr(table, "column_vindexes", None) or [])
        if not cvs:
            raise errors.PlanningError(f"table {ref.name} has no vindex")
        for k, cv in enumerate(cvs):
            owned = k > 0 and getattr(cv, "owned", False)
            if k > 0 and not owned:
                continue
            per_row: list[tuple[Val, ...]] = []
            for c in cv.columns:
                if c.lower() not in lower:
                    if k == 0:
                        raise errors.PlanningError(
                            f"VT09003: INSERT query does not have sharding column '{c}' in the column list")
                    per_row = []
                    break
            else:
                idxs = [lower.index(c.lower()) for c in cv.columns]
                for r in rows:
                    vals = []
                    for ix in idxs:
                        e = r.expressions[ix]
                        v = value_of(e, ctx.list_vars)
                        if v is None:
                            raise unsupported(f"expression for vindex column {columns[ix]} in INSERT")
                        vals.append(v)
                    per_row.append(tuple(vals))
            if k > 0 and not per_row:
                continue
            vindex_values.append(VindexValues(cv.name, cv.vindex, tuple(cv.columns), tuple(per_row), owned))

    # templates: prefix + rows + suffix
    rewrite_table_node(ref)
    full = to_sql(stmt)
    values_sql = to_sql(values)
    at = full.rfind(values_sql)
    if at < 0:
        raise unsupported("INSERT form")
    prefix = parse_template(full[:at] + "VALUES ")
    suffix = parse_template(full[at + len(values_sql):])
    row_tpls = [parse_template(to_sql(r)) for r in rows]
    op = DMLOpcode.Sharded if ref.sharded else DMLOpcode.Unsharded
    query = None if ref.sharded else parse_template(full)
    ins = Insert(op, ref.keyspace, ref.name, prefix, row_tpls, suffix, columns,
                 vindex_values=vindex_values, auto_increment=auto_plan, query=query,
                 ignore=bool(stmt.args.get("ignore")), target_ksid=ref.pinned)
    return ins


# ---------------------------------------------------------------- UPDATE / DELETE


def _dml_route(stmt: exp.Expression, ref: TableRef, ctx: PlanContext) -> tuple[DMLOpcode, Any]:
    if ref.pinned is not None:
        return DMLOpcode.ByDestination, None
    where = stmt.args.get("where")
    preds = conjuncts(where.this if where else None)
    choice = choose_route(ref, [ref], preds, ctx.list_vars)
    if choice.needs_lookup:
        # routing through a lookup table is a read; scatter stays correct
        return DMLOpcode.Scatter, None
    return _ROUTE_TO_DML[choice.opcode], choice


def _check_no_other_tables(stmt: exp.Expression, ref: TableRef, ctx: PlanContext) -> None:
    others = [t for t in _all_tables_in(stmt, ctx) if t.node is not ref.node]
    if any(t.sharded and not t.is_reference for t in others) or any(t.keyspace != ref.keyspace for t in others):
        raise unsupported("multi-table or cross-shard subquery in UPDATE/DELETE of a sharded table")


def plan_update(stmt: exp.Update, ctx: PlanContext) -> Plan:
    ref = _target(stmt, ctx)
    if stmt.args.get("from") or stmt.args.get("from_") or stmt.args.get("joins"):
        if ref.sharded:
            raise unsupported("multi-table UPDATE on a sharded table")
    if not ref.sharded:
        _check_single_keyspace_unsharded(stmt, ref, ctx)
        return Update(DMLOpcode.Unsharded, ref.keyspace, ref.name, _whole_statement(stmt, ref, ctx))
    if ref.is_reference:
        raise unsupported("DML on reference table in a sharded keyspace")
    _check_no_other_tables(stmt, ref, ctx)
    table = ref.table
    cvs = list(getattr(table, "column_vindexes", None) or [])
    assigned: dict[str, exp.Expression] = {}
    for a in stmt.expressions:
        if isinstance(a, exp.EQ) and isinstance(a.this, exp.Column):
            assigned[a.this.name.lower()] = a.expression
    changed_lookups: list[tuple[Any, tuple[Val | None, ...]]] = []
    if cvs:
        primary = cvs[0]
        if any(c.lower() in assigned for c in primary.columns):
            raise unsupported(
                f"you cannot UPDATE primary vindex columns; invalid update on vindex: {primary.name}")
        for cv in cvs[1:]:
            if not any(c.lower() in assigned for c in cv.columns):
                continue
            if not getattr(cv, "owned", False):
                continue  # a non-owned lookup is maintained by its owner table
            new_vals: list[Val | None] = []
            for c in cv.columns:
                e = assigned.get(c.lower())
                if e is None:
                    new_vals.append(None)
                    continue
                v = value_of(e, ctx.list_vars)
                if v is None:
                    raise unsupported(f"update of lookup vindex column {c} to an expression")
                new_vals.append(v)
            changed_lookups.append((cv, tuple(new_vals)))
    op, choice = _dml_route(stmt, ref, ctx)
    if stmt.args.get("limit") is not None and op not in (DMLOpcode.EqualUnique, DMLOpcode.ByDestination):
        raise unsupported("multi shard UPDATE with LIMIT")
    owned_select = _owned_rows_query(stmt, ref, [cv for cv, _ in changed_lookups]) if changed_lookups else None
    upd = Update(op, ref.keyspace, ref.name, _whole_statement(stmt, ref, ctx), target_ksid=ref.pinned,
                 owned_lookups=changed_lookups, owned_select=owned_select)
    if choice is not None and op not in (DMLOpcode.Scatter, DMLOpcode.None_):
        upd.vindex_name, upd.vindex, upd.values, upd.in_var = choice.vindex_name, choice.vindex, list(choice.values), choice.in_var
    return upd


def _owned_rows_query(stmt: exp.Expression, ref: TableRef, owned: list[Any]) -> SqlTemplate:
    """``SELECT <primary vindex cols>, <lookup cols> FROM t WHERE <same> FOR UPDATE``: the
    rows a DML will touch, to maintain their lookup rows."""
    primary = ref.table.column_vindexes[0]
    cols: list[str] = []
    for cv in [primary, *owned]:
        for c in cv.columns:
            if c not in cols:
                cols.append(c)
    sel = exp.Select(expressions=[exp.column(c) for c in cols])
    sel.set("from_", exp.From(this=stmt.this.copy()))
    if stmt.args.get("where") is not None:
        sel.set("where", stmt.args["where"].copy())
    sel.set("locks", [exp.Lock(update=True)])
    rewrite_table_node(TableRef(sel.args["from_"].this, ref.alias, ref.keyspace, True, ref.name, ref.table))
    return parse_template(to_sql(sel))


def plan_delete(stmt: exp.Delete, ctx: PlanContext) -> Plan:
    ref = _target(stmt, ctx)
    if stmt.args.get("using") or stmt.args.get("tables"):
        if ref.sharded:
            raise unsupported("multi-table DELETE on a sharded table")
    if not ref.sharded:
        _check_single_keyspace_unsharded(stmt, ref, ctx)
        return Delete(DMLOpcode.Unsharded, ref.keyspace, ref.name, _whole_statement(stmt, ref, ctx))
    if ref.is_reference:
        raise unsupported("DML on reference table in a sharded keyspace")
    _check_no_other_tables(stmt, ref, ctx)
    op, choice = _dml_route(stmt, ref, ctx)
    if stmt.args.get("limit") is not None and op not in (DMLOpcode.EqualUnique, DMLOpcode.ByDestination):
        raise unsupported("multi shard DELETE with LIMIT")
    owned = [cv for cv in (getattr(ref.table, "column_vindexes", None) or [])[1:] if getattr(cv, "owned", False)]
    owned_select = _owned_rows_query(stmt, ref, owned) if owned else None
    dl = Delete(op, ref.keyspace, ref.name, _whole_statement(stmt, ref, ctx), target_ksid=ref.pinned,
                owned_lookups=owned, owned_select=owned_select)
    if choice is not None and op not in (DMLOpcode.Scatter, DMLOpcode.None_):
        dl.vindex_name, dl.vindex, dl.values, dl.in_var = choice.vindex_name, choice.vindex, list(choice.values), choice.in_var
    return dl
