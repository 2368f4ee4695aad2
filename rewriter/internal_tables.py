"""``information_schema`` reads of a keyspace-level session leave out the proxy's own tables
(``vschema.internal_tables``: those behind topics), as ``SHOW TABLES`` does.

Every reference to an ``information_schema`` table that names tables (``TABLES``, ``COLUMNS``,
``VIEWS``, ``STATISTICS``, ...) gets a condition on its table-name column, in the AST the
planner plans: in the ON of the join that brings it in (an outer join's inner side keeps its
null-complemented rows), else in the WHERE of its SELECT. So a count, a join or a subquery
over it sees what a client sees, whatever the statement's text. A session targeting a shard
(``USE ks:-80``) is planned as a ``Send`` before this runs: it sees the shard as it is.
"""

from __future__ import annotations

from sqlglot import exp

from vschema.internal_tables import PREFIX

# information_schema tables (MariaDB 10.11) and the column that names a table in each.
NAME_COLUMNS = {
    "tables": "table_name",
    "columns": "table_name",
    "views": "table_name",
    "statistics": "table_name",
    "key_column_usage": "table_name",
    "table_constraints": "table_name",
    "referential_constraints": "table_name",
    "check_constraints": "table_name",
    "partitions": "table_name",
    "table_privileges": "table_name",
    "column_privileges": "table_name",
    "table_statistics": "table_name",
    "index_statistics": "table_name",
    "triggers": "event_object_table",
}


def _visible(qualifier: str, column: str) -> exp.Expression:
    """``NOT (LOWER(LEFT(q.column, n)) <=> '<prefix>')``: no escaping to depend on the session's
    sql_mode (a LIKE pattern's ``\\_`` would; the parentheses: HIGH_NOT_PRECEDENCE), and true
    for a NULL (an outer join's missing row)."""
    name = exp.column(column, table=qualifier, quoted=True)
    head = exp.Lower(this=exp.Left(this=name, expression=exp.Literal.number(len(PREFIX))))
    return exp.Not(this=exp.Paren(this=exp.NullSafeEQ(this=head, expression=exp.Literal.string(PREFIX))))


def hide_internal_tables(stmt: exp.Expression) -> bool:
    """Add the conditions to ``stmt`` (in place); whether it changed."""
    changed = False
    for table in list(stmt.find_all(exp.Table)):
        db = table.args.get("db")
        if db is None or db.name.lower() != "information_schema":
            continue
        column = NAME_COLUMNS.get(table.name.lower())
        select = table.find_ancestor(exp.Select)
        if column is None or select is None:
            continue
        condition = _visible(table.alias_or_name, column)
        join = table.parent
        if isinstance(join, exp.Join) and join.args.get("on") is not None and join.side.upper() != "RIGHT":
            join.on(condition, copy=False)  # an outer join's inner side: filtered where it joins
        else:
            select.where(condition, copy=False)
        changed = True
    return changed
