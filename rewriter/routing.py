"""Choosing a route from predicates: which shards a statement must visit.

Looks at the top-level AND-ed predicates for conditions on a table's vindex columns:

- ``col = v`` on a unique vindex -> ``EqualUnique``; non-unique -> ``Equal``;
- ``col IN (...)`` -> ``IN`` (the list is split per shard at execution);
- ``col = a OR col = b OR col IN (...)`` -> ``MultiEqual``;
- two equalities on one vindex column with different constants -> ``None``;
- otherwise ``Scatter``.

Among candidates the cheapest wins: EqualUnique < Equal < IN < MultiEqual, then the
vindex ``cost``. Values are plan ``Val``s: bind variables of the normalised query or
constants (when planning literal SQL, e.g. for VEXPLAIN).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlglot import exp

from rewriter import errors
from rewriter.nodes import Opcode, Val
from rewriter.tables import TableRef

_RANK = {Opcode.EqualUnique: 0, Opcode.Equal: 1, Opcode.IN: 2, Opcode.MultiEqual: 3}


def _flatten(e: exp.Expression, kind: type[exp.Connector]) -> list[exp.Expression]:
    """The operands of a chain of ``kind`` (through parentheses), left to right; a loop,
    not recursion: a chain may hold thousands of terms."""
    out: list[exp.Expression] = []
    stack = [e]
    while stack:
        node = stack.pop()
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, kind):
            stack.append(node.expression)
            stack.append(node.this)
        else:
            out.append(node)
    return out


def conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    return [] if e is None else _flatten(e, exp.And)


def disjuncts(e: exp.Expression) -> list[exp.Expression]:
    return _flatten(e, exp.Or)


def value_of(e: exp.Expression, list_vars: frozenset[str] | set[str]) -> Val | None:
    """A plan value for a literal / bind variable expression; None for anything else
    (and for list bind variables, which only IN may take)."""
    if isinstance(e, exp.Paren):
        return value_of(e.this, list_vars)
    if isinstance(e, exp.Placeholder):
        name = e.name
        if not name or name in list_vars:
            return None
        return Val(name=name)
    if isinstance(e, exp.Literal):
        if e.is_string:
            return Val(const=e.this)
        return Val(const=_number(e.this))
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
        return Val(const=-_number(e.this.this))
    if isinstance(e, exp.Null):
        return Val(const=None)
    # 0x41 / x'41' are a number or a binary string depending on the column's type: no
    # single vindex value (the route scatters, which stays exact)
    if isinstance(e, exp.Introducer) and e.this.lower() == "_binary" \
            and isinstance(e.expression, exp.Literal) and e.expression.is_string:
        return Val(const=e.expression.this.encode())
    return None


def is_constant_false(pred: exp.Expression) -> bool:
    """``WHERE 1 = 0``, ``WHERE false``, ``WHERE 0``: no row can match (Vitess routes
    such a query to no shard)."""
    while isinstance(pred, exp.Paren):
        pred = pred.this
    if isinstance(pred, exp.Boolean):
        return not pred.this
    if isinstance(pred, exp.Literal) and not pred.is_string:
        try:
            return Decimal(pred.this) == 0
        except ArithmeticError:
            return False
    if isinstance(pred, exp.EQ | exp.NEQ) and isinstance(pred.this, exp.Literal) \
            and isinstance(pred.expression, exp.Literal) \
            and not pred.this.is_string and not pred.expression.is_string:
        try:
            equal = Decimal(pred.this.this) == Decimal(pred.expression.this)
        except ArithmeticError:
            return False
        return not equal if isinstance(pred, exp.EQ) else equal
    return False


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return Decimal(text)


@dataclass(slots=True)
class RouteChoice:
    opcode: Opcode
    vindex_name: str = ""
    vindex: Any = None
    values: list[Val] = field(default_factory=list)
    in_var: str | None = None
    table: TableRef | None = None
    needs_lookup: bool = False


def column_table(col: exp.Column, refs: list[TableRef]) -> TableRef | None:
    """The table a column belongs to (by qualifier, or the only table in scope)."""
    q = col.table
    if q:
        for r in refs:
            if r.alias == q:
                return r
        return None
    if len(refs) == 1:
        return refs[0]
    return None


def _vindex_for_column(ref: TableRef, column: str) -> Any:
    """Single-column vindexes of the table whose column is ``column`` (all of them)."""
    out = []
    for cv in getattr(ref.table, "column_vindexes", None) or []:
        cols = [c.lower() for c in cv.columns]
        if len(cols) == 1 and cols[0] == column.lower():
            out.append(cv)
    return out


def _is_unique(vindex: Any) -> bool:
    return bool(getattr(vindex, "unique", False))


def _needs_lookup(vindex: Any) -> bool:
    return bool(getattr(vindex, "needs_lookup", False))


def _cost(vindex: Any) -> int:
    return int(getattr(vindex, "cost", 1))


def choose_route(
    ref: TableRef,
    refs: list[TableRef],
    predicates: list[exp.Expression],
    list_vars: frozenset[str] | set[str],
) -> RouteChoice:
    """The best route for sharded table ``ref`` given the AND-ed ``predicates``."""
    candidates: list[tuple[tuple[int, int, int], RouteChoice]] = []
    equal_consts: dict[str, set[Any]] = {}
    order = 0
    for pred in predicates:
        order += 1
        if is_constant_false(pred):
            return RouteChoice(Opcode.None_, table=ref)
        choice = _choice_for_predicate(ref, refs, pred, list_vars, equal_consts)
        if choice is None:
            continue
        if choice.opcode is Opcode.None_:
            return choice
        rank = (_RANK[choice.opcode], _cost(choice.vindex), order)
        candidates.append((rank, choice))
    if not candidates:
        return RouteChoice(Opcode.Scatter, table=ref)
    candidates.sort(key=lambda c: c[0])
    return candidates[0][1]


def _choice_for_predicate(
    ref: TableRef,
    refs: list[TableRef],
    pred: exp.Expression,
    list_vars: frozenset[str] | set[str],
    equal_consts: dict[str, set[Any]],
) -> RouteChoice | None:
    if isinstance(pred, exp.Paren):
        return _choice_for_predicate(ref, refs, pred.this, list_vars, equal_consts)
    if isinstance(pred, exp.EQ):
        col, val = _column_and_value(pred, list_vars)
        if col is None or column_table(col, refs) is not ref:
            return None
        cvs = _vindex_for_column(ref, col.name)
        if not cvs:
            return None
        cv = min(cvs, key=lambda c: (_cost(c.vindex), not _is_unique(c.vindex)))
        # a vindex column equal to two different constants: no row can match
        if val.name is None:  # type: ignore[union-attr]  # _column_and_value returns a value whenever it returns a column
            seen = equal_consts.setdefault(col.name.lower(), set())
            seen.add(_const_key(val.const))  # type: ignore[union-attr]  # _column_and_value returns a value whenever it returns a column
            if len(seen) > 1:
                return RouteChoice(Opcode.None_, table=ref)
        if val.name is None and val.const is None:  # type: ignore[union-attr]  # _column_and_value returns a value whenever it returns a column
            return RouteChoice(Opcode.None_, table=ref)  # col = NULL matches nothing
        op = Opcode.EqualUnique if _is_unique(cv.vindex) else Opcode.Equal
        return RouteChoice(op, cv.name, cv.vindex, [val], table=ref, needs_lookup=_needs_lookup(cv.vindex))  # type: ignore[list-item]  # _column_and_value returns a value whenever it returns a column
    if isinstance(pred, exp.In) and not pred.args.get("query") and not pred.args.get("is_global"):
        col = pred.this
        if not isinstance(col, exp.Column) or column_table(col, refs) is not ref:
            return None
        cvs = _vindex_for_column(ref, col.name)
        if not cvs:
            return None
        cv = min(cvs, key=lambda c: _cost(c.vindex))
        items = pred.expressions
        if len(items) == 1 and isinstance(items[0], exp.Placeholder) and items[0].name in list_vars:
            name = items[0].name
            return RouteChoice(Opcode.IN, cv.name, cv.vindex, [Val(name=name)], in_var=name,
                               table=ref, needs_lookup=_needs_lookup(cv.vindex))
        vals = [value_of(i, list_vars) for i in items]
        if any(v is None for v in vals) or not vals:
            return None
        # NULL is never IN anything: IN (NULL) matches no row
        vals = [v for v in vals if v.name is not None or v.const is not None]  # type: ignore[union-attr]
        if not vals:
            return RouteChoice(Opcode.None_, table=ref)
        return RouteChoice(Opcode.IN, cv.name, cv.vindex, vals, table=ref,  # type: ignore[arg-type]
                           needs_lookup=_needs_lookup(cv.vindex))
    if isinstance(pred, exp.Or):
        return _multi_equal(ref, refs, pred, list_vars)
    return None


def _const_key(v: Any) -> Any:
    if isinstance(v, str):
        return ("s", v.lower())
    return ("n", v)


def _column_and_value(pred: exp.EQ, list_vars: Any) -> tuple[exp.Column | None, Val | None]:
    a, b = pred.this, pred.expression
    if isinstance(a, exp.Column):
        v = value_of(b, list_vars)
        if v is not None:
            return a, v
    if isinstance(b, exp.Column):
        v = value_of(a, list_vars)
        if v is not None:
            return b, v
    return None, None


def _multi_equal(ref: TableRef, refs: list[TableRef], pred: exp.Or, list_vars: Any) -> RouteChoice | None:
    column: str | None = None
    vals: list[Val] = []
    for d in disjuncts(pred):
        if isinstance(d, exp.EQ):
            col, val = _column_and_value(d, list_vars)
            if col is None:
                return None
            items = [val]
        elif isinstance(d, exp.In) and not d.args.get("query") and isinstance(d.this, exp.Column):
            col = d.this
            items = [value_of(i, list_vars) for i in d.expressions]
            if len(d.expressions) == 1 and isinstance(d.expressions[0], exp.Placeholder) and d.expressions[0].name in list_vars:
                return None  # a list bind var inside OR: keep it simple, scatter
        else:
            return None
        if column_table(col, refs) is not ref or any(v is None for v in items):
            return None
        if column is None:
            column = col.name.lower()
        elif column != col.name.lower():
            return None
        vals.extend(items)  # type: ignore[arg-type]
    if column is None:
        return None
    cvs = _vindex_for_column(ref, column)
    if not cvs:
        return None
    cv = min(cvs, key=lambda c: _cost(c.vindex))
    return RouteChoice(Opcode.MultiEqual, cv.name, cv.vindex, vals, table=ref,
                       needs_lookup=_needs_lookup(cv.vindex))


@dataclass(slots=True)
class RouteInfo:
    """Where a whole SELECT (with its subqueries) can be sent, if one route can take it."""

    opcode: Opcode
    keyspace: str
    sharded: bool
    choice: RouteChoice | None = None
    tables: list[TableRef] = field(default_factory=list)
    target_ksid: bytes | None = None


def sharded_route(ks: str, tables: list[TableRef], sharded: list[TableRef], predicates: list[exp.Expression],
                  list_vars: frozenset[str] | set[str]) -> RouteInfo:
    """The route of ``tables`` (of sharded keyspace ``ks``) whose sharded tables
    ``sharded`` are joined on their vindex (or one pinned table): the best variant any
    of them gets from the AND-ed ``predicates``."""
    pinned = [r for r in sharded if r.pinned is not None]
    if pinned:
        return RouteInfo(Opcode.ByDestination, ks, True, tables=tables, target_ksid=pinned[0].pinned)
    best: RouteChoice | None = None
    for r in sharded:
        if r.primary_vindex() is None:
            raise errors.PlanningError(f"table {r.name} has no vindex in keyspace {ks}")
        c = choose_route(r, sharded, predicates, list_vars)
        if c.opcode is Opcode.None_:
            best = c
            break
        if best is None or _rank(c) < _rank(best):
            best = c
    assert best is not None
    return RouteInfo(best.opcode, ks, True, choice=best, tables=tables)


def _rank(c: RouteChoice) -> tuple[int, int]:
    order = [Opcode.EqualUnique, Opcode.Equal, Opcode.IN, Opcode.MultiEqual, Opcode.Scatter]
    return order.index(c.opcode), int(getattr(c.vindex, "cost", 1) if c.vindex else 99)


def vindex_identity(cv: Any) -> Any:
    """What two column vindexes must share for equal column values to mean the same
    shard: the vindex type (and, for a lookup vindex, the vindex itself)."""
    v = cv.vindex
    return (type(v).__name__, getattr(v, "name", cv.name)) if getattr(v, "needs_lookup", False) else type(v).__name__
