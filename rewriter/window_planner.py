"""Window functions over a scatter route, computed at the proxy (Vitess has no such
primitive; MySQL's semantics are the bar).

The shards send the columns the select list and the windows need (arguments,
PARTITION BY and ORDER BY expressions as hidden columns), sorted by the first
window's partition and order keys (or a later window's that extend them) and merged in
that order; ``Window`` appends the functions' values, ``MemorySort`` applies the
statement's ORDER BY (none when that order is a prefix of the merge order), a
``SimpleProjection`` keeps the select list's columns, ``Limit`` the LIMIT. A select item
computing over windows (``sum(x) over () / count(*) over ()``) is a ``Projection``
(``rewriter.evaluate``) filling a NULL slot the shards send. What this does not
express answers None (the caller sends it to Compute): DISTINCT or IGNORE NULLS inside the function, functions
without a primitive (NTH_VALUE ... FROM FIRST/LAST, ...), RANGE frames with an
INTERVAL offset, ``*`` in the select list, DISTINCT.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter import errors
from rewriter.context import PlanContext, to_sql
from rewriter.evaluate import compile_expr, compile_kind
from rewriter.named_windows import resolve_named_windows
from rewriter.nodes import (
    UPPER_LIMIT,
    WIN_AVG,
    WIN_COUNT,
    WIN_COUNT_STAR,
    WIN_CUME_DIST,
    WIN_DENSE_RANK,
    WIN_FIRST_VALUE,
    WIN_LAG,
    WIN_LAST_VALUE,
    WIN_LEAD,
    WIN_MAX,
    WIN_MIN,
    WIN_NTH_VALUE,
    WIN_NTILE,
    WIN_PERCENT_RANK,
    WIN_RANK,
    WIN_ROW_NUMBER,
    WIN_SUM,
    Computed,
    FrameBound,
    Limit,
    MemorySort,
    OrderKey,
    Plan,
    Projection,
    SimpleProjection,
    Val,
    Window,
    WindowFunc,
)
from rewriter.route_primitive import field_query_of, innermost_route, make_route
from rewriter.routing import RouteInfo, value_of
from rewriter.select_items import (
    SelectItem,
    limit_values,
    name_as_written,
    positional,
    same_expression,
    select_items,
)

_KINDS: dict[type[exp.Expression], str] = {
    exp.RowNumber: WIN_ROW_NUMBER, exp.Ntile: WIN_NTILE, exp.Lag: WIN_LAG, exp.Lead: WIN_LEAD,
    exp.FirstValue: WIN_FIRST_VALUE, exp.LastValue: WIN_LAST_VALUE, exp.Sum: WIN_SUM, exp.Avg: WIN_AVG,
    exp.Min: WIN_MIN, exp.Max: WIN_MAX, exp.Count: WIN_COUNT, exp.Rank: WIN_RANK, exp.DenseRank: WIN_DENSE_RANK,
    exp.PercentRank: WIN_PERCENT_RANK, exp.CumeDist: WIN_CUME_DIST, exp.NthValue: WIN_NTH_VALUE,
}
# Functions whose value does not depend on a frame (MySQL ignores one given to them)
_NO_FRAME = (WIN_ROW_NUMBER, WIN_RANK, WIN_DENSE_RANK, WIN_NTILE, WIN_LAG, WIN_LEAD, WIN_PERCENT_RANK,
             WIN_CUME_DIST)
_NO_ARGUMENT = (WIN_ROW_NUMBER, WIN_RANK, WIN_DENSE_RANK, WIN_PERCENT_RANK, WIN_CUME_DIST)

_UNBOUNDED_BEFORE = FrameBound("unbounded", preceding=True)
_UNBOUNDED_AFTER = FrameBound("unbounded", preceding=False)
_CURRENT = FrameBound("current")


class _Columns:
    """The shard query's select list: the statement's own items first, then hidden
    helper expressions, each once."""

    def __init__(self) -> None:
        self.exprs: list[exp.Expression] = []
        self._hidden: dict[str, int] = {}

    def item(self, e: exp.Expression) -> int:
        self.exprs.append(e)
        # a helper the select list already sends is not sent twice
        self._hidden.setdefault(to_sql(_unaliased(e)), len(self.exprs) - 1)
        return len(self.exprs) - 1

    def slot(self) -> int:
        """A NULL column a Projection fills at the proxy (a select item computed over windows)."""
        self.exprs.append(exp.Null())
        return len(self.exprs) - 1

    def hidden(self, e: exp.Expression) -> int:
        sql = to_sql(e)
        if sql not in self._hidden:
            self._hidden[sql] = self.item(e.copy())
        return self._hidden[sql]


def plan_window_select(sel: exp.Select, info: RouteInfo, ctx: PlanContext) -> Plan | None:
    """Route -> Window -> [Projection] -> [MemorySort] -> SimpleProjection -> [Limit] for ``sel`` (its
    tables already named for the shards), or None when some part has no primitive."""
    if sel.args.get("distinct") or sel.args.get("group") or sel.args.get("having"):
        return None
    items = select_items(sel, ctx)
    if any(i.star for i in items):
        return None
    named = sel.copy()
    name_as_written(named, items)
    if not resolve_named_windows(named):
        return None
    cols = _Columns()
    item_at: list[int | None] = []  # select item -> shard column (None: a bare window)
    windows: list[exp.Window] = []  # every window function, in select-list order
    names: list[str] = []
    bare: dict[int, int] = {}  # select item -> its window
    computed: list[tuple[int, exp.Expression, int]] = []  # items computing over windows: (item, expression, slot)
    for k, e in enumerate(named.expressions):
        inner = _unaliased(e)
        if isinstance(inner, exp.Window):
            bare[k] = len(windows)
            windows.append(inner)
            names.append(items[k].name)
            item_at.append(None)
        elif inner.find(exp.Window) is not None:
            for w in inner.find_all(exp.Window):
                windows.append(w)
                names.append(to_sql(w))
            for c in inner.find_all(exp.Column):
                if c.find_ancestor(exp.Window) is None:
                    cols.hidden(c)
            slot = cols.slot()
            computed.append((k, inner, slot))
            item_at.append(slot)
        else:
            item_at.append(cols.item(e))
    if not windows:
        return None
    funcs: list[WindowFunc] = []
    for w, name in zip(windows, names, strict=True):
        fn = _window_func(w, name, cols, ctx)
        if fn is None:
            return None
        funcs.append(fn)
    order = sel.args.get("order")
    aliases = {i.alias.lower() for i in items if i.alias}
    sort_keys: list[tuple[bool, int, bool, str]] = []  # (a select item?, item or column, desc, text)
    for o in order.expressions if order is not None else []:
        found = _item_of(o.this, items)
        if found is None and (o.this.find(exp.Window) is not None or any(
                not c.table and c.name.lower() in aliases for c in o.this.find_all(exp.Column))):
            return None  # over a window, or a select alias the shards do not know
        hidden = found is None
        sort_keys.append((not hidden, cols.hidden(o.this) if found is None else found,
                          bool(o.args.get("desc")), to_sql(o.this)))
    count, offset = limit_values(sel, ctx)
    width = len(cols.exprs)
    window_at = {id(w): width + j for j, w in enumerate(windows)}

    def output(k: int) -> int:
        at = item_at[k]
        return at if at is not None else width + bare[k]

    def resolve(e: exp.Expression) -> int | None:
        if isinstance(e, exp.Window):
            return window_at[id(e)]
        return cols.hidden(e) if isinstance(e, exp.Column) else None  # each sent already (above)

    try:
        projected = [Computed(slot, compile_expr(e, resolve), compile_kind(e, resolve), items[k].name, to_sql(e))
                     for k, e, slot in computed]
    except errors.PlanningError:
        return None  # an expression the proxy does not evaluate
    assert len(cols.exprs) == width  # the columns of computed items were all sent

    pushed = named.copy()
    pushed.set("expressions", cols.exprs)
    for key in ("order", "limit", "offset"):
        pushed.set(key, None)
    shard_order = _shard_order(funcs, cols)
    if shard_order:
        pushed.set("order", exp.Order(expressions=[
            # NULLs first ascending, last descending: MySQL's own order, no CASE added
            exp.Ordered(this=_unaliased(cols.exprs[key.column]).copy(), desc=key.desc, nulls_first=not key.desc)
            for key in shard_order]))
    plan: Plan = make_route(info, to_sql(pushed), field_query_of(pushed))
    innermost_route(plan).order_by = shard_order
    plan = Window(funcs, plan)
    if projected:
        plan = Projection(projected, plan)
    final_order = [(output(ref) if is_item else ref, desc) for is_item, ref, desc, _text in sort_keys]
    if sort_keys and final_order != [(k.column, k.desc) for k in shard_order[:len(final_order)]]:
        # (an ORDER BY the shards' order already gives passes through Window in that order)
        plan = MemorySort([OrderKey(output(ref) if is_item else ref, desc, text)
                           for is_item, ref, desc, text in sort_keys], plan,
                          upper_limit=Val(name=UPPER_LIMIT) if count is not None else None)  # bound by the Limit
    keep = [output(k) for k in range(len(items))]
    if keep != list(range(width + len(windows))):  # helpers to drop, or windows amid the items
        plan = SimpleProjection(keep, plan)
    if count is not None:
        plan = Limit(count, offset, plan)
    return plan


def _shard_order(funcs: list[WindowFunc], cols: _Columns) -> list[OrderKey]:
    """The order the shards sort and the route merges by: the first window's PARTITION BY
    and ORDER BY keys, or a later window's when the first's are a prefix of them (``OVER
    (ORDER BY a)`` and ``OVER (PARTITION BY a ORDER BY b)`` both read ``a, b`` without a
    sort at the proxy)."""
    def keys(fn: WindowFunc) -> list[OrderKey]:
        return [*(OrderKey(c, False, to_sql(_unaliased(cols.exprs[c]))) for c in fn.partition), *fn.order]

    def spec(ks: list[OrderKey]) -> list[tuple[int, bool]]:
        return [(k.column, k.desc) for k in ks]

    best = keys(funcs[0])
    for fn in funcs[1:]:
        candidate = keys(fn)
        if spec(candidate)[:len(best)] == spec(best):
            best = candidate
    return best


def _unaliased(e: exp.Expression) -> exp.Expression:
    return e.this if isinstance(e, exp.Alias) else e


def _item_of(e: exp.Expression, items: list[SelectItem]) -> int | None:
    pos = positional(e)
    if pos is not None:
        return pos - 1 if 1 <= pos <= len(items) else None
    for k, it in enumerate(items):
        if isinstance(e, exp.Column) and not e.table and it.alias and it.alias.lower() == e.name.lower():
            return k
        if same_expression(e, it.expr):
            return k
    return None


def _window_func(w: exp.Window, name: str, cols: _Columns, ctx: PlanContext) -> WindowFunc | None:
    if w.alias or w.args.get("first") is not None:
        return None  # a named window (OVER w), FIRST/LAST KEEP
    func = w.this
    if isinstance(func, exp.IgnoreNulls | exp.RespectNulls):
        return None
    found = _KINDS.get(type(func))
    if found is None or (found in _NO_ARGUMENT and (func.expressions or func.this is not None)):
        return None
    if found == WIN_NTH_VALUE and func.args.get("from_first") is not None:
        return None  # FROM FIRST / FROM LAST
    kind = found
    arg = -1
    offset: Val | None = None
    default: Val | None = None
    if kind == WIN_NTILE:
        offset = value_of(func.this, ctx.list_vars)
        if offset is None:
            return None
    elif kind not in _NO_ARGUMENT:
        target = func.this
        if isinstance(target, exp.Distinct) or target is None:
            return None
        if kind == WIN_COUNT and isinstance(target, exp.Star):
            kind = WIN_COUNT_STAR
        else:
            arg = cols.hidden(target)
        if kind == WIN_NTH_VALUE:
            offset = value_of(func.args.get("offset"), ctx.list_vars)
            if offset is None:
                return None
        if kind in (WIN_LAG, WIN_LEAD):
            if func.args.get("offset") is not None:
                offset = value_of(func.args["offset"], ctx.list_vars)
                if offset is None:
                    return None
            d = func.args.get("default")
            if d is not None:
                default = value_of(d, ctx.list_vars)
                if default is None:
                    return None
    partition = tuple(cols.hidden(p) for p in w.args.get("partition_by") or [])
    order_clause = w.args.get("order")
    order = tuple(OrderKey(cols.hidden(o.this), bool(o.args.get("desc")), to_sql(o.this))
                  for o in (order_clause.expressions if order_clause is not None else []))
    frame = _frame(w.args.get("spec"), len(order), kind, ctx)
    if frame is None:
        return None
    start, end, rows = frame
    return WindowFunc(kind, partition, order, start, end, rows, arg, offset, default, name, to_sql(w))


def _frame(spec: exp.WindowSpec | None, order_keys: int, kind: str,
           ctx: PlanContext) -> tuple[FrameBound, FrameBound, bool] | None:
    """The frame's ends and whether it counts rows; None for a frame left to Compute."""
    if spec is None or kind in _NO_FRAME:
        # MySQL's default: RANGE UNBOUNDED PRECEDING .. CURRENT ROW (the peers) with
        # ORDER BY, the whole partition without
        return _UNBOUNDED_BEFORE, _CURRENT if order_keys else _UNBOUNDED_AFTER, False
    rows = str(spec.args.get("kind") or "").upper() == "ROWS"
    # RANGE n PRECEDING / FOLLOWING needs exactly one ORDER BY key (else MySQL's error, from Compute)
    offsets = rows or order_keys == 1
    start = _bound(spec.args.get("start"), spec.args.get("start_side"), offsets, ctx)
    end = _bound(spec.args.get("end"), spec.args.get("end_side"), offsets, ctx) \
        if spec.args.get("end") is not None else _CURRENT
    if start is None or end is None or _rank(start) > _rank(end) \
            or start == _UNBOUNDED_AFTER or end == _UNBOUNDED_BEFORE:
        return None  # an illegal frame: the shard's server answers it with its own error
    return start, end, rows


def _rank(b: FrameBound) -> int:
    """Where a frame end lies: UNBOUNDED PRECEDING < n PRECEDING < CURRENT ROW < n FOLLOWING <
    UNBOUNDED FOLLOWING."""
    if b.kind == "current":
        return 2
    if b.kind == "unbounded":
        return 0 if b.preceding else 4
    return 1 if b.preceding else 3


def _bound(value: object, side: object, offsets: bool, ctx: PlanContext) -> FrameBound | None:
    text = value.upper() if isinstance(value, str) else ""
    preceding = str(side or "").upper() == "PRECEDING"
    if text == "UNBOUNDED":
        return FrameBound("unbounded", preceding=preceding)
    if text == "CURRENT ROW":
        return _CURRENT
    distance = value_of(value, ctx.list_vars) if offsets and isinstance(value, exp.Expression) else None
    if distance is None:
        return None  # INTERVAL, or RANGE over several keys: Compute
    return FrameBound("offset", preceding=preceding, distance=distance)
