"""Rule: window functions computed on each shard of a scatter (Vitess pushes a window
to the shards when its ``PARTITION BY`` holds a unique vindex column).

Every row of such a partition lives on one shard, so each shard's window values over
its own rows are the values over all rows; the scatter planners then treat each window
expression as a column of the row (merge-ordered, limited) like any other.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.context import PlanContext
from rewriter.tables import resolve_table


def windows_within_shards(stmt: exp.Expression, ctx: PlanContext) -> bool:
    """Window functions a scatter may compute on each shard, as Vitess pushes them: one
    sharded table read row by row (no join, grouping, DISTINCT, aggregate or subquery),
    and every window ``PARTITION BY`` its unique primary vindex column, so each partition
    lies whole on one shard. The scatter layouts then treat each window as a column."""
    if not isinstance(stmt, exp.Select) or stmt.args.get("joins") or stmt.args.get("windows"):
        return False
    if any(stmt.args.get(k) for k in ("group", "having", "distinct")):
        return False
    frm = stmt.args.get("from_") or stmt.args.get("from")
    if frm is None or not isinstance(frm.this, exp.Table) or any(True for _ in stmt.find_all(exp.Rollup)):
        return False
    if any(True for _ in stmt.find_all(exp.Subquery)) or len(list(stmt.find_all(exp.Select))) != 1:
        return False
    if any(not n.find_ancestor(exp.Window) for n in stmt.find_all(exp.AggFunc)):
        return False
    ref = resolve_table(frm.this, ctx.vschema, ctx.keyspace)
    cv = ref.primary_vindex() if ref.sharded and not ref.is_reference else None
    if cv is None or len(cv.columns) != 1 or not cv.vindex.unique:
        return False
    vcol = cv.columns[0].lower()
    for window in stmt.find_all(exp.Window):
        if not isinstance(window.this, exp.Func) or window.args.get("alias"):  # a named window: not resolved here
            return False
        partition = window.args.get("partition_by") or []
        if not any(isinstance(p, exp.Column) and p.name.lower() == vcol and p.table in ("", ref.alias)
                   for p in partition):
            return False
    return True
