"""UPDATE/DELETE whose rows depend on other tables: ``DMLWithInput`` (as Vitess).

``UPDATE a JOIN b ON ... SET a.x = b.y WHERE ...``, ``DELETE a FROM a JOIN b ...`` and
``... WHERE col IN (SELECT ... FROM other_shards)`` cannot be sent to the target's
shards as they are: the other tables' rows live elsewhere. The rows to change are
found first — a read of the target's primary key (and of the SET values that read
other tables), planned like any SELECT — then changed by key with a single-table
statement that routes by vindex like any other (lookup vindexes maintained), inside
the session's transaction.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from rewriter.context import PlanContext
from rewriter.errors import unsupported
from rewriter.nodes import DMLWithInput, Plan
from rewriter.read_planner import plan_read
from rewriter.tables import TableRef

KEYS_VAR = "__dml_keys"


def plan_dml_with_input(stmt: exp.Update | exp.Delete, target: TableRef, ctx: PlanContext,
                        plan_single: Callable[[exp.Expression, PlanContext], Plan]) -> Plan:
    """``plan_single`` plans the resulting single-table statement (dml_planner's own)."""
    key = _primary_key(target, ctx)
    alias = target.alias
    source = stmt.this.copy()
    joins = source.args.get("joins") or []
    source.set("joins", None)
    projections: list[exp.Expression] = [exp.column(k, table=alias) for k in key]
    assignments: list[tuple[exp.Expression, exp.Expression]] = []
    per_row_values: list[exp.Expression] = []
    if isinstance(stmt, exp.Update):
        for a in stmt.expressions:
            if not (isinstance(a, exp.EQ) and isinstance(a.this, exp.Column)):
                raise unsupported(f"assignment {a.sql()} in a multi-table UPDATE")
            col = a.this
            if col.table and col.table != alias:
                raise unsupported("UPDATE of several tables across shards")
            value = a.expression
            if _reads_other_tables(value, alias):
                per_row_values.append(value.copy())
                value = exp.Placeholder(this=f"__dml_v{len(per_row_values) - 1}")
            assignments.append((exp.column(col.name), _unqualified(value.copy(), alias)))
    projections.extend(per_row_values)
    read = exp.select(*projections).from_(source)
    for j in joins:
        read = read.join(j.copy())
    if stmt.args.get("where") is not None:
        read.set("where", stmt.args["where"].copy())
    for k in ("order", "limit"):
        if stmt.args.get(k) is not None:
            read.set(k, stmt.args[k].copy())
    input_plan = plan_read(read, PlanContext(ctx.vschema, ctx.keyspace, ctx.list_vars, "", ctx.schema,
                                             ctx.counter))
    per_row = bool(per_row_values) or len(key) > 1
    table = exp.Table(this=exp.to_identifier(target.name),
                      db=exp.to_identifier(target.keyspace))
    if per_row:
        row_vars = [f"__dml_k{i}" for i in range(len(key))]
        row_vars += [f"__dml_v{i}" for i in range(len(per_row_values))]
        where: exp.Expression = exp.and_(*[  # type: ignore[assignment]  # exp.and_ returns a Condition, an Expression
            exp.EQ(this=exp.column(k), expression=exp.Placeholder(this=row_vars[i]))
            for i, k in enumerate(key)])
        list_vars = ctx.list_vars
    else:
        row_vars = []
        where = exp.In(this=exp.column(key[0]), expressions=[exp.Placeholder(this=KEYS_VAR)])
        list_vars = ctx.list_vars | {KEYS_VAR}
    dml: exp.Expression
    if isinstance(stmt, exp.Update):
        dml = exp.Update(this=table, expressions=[exp.EQ(this=c, expression=v) for c, v in assignments],
                         where=exp.Where(this=where))
    else:
        dml = exp.Delete(this=table, where=exp.Where(this=where))
    sub_ctx = PlanContext(ctx.vschema, ctx.keyspace, frozenset(list_vars), "", ctx.schema, ctx.counter)
    return DMLWithInput(input=input_plan, dml=plan_single(dml, sub_ctx), key_count=len(key),
                        keys_var="" if per_row else KEYS_VAR, row_vars=row_vars)


def _primary_key(target: TableRef, ctx: PlanContext) -> list[str]:
    ts = ctx.schema.table(target.keyspace, target.name) if ctx.schema is not None else None
    key = [c.name for c in ts.columns if c.primary_key] if ts is not None else []
    if not key:
        raise unsupported(f"UPDATE/DELETE across shards of table {target.name} without a known primary key")
    return key


def _reads_other_tables(e: exp.Expression, alias: str) -> bool:
    for node in e.walk():
        if isinstance(node, exp.Subquery | exp.Select):
            return True
        if isinstance(node, exp.Column) and node.table and node.table != alias:
            return True
    return False


def _unqualified(e: exp.Expression, alias: str) -> exp.Expression:
    """The target's columns without its alias: the single-table DML names the table."""
    for col in list(e.find_all(exp.Column)):
        if col.table == alias:
            col.set("table", None)
    return e
