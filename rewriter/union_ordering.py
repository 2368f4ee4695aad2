"""ORDER BY over a UNION whose arms stay separate routes: sort keys over the
concatenated rows, sorted at the proxy (``MemorySort``), only where the proxy sorts
exactly as MySQL does.

MySQL sorts a UNION's rows by the result column's type, which it derives from every
arm (a number in one arm and a string in another make a string column; a binary
string in any arm makes the column binary). The proxy sorts by the first arm's
column. So a key is planned only when in every arm it is a plain column of a table
whose tracked type is of one comparison family (``join_strategy.key_family``) and
one data type; anything else (expressions, ``*``, unknown or mixed types) answers
None and the statement is computed at the proxy.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.context import PlanContext, to_sql
from rewriter.join_strategy import column_info, key_family
from rewriter.nodes import OrderKey
from rewriter.routing import column_table
from rewriter.select_items import positional
from rewriter.tables import resolve_table
from rewriter.whole_route import from_sources


def union_order_keys(order: tuple[exp.Expression, ...], arms: list[exp.Select],
                     ctx: PlanContext) -> list[OrderKey] | None:
    keys: list[OrderKey] = []
    first = arms[0].expressions
    for o in order:
        e = o.this if isinstance(o, exp.Ordered) else o
        pos = positional(e)
        if pos is not None:
            index = pos - 1 if 1 <= pos <= len(first) else None
        elif isinstance(e, exp.Column) and not e.table:
            hits = [i for i, item in enumerate(first) if _output_name(item) == e.name.lower()]
            index = hits[0] if len(hits) == 1 else None
        else:
            index = None
        if index is None or not all(_one_type(arms, index, ctx)):
            return None
        keys.append(OrderKey(index, bool(o.args.get("desc")), to_sql(e)))
    return keys


def _output_name(item: exp.Expression) -> str | None:
    if isinstance(item, exp.Alias):
        return item.alias.lower()
    return item.name.lower() if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star) else None


def _one_type(arms: list[exp.Select], index: int, ctx: PlanContext) -> list[bool]:
    """Per arm: whether its column ``index`` has the first arm's comparison family and type."""
    seen: set[tuple[str, str]] = set()
    out = []
    for arm in arms:
        if index >= len(arm.expressions):
            return [False]
        item = arm.expressions[index]
        item = item.this if isinstance(item, exp.Alias) else item
        tables = [s for s in from_sources(arm) if isinstance(s, exp.Table)]
        if not isinstance(item, exp.Column) or isinstance(item.this, exp.Star) \
                or len(tables) != len(from_sources(arm)):
            return [False]
        refs = [resolve_table(t, ctx.vschema, ctx.keyspace) for t in tables]
        ref = column_table(item, refs)
        info = column_info(ref, item.name, ctx) if ref is not None else None
        family = key_family(info)
        if info is None or family is None:
            return [False]
        seen.add((family, info.data_type.lower()))
        out.append(len(seen) == 1)
    return out
