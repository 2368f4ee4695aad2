"""A SELECT's select list as the planners read it: each item's expression, alias and
result column name (MySQL names an unaliased expression by the client's text), the
positional references of ORDER BY / GROUP BY, and LIMIT/OFFSET values."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from rewriter.context import PlanContext, select_item_texts, to_sql
from rewriter.errors import unsupported
from rewriter.nodes import Val
from rewriter.routing import value_of


@dataclass(slots=True)
class SelectItem:
    expr: exp.Expression  # without alias
    alias: str | None
    name: str  # result column name
    star: bool


def select_items(sel: exp.Select, ctx: PlanContext) -> list[SelectItem]:
    texts = select_item_texts(ctx.names_source, len(sel.expressions)) if ctx.names_source else None
    out = []
    for k, e in enumerate(sel.expressions):
        alias = e.alias if isinstance(e, exp.Alias) else None
        inner = e.this if isinstance(e, exp.Alias) else e
        star = isinstance(inner, exp.Star) or (isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star))
        if alias:
            name = alias
        elif isinstance(inner, exp.Column):
            name = inner.name
        elif texts is not None:
            name = texts[k]
        else:
            name = to_sql(inner)
        out.append(SelectItem(inner, alias, name, star))
    return out


def same_expression(a: exp.Expression, b: exp.Expression) -> bool:
    if isinstance(a, exp.Column) and isinstance(b, exp.Column):
        if a.name.lower() != b.name.lower():
            return False
        return not a.table or not b.table or a.table == b.table
    return to_sql(a).lower() == to_sql(b).lower()


def positional(e: exp.Expression) -> int | None:
    if isinstance(e, exp.Literal) and not e.is_string and e.this.isdigit():
        return int(e.this)
    return None


def limit_values(sel: exp.Select, ctx: PlanContext) -> tuple[Val | None, Val | None]:
    lim = sel.args.get("limit")
    off = sel.args.get("offset")
    count = offset = None
    if lim is not None:
        e = lim.expression if lim.expression is not None else lim.this
        count = value_of(e, ctx.list_vars)
        if count is None:
            raise unsupported(f"LIMIT {to_sql(e)}")
        o = lim.args.get("offset")
        if o is not None:
            offset = value_of(o, ctx.list_vars)
    if off is not None:
        offset = value_of(off.expression if off.expression is not None else off.this, ctx.list_vars)
        if offset is None:
            raise unsupported("OFFSET expression")
    return count, offset


def named_as_written(sel: exp.Select, ctx: PlanContext) -> exp.Select:
    """``sel`` as regenerated for a shard, its columns named as the client wrote them."""
    if not ctx.names_source:
        return sel
    named = sel.copy()
    name_as_written(named, select_items(sel, ctx))
    return named


def name_as_written(pushed: exp.Select, items: list[SelectItem]) -> None:
    """A regenerated shard query names each unaliased expression as the client wrote it
    (MySQL names such a column by its text: ``count(*) over (...)``, not sqlglot's
    ``COUNT(*) OVER (...)``). Names longer than an alias may be are left as they are."""
    for k, it in enumerate(items):
        if it.star or it.alias or isinstance(it.expr, exp.Column) or len(it.name) > 256 \
                or it.name == to_sql(it.expr):
            continue
        pushed.expressions[k].replace(exp.alias_(pushed.expressions[k].copy(), it.name, quoted=True))
