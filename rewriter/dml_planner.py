"""Planning INSERT, UPDATE and DELETE.

INSERT into a sharded table routes each row by its primary vindex (rows are grouped
per shard at execution), fills ``auto_increment`` columns from the table's sequence,
and carries the values of owned lookup vindexes so their lookup rows are created.
UPDATE/DELETE pick their shards like SELECT (vindex equality -> one shard, IN -> those
shards, else all). Changing a primary vindex column is refused, as in Vitess.
"""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp

from rewriter import errors
from rewriter.context import DIALECT, PlanContext, to_sql
from rewriter.dml_input_planner import plan_dml_with_input
from rewriter.errors import unsupported
from rewriter.nodes import (
    AutoIncrement,
    Delete,
    DMLOpcode,
    Insert,
    InsertSelect,
    Opcode,
    Plan,
    ReferenceWrite,
    Update,
    Val,
    VindexValues,
)
from rewriter.read_planner import plan_read
from rewriter.routing import choose_route, conjuncts, value_of
from rewriter.sqltemplate import SqlTemplate, parse_template
from rewriter.tables import TableRef, resolve_table, rewrite_table_node
from rewriter.whole_route import all_tables_in
from vschema.tracked_schema import columns_of

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
    name = _multi_table_target(stmt)
    if name is not None and name != t.alias_or_name:
        t = next((j.this for j in t.args.get("joins") or []
                  if isinstance(j.this, exp.Table) and j.this.alias_or_name == name), None)
        if t is None:
            raise unsupported(f"DML target {name}")
    return resolve_table(t, ctx.vschema, ctx.keyspace)


def _multi_table_target(stmt: exp.Expression) -> str | None:
    """The table a multi-table UPDATE sets or DELETE deletes from (one only)."""
    if isinstance(stmt, exp.Delete) and stmt.args.get("tables"):
        names = {t.name for t in stmt.args["tables"]}
    elif isinstance(stmt, exp.Update) and stmt.this.args.get("joins"):
        names = {a.this.table for a in stmt.expressions
                 if isinstance(a, exp.EQ) and isinstance(a.this, exp.Column)}
        names.discard("")
        if not names:
            return None
    else:
        return None
    if len(names) != 1:
        raise unsupported(f"{'UPDATE' if isinstance(stmt, exp.Update) else 'DELETE'} of several tables")
    return names.pop()


def _whole_statement(stmt: exp.Expression, ref: TableRef, ctx: PlanContext, changed: bool = False) -> SqlTemplate:
    changed = rewrite_table_node(ref) or changed
    for col in stmt.find_all(exp.Column):
        db = col.args.get("db")
        if db is not None and db.name in ctx.vschema.keyspaces:
            col.set("db", None)
            changed = True
    if changed or not ctx.source:
        return parse_template(_insert_sql(stmt) if isinstance(stmt, exp.Insert) else to_sql(stmt))
    return parse_template(ctx.source)


def _check_single_keyspace_unsharded(stmt: exp.Expression, ref: TableRef, ctx: PlanContext) -> None:
    for other in all_tables_in(stmt, ctx):
        if other.keyspace != ref.keyspace or other.sharded:
            raise unsupported("cross-keyspace or sharded table in an unsharded DML statement")


# ---------------------------------------------------------------- INSERT

_VT09004 = ("VT09004: INSERT should contain column list or the table should have authoritative columns "
            "in vschema")
_REPLACE_HEAD = re.compile(r"^(\s*(?:/\*.*?\*/\s*)*)replace\b", re.I | re.S)
_INSERT_OR_REPLACE = re.compile(r"\bINSERT OR REPLACE\b")


def parse_replace(text: str) -> exp.Insert | None:
    """``REPLACE [INTO] ...`` as an INSERT AST marked ``alternative='REPLACE'`` (sqlglot reads
    MySQL's REPLACE as an opaque command); None when ``text`` is not a REPLACE. The verb is
    swapped for ``INSERT`` padded to the same length, so offsets into ``text`` still hold."""
    m = _REPLACE_HEAD.match(text)
    if m is None:
        return None
    import sqlglot

    head = m.group(1)
    as_insert = head + "INSERT " + text[m.end():]
    try:
        stmt = sqlglot.parse_one(as_insert, read=DIALECT)
    except sqlglot.errors.ParseError as e:
        raise errors.syntax_error(e) from None
    if not isinstance(stmt, exp.Insert):
        raise errors.ParseError("You have an error in your SQL syntax; REPLACE expects INTO, VALUES or SELECT")
    if stmt.args.get("conflict") is not None:
        raise errors.ParseError("You have an error in your SQL syntax; REPLACE takes no ON DUPLICATE KEY UPDATE")
    if stmt.args.get("ignore"):
        raise errors.ParseError("You have an error in your SQL syntax; REPLACE takes no IGNORE")
    stmt.set("alternative", "REPLACE")
    return stmt


def is_replace(stmt: exp.Expression) -> bool:
    return isinstance(stmt, exp.Insert) and str(stmt.args.get("alternative") or "").upper() == "REPLACE"


def replace_verb(sql: str) -> str:
    """sqlglot writes a REPLACE as ``INSERT OR REPLACE``; MySQL's spelling is ``REPLACE``."""
    return _INSERT_OR_REPLACE.sub("REPLACE", sql, count=1)


def _insert_sql(stmt: exp.Insert) -> str:
    sql = to_sql(stmt)
    return replace_verb(sql) if is_replace(stmt) else sql


def _mysql_error(code: int, message: str) -> errors.PlanningError:
    """A refusal MySQL itself would make, with MySQL's code."""
    e = errors.PlanningError(message)
    e.code = code
    return e


def _values_fn(column: str) -> exp.Expression:
    return exp.Anonymous(this="VALUES", expressions=[exp.to_identifier(column)])


def _values_fn_column(e: exp.Expression) -> str | None:
    """``VALUES(c)`` (MySQL's new-row value in ON DUPLICATE KEY UPDATE) -> ``c``."""
    if isinstance(e, exp.Anonymous) and str(e.this).upper() == "VALUES" and len(e.expressions) == 1:
        arg = e.expressions[0]
        if isinstance(arg, exp.Identifier | exp.Column):
            return arg.name
    return None


def _resolve_row_alias(stmt: exp.Insert, columns: list[str], table_columns: list[str]) -> bool:
    """MySQL 8's ``VALUES (...) AS new [(m, n)] ON DUPLICATE KEY UPDATE c = new.c`` (or ``= m``)
    -> ``c = VALUES(c)``: the same meaning, in the form MariaDB and older MySQL read.
    Returns whether the statement changed."""
    values = stmt.expression
    alias = values.args.get("alias") if isinstance(values, exp.Values) else None
    if alias is None:
        return False
    row = alias.name.lower()
    alias_columns = [c.name for c in alias.args.get("columns") or []]
    if alias_columns and not columns:
        raise unsupported(_VT09004)
    if alias_columns and len(alias_columns) != len(columns):
        raise _mysql_error(1353, "In definition of view, derived table or common table expression, SELECT list "
                                 "and column names list have different column counts")
    mapping = {a.lower(): c for a, c in zip(alias_columns, columns, strict=False)}
    own = {c.lower() for c in (*columns, *table_columns)}
    for a in mapping:
        if a in own:
            raise unsupported(f"row alias column {a} that is also a column of the table")
    conflict = stmt.args.get("conflict")
    for assignment in conflict.expressions if conflict is not None else []:
        value = assignment.expression if isinstance(assignment, exp.EQ) else assignment
        for col in list(value.find_all(exp.Column)):
            qualifier = col.table.lower()
            if qualifier == row:
                if alias_columns:
                    if col.name.lower() not in mapping:
                        raise _mysql_error(1054, f"Unknown column '{alias.name}.{col.name}' in 'field list'")
                    target = mapping[col.name.lower()]
                else:
                    target = col.name
            elif not qualifier and col.name.lower() in mapping:
                target = mapping[col.name.lower()]
            else:
                continue
            replacement = _values_fn(target)
            if col is value:
                assignment.set("expression", replacement)
                value = replacement
            else:
                col.replace(replacement)
    values.set("alias", None)
    return True


def _check_on_duplicate(stmt: exp.Insert, ref: TableRef) -> None:
    """Vitess: ON DUPLICATE KEY UPDATE may set a vindex column only to ``VALUES(itself)``."""
    conflict = stmt.args.get("conflict")
    if conflict is None or not ref.sharded:
        return
    vindex_columns = {c.lower() for cv in getattr(ref.table, "column_vindexes", None) or [] for c in cv.columns}
    for a in conflict.expressions:
        if not (isinstance(a, exp.EQ) and isinstance(a.this, exp.Column)):
            continue
        target = a.this.name.lower()
        if target in vindex_columns:
            given = _values_fn_column(a.expression)
            if given is None or given.lower() != target:
                raise unsupported("DML cannot update vindex column")


def _with_column_list(stmt: exp.Insert, columns: list[str]) -> None:
    """Name the columns in the statement itself (what the shards receive)."""
    table = stmt.this.this if isinstance(stmt.this, exp.Schema) else stmt.this
    stmt.set("this", exp.Schema(this=table, expressions=[exp.to_identifier(c) for c in columns]))


def _has_rows(values: exp.Expression) -> bool:
    """False for ``VALUES ()`` (every column takes its default: no column list needed)."""
    if not isinstance(values, exp.Values):
        return True
    return any(not isinstance(r, exp.Tuple) or r.expressions for r in values.expressions)


def plan_insert(stmt: exp.Insert, ctx: PlanContext) -> Plan:
    stmt = stmt.copy()  # resolved names and the column list are written into it
    ref = _target(stmt, ctx)
    if ref.system:
        raise unsupported("INSERT into a system table")
    replace = is_replace(stmt)
    schema = stmt.this if isinstance(stmt.this, exp.Schema) else None
    columns = [c.name for c in schema.expressions] if schema is not None else []
    values = stmt.expression
    auto = getattr(ref.table, "auto_increment", None)
    changed = False
    # The column list, when the statement gives none: the vschema's authoritative list or
    # the tracked schema's (schema tracking). Needed to route, to number, or to resolve a
    # row alias; the shards then receive it explicitly.
    is_values = isinstance(values, exp.Values)
    if ref.sharded:
        needs_columns = True
    elif is_values:
        alias = values.args.get("alias")
        needs_columns = auto is not None or bool(alias is not None and alias.args.get("columns"))
    else:
        needs_columns = auto is not None or not _all_in_keyspace(stmt, ref, ctx)
    known = columns_of(ctx.vschema, ctx.schema, ref.keyspace, ref.name)
    if not columns and needs_columns and _has_rows(values) and known:
        columns = list(known)
        _with_column_list(stmt, columns)
        changed = True
    if _resolve_row_alias(stmt, columns, known or []):
        changed = True
    if replace and ref.sharded:
        owned = [cv.name for cv in (getattr(ref.table, "column_vindexes", None) or [])[1:]
                 if getattr(cv, "owned", False)]
        if owned:
            raise unsupported(f"REPLACE on a table with owned lookup vindexes ({ref.name}: {', '.join(owned)})")
    if not ref.sharded:
        if isinstance(values, exp.Values) and auto is not None:
            if not columns:
                raise unsupported(_VT09004)
            return _plan_insert_rows(stmt, ref, columns, values, ctx)
        if not isinstance(values, exp.Values) and (auto is not None or not _all_in_keyspace(stmt, ref, ctx)):
            return _plan_insert_select(stmt, ref, columns, ctx)
        _check_single_keyspace_unsharded(stmt, ref, ctx)
        tpl = _whole_statement(stmt, ref, ctx, changed=changed)
        return Insert(DMLOpcode.Unsharded, ref.keyspace, ref.name, tpl, [], tpl, [], query=tpl)
    if ref.is_reference:
        return _reference_write(stmt, ref, ctx, "Insert")
    _check_on_duplicate(stmt, ref)
    if not isinstance(values, exp.Values):
        return _plan_insert_select(stmt, ref, columns, ctx)
    if not columns:
        raise unsupported(_VT09004)
    return _plan_insert_rows(stmt, ref, columns, values, ctx)


def _all_in_keyspace(stmt: exp.Expression, ref: TableRef, ctx: PlanContext) -> bool:
    return all(t.keyspace == ref.keyspace and not t.sharded for t in all_tables_in(stmt, ctx))


def _plan_insert_select(stmt: exp.Insert, ref: TableRef, columns: list[str], ctx: PlanContext) -> Plan:
    """INSERT ... SELECT whose rows must be routed (or numbered) by the proxy."""

    query = stmt.expression
    if not isinstance(query, exp.Select | exp.Union | exp.Subquery):
        raise unsupported("INSERT form")
    if not columns:
        raise unsupported(_VT09004)
    source = plan_read(query.copy(), PlanContext(ctx.vschema, ctx.keyspace, ctx.list_vars, "", ctx.schema, ctx.counter))
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
    verb = "REPLACE " if is_replace(stmt) else "INSERT " + ("IGNORE " if stmt.args.get("ignore") else "")
    prefix = (verb + "INTO " + to_sql(target)
              + " (" + ", ".join(to_sql(exp.to_identifier(c)) for c in columns) + ") VALUES ")
    conflict = stmt.args.get("conflict")
    suffix = " " + to_sql(conflict) if conflict is not None else ""
    return InsertSelect(ref.keyspace, ref.name, ref.sharded, columns, source, parse_template(prefix),
                        parse_template(suffix), vindex_columns, auto_column, auto_appended, sequence,
                        bool(stmt.args.get("ignore")), ref.pinned)


def _plan_insert_rows(stmt: exp.Insert, ref: TableRef, columns: list[str], values: exp.Values,
                      ctx: PlanContext) -> Insert:
    rows = values.expressions
    for i, r in enumerate(rows):
        if not isinstance(r, exp.Tuple) or len(r.expressions) != len(columns):
            raise errors.WrongValueCount(f"Column count doesn't match value count at row {i + 1}")
    lower = [c.lower() for c in columns]
    schema = stmt.this  # plan_insert copied the statement: it is ours to change
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
        if not cvs and ref.pinned is None:
            raise errors.PlanningError(f"table {ref.name} has no vindex")
        for k, cv in enumerate(cvs):
            owned = k > 0 and getattr(cv, "owned", False)
            if k > 0 and not owned:
                continue
            per_row: list[tuple[Val, ...]] = []
            for c in cv.columns:
                if c.lower() not in lower:
                    if k == 0 and ref.pinned is None:
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
            if not per_row and (k > 0 or ref.pinned is not None):
                continue
            vindex_values.append(VindexValues(cv.name, cv.vindex, tuple(cv.columns), tuple(per_row), owned))

    # templates: prefix + rows + suffix
    rewrite_table_node(ref)
    full = _insert_sql(stmt)
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
    # a lookup vindex routes the DML too (the engine reads its lookup rows first)
    return _ROUTE_TO_DML[choice.opcode], choice


def _needs_input(stmt: exp.Update | exp.Delete, ref: TableRef, ctx: PlanContext) -> bool:
    """Whether the rows to change depend on tables the target's shards do not hold."""
    named = stmt.args.get("tables") or []  # DELETE t FROM ...: names, not tables
    for t in named:
        t.pop()
    try:
        others = [t for t in all_tables_in(stmt, ctx) if t.node is not ref.node]
    finally:
        stmt.set("tables", named or None)
    if not ref.sharded:
        return any(t.keyspace != ref.keyspace or t.sharded for t in others)
    return any((t.sharded and not t.is_reference) or t.keyspace != ref.keyspace for t in others)


def plan_update(stmt: exp.Update, ctx: PlanContext) -> Plan:
    ref = _target(stmt, ctx)
    if _needs_input(stmt, ref, ctx):
        return plan_dml_with_input(stmt, ref, ctx, _plan_single_table)
    if not ref.sharded:
        _check_single_keyspace_unsharded(stmt, ref, ctx)
        return Update(DMLOpcode.Unsharded, ref.keyspace, ref.name, _whole_statement(stmt, ref, ctx))
    if ref.is_reference:
        return _reference_write(stmt, ref, ctx, "Update")
    if stmt.this.args.get("joins"):
        raise unsupported("multi-table UPDATE on a sharded table")
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


def _reference_write(stmt: exp.Expression, ref: TableRef, ctx: PlanContext, verb: str) -> Plan:
    """Every shard holds the reference table whole: each runs the statement (which may
    read only reference tables of the keyspace, identical everywhere)."""
    for t in all_tables_in(stmt, ctx):
        if t.node is not ref.node and not (t.is_reference and t.keyspace == ref.keyspace):
            raise unsupported(f"{verb.upper()} of reference table {ref.name} reading other tables")
    return ReferenceWrite(DMLOpcode.Scatter, ref.keyspace, ref.name, _whole_statement(stmt, ref, ctx),
                          verb=verb)


def _plan_single_table(stmt: exp.Expression, ctx: PlanContext) -> Plan:
    return plan_update(stmt, ctx) if isinstance(stmt, exp.Update) else plan_delete(stmt, ctx)  # type: ignore[arg-type]


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
    if _needs_input(stmt, ref, ctx):
        return plan_dml_with_input(stmt, ref, ctx, _plan_single_table)
    if not ref.sharded:
        _check_single_keyspace_unsharded(stmt, ref, ctx)
        return Delete(DMLOpcode.Unsharded, ref.keyspace, ref.name, _whole_statement(stmt, ref, ctx))
    if ref.is_reference:
        return _reference_write(stmt, ref, ctx, "Delete")
    if stmt.args.get("tables") or stmt.this.args.get("joins"):
        raise unsupported("multi-table DELETE on a sharded table")
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
