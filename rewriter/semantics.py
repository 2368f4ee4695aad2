"""Semantic analysis: which base table each column reference binds to, per scope.

The statement is qualified on a copy with sqlglot's optimizer (``qualify``) against the
tracked schema (``vschema.tracked_schema``): every column gets its table, ``*`` is
expanded, ``USING`` becomes ``ON``, CTE and derived-table names are told apart from
base tables. The copy is only read: plans that send the client's statement keep its
own text. Each base table occurrence (``Occurrence``) then knows

- the columns the statement reads from it (all of them for ``*``/``NATURAL`` or an
  unknown schema),
- the predicates that may be evaluated on its rows alone, before any join (pushed
  into the query that fetches them), respecting outer joins,
- its join keys (equalities with other occurrences: indexed when the rows are
  materialised) and the *reductions* it admits: ``b.y = a.x`` lets ``b``'s fetch be
  limited to the values ``a`` produced (a semi-join reduction, valid whenever ``b``'s
  rows only matter through that equality).

Unknown or ambiguous columns raise MySQL's 1054 / 1052 (``BindError``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope

from rewriter import errors
from rewriter.context import DIALECT, PlanContext
from rewriter.tables import TableRef, names_cte, resolve_table
from vschema.tracked_schema import TableSchema

TAG = "sg_occurrence"
SELECT_TAG = "sg_select"

# Functions whose value differs between the moment rows are fetched and the moment
# the rest of the statement runs, or per row: never evaluated early.
_VOLATILE_CLASSES: tuple[type[exp.Expression], ...] = (
    exp.Rand, exp.Uuid, exp.CurrentDate, exp.CurrentTime, exp.CurrentTimestamp,
)
_VOLATILE_NAMES = frozenset({
    "rand", "uuid", "uuid_short", "now", "sysdate", "curdate", "curtime", "current_date",
    "current_time", "current_timestamp", "localtime", "localtimestamp", "unix_timestamp",
    "utc_date", "utc_time", "utc_timestamp", "last_insert_id", "row_count", "found_rows",
    "connection_id", "nextval", "lastval", "setval", "get_lock", "release_lock", "sleep",
    "benchmark", "random_bytes", "is_free_lock", "is_used_lock", "master_pos_wait",
})


class BindError(errors.PlanningError):
    """A column that names no column of the tables in scope (1054) or several (1052)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Reduction:
    """``column`` of this occurrence may be limited to the values of ``source_column``
    of occurrence ``source`` (a semi-join reduction)."""

    column: str
    source: int
    source_column: str


@dataclass(eq=False)
class Occurrence:
    """One base table in the statement (a table named twice is two occurrences)."""

    tag: int
    ref: TableRef
    alias: str  # the name the qualified copy refers to it by
    schema: TableSchema | None
    columns: list[str] = field(default_factory=list)  # in table order
    all_columns: bool = False
    predicates: list[exp.Expression] = field(default_factory=list)  # over ``alias``
    join_keys: set[str] = field(default_factory=set)
    reductions: list[Reduction] = field(default_factory=list)
    null_supplied: bool = False
    # only whether rows with given values exist matters (the one table of an EXISTS or
    # IN subquery that does not aggregate): duplicates may be dropped at the shards
    existence_only: bool = False

    def add_column(self, name: str) -> None:
        if name.lower() not in (c.lower() for c in self.columns):
            self.columns.append(name)


@dataclass(eq=False)
class Bound:
    """The result of semantic analysis of one statement."""

    occurrences: dict[int, Occurrence]  # by tag
    qualified: exp.Expression  # the qualified copy
    cte_names: frozenset[str]
    # subqueries evaluated inside an occurrence's fetch (co-located with its rows): their
    # conjunct is already applied, and their tables need no copy
    absorbed_selects: set[int] = field(default_factory=set)
    absorbed_tables: set[int] = field(default_factory=set)


def check_set_operation_widths(stmt: exp.Expression) -> None:
    """Every UNION / INTERSECT / EXCEPT in ``stmt`` has arms of one width, or MySQL's 1222
    (arms planned apart would otherwise answer rows of different widths). Arms with a
    ``*`` are left to the shards."""
    for op in stmt.find_all(exp.SetOperation):
        widths = {w for w in (_width(op.this), _width(op.expression)) if w is not None}
        if len(widths) > 1:
            raise errors.DifferentColumnCount()


def _width(arm: exp.Expression | None) -> int | None:
    while isinstance(arm, exp.Subquery):
        arm = arm.this
    if isinstance(arm, exp.SetOperation):
        return _width(arm.this)
    if not isinstance(arm, exp.Select):
        return None
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
           for e in arm.expressions):
        return None
    return len(arm.expressions)


def cte_names(stmt: exp.Expression) -> frozenset[str]:
    return frozenset(c.alias_or_name for c in stmt.find_all(exp.CTE))


def base_tables(stmt: exp.Expression) -> list[exp.Table]:
    """The Table nodes of ``stmt`` that name stored tables (not CTEs, not ``dual``)."""
    out = []
    for t in stmt.find_all(exp.Table):
        if isinstance(t.parent, exp.Schema) or not t.name:
            continue
        if t.args.get("db") is None and (t.name.lower() == "dual" or names_cte(t)):
            continue
        out.append(t)
    return out


def tag_tables(stmt: exp.Expression, ctx: PlanContext) -> dict[int, TableRef]:
    """Tag each base table node of ``stmt`` (in place, in ``meta``) and resolve it."""
    refs: dict[int, TableRef] = {}
    for i, t in enumerate(base_tables(stmt)):
        t.meta[TAG] = i
        refs[i] = resolve_table(t, ctx.vschema, ctx.keyspace)
    for i, sel in enumerate(stmt.find_all(exp.Select)):
        sel.meta[SELECT_TAG] = i
    return refs


def _qualified_copy(stmt: exp.Expression, ctx: PlanContext
                    ) -> tuple[exp.Expression, dict[int, TableRef], dict[int, TableSchema | None], bool]:
    """A copy of ``stmt`` (base tables tagged) qualified against the tracked schema,
    when every table's columns are known (else the copy is only normalised)."""
    refs = {t.meta[TAG]: resolve_table(t, ctx.vschema, ctx.keyspace)
            for t in stmt.find_all(exp.Table) if TAG in t.meta}
    copy = stmt.copy()
    mapping: dict[str, dict[str, dict[str, str]]] = {}
    schemas: dict[int, TableSchema | None] = {}
    for t in copy.find_all(exp.Table):
        tag = t.meta.get(TAG)
        if tag is None:
            continue
        ref = refs[tag]
        ts = ctx.schema.table(ref.keyspace, ref.name) if ctx.schema is not None else None
        schemas[tag] = ts
        if not t.alias:
            t.set("alias", exp.TableAlias(this=exp.to_identifier(t.name)))
        t.set("db", exp.to_identifier(ref.keyspace))
        t.set("catalog", None)
        t.set("this", exp.to_identifier(ref.name))
        if ts is not None:
            mapping.setdefault(ref.keyspace, {})[ref.name] = {
                c.name.lower(): "TEXT" for c in ts.columns}
    known = all(s is not None for s in schemas.values())
    for col in copy.find_all(exp.Column):
        ident = col.args.get("this")
        if isinstance(ident, exp.Identifier):
            ident.set("this", ident.this.lower())
        if col.args.get("db") is not None:  # ks.t.col: the alias is t
            col.set("db", None)
            col.set("catalog", None)
    if known:
        try:
            copy = qualify(copy, schema=mapping, dialect=DIALECT,  # type: ignore[arg-type]  # sqlglot's qualify takes any nested mapping
                           validate_qualify_columns=True, identify=False,
                           quote_identifiers=False, expand_stars=True)
        except OptimizeError as e:
            text = str(e)
            name = text.split("'")[1] if "'" in text else ""
            if "could not be resolved" in text and name and _ambiguous(copy, name, mapping):
                text = f"Ambiguous column '{name}'"
            raise _bind_error(text) from None
    return copy, refs, schemas, known


def _ambiguous(stmt: exp.Expression, name: str, mapping: dict[str, dict[str, dict[str, str]]]) -> bool:
    """An unqualified ``name`` is a column of several sources of a scope that uses it
    (sqlglot reports it as unresolved: MySQL's 1052, not 1054)."""
    low = name.lower()
    try:
        scopes = list(traverse_scope(stmt))
    except OptimizeError:
        return False
    for scope in scopes:
        if not any(not c.table and c.name.lower() == low for c in scope.columns):
            continue
        having = 0
        for src in scope.sources.values():
            if isinstance(src, exp.Table):
                cols = mapping.get(src.db, {}).get(src.name, {})
            elif isinstance(src, Scope) and isinstance(src.expression, exp.Query):
                cols = {n.lower(): "" for n in src.expression.named_selects}
            else:
                continue
            having += low in cols
        if having > 1:
            return True
    return False


COLUMN_TAG = "sg_column"


def qualify_correlated_columns(stmt: exp.Expression, ctx: PlanContext) -> None:
    """Give every unqualified column of a subquery that refers to an enclosing query's
    table that table's name (in place), so no planner takes a correlated subquery
    for an uncorrelated one. Needs every table's columns; otherwise nothing changes."""
    if not any(True for _ in stmt.find_all(exp.Subquery, exp.Exists)):
        return
    if cte_names(stmt):
        return
    tag_tables(stmt, ctx)
    originals: dict[int, exp.Column] = {}
    for i, col in enumerate(stmt.find_all(exp.Column)):
        col.meta[COLUMN_TAG] = i
        originals[i] = col
    copy, _refs, _schemas, known = _qualified_copy(stmt, ctx)
    if not known:
        return
    for scope in traverse_scope(copy):
        for col in scope.columns:
            i = col.meta.get(COLUMN_TAG)  # type: ignore[assignment]  # checked for None on the next line
            if i is None or not col.table:
                continue
            _src, local = _source_of(scope, col.table)
            orig = originals.get(i)
            if not local and orig is not None and not orig.table:
                orig.set("table", exp.to_identifier(col.table))


def bind(stmt: exp.Expression, ctx: PlanContext) -> Bound:
    """Analyse ``stmt`` (its base tables already tagged by ``tag_tables``)."""
    copy, refs, schemas, known = _qualified_copy(stmt, ctx)
    occurrences: dict[int, Occurrence] = {}
    scopes = list(traverse_scope(copy))
    for scope in scopes:
        for name, src in scope.sources.items():
            if isinstance(src, exp.Table) and TAG in src.meta:
                tag = src.meta[TAG]
                occurrences[tag] = Occurrence(tag, refs[tag], name, schemas.get(tag))
    for occ in occurrences.values():
        if occ.schema is None:
            occ.all_columns = True
    absorbed_selects: set[int] = set()
    absorbed_tables: set[int] = set()
    for scope in scopes:
        _collect_columns(scope, occurrences, known)
    for scope in reversed(scopes):  # outer scopes first: their absorbed subqueries are skipped
        if isinstance(scope.expression, exp.Select):
            if scope.expression.meta.get(SELECT_TAG) in absorbed_selects:
                continue
            _collect_predicates(scope, occurrences, absorbed_selects, absorbed_tables)
    for tag in absorbed_tables:
        occurrences.pop(tag, None)
    for occ in occurrences.values():
        occ.reductions = [r for r in occ.reductions if r.source not in absorbed_tables]
    for occ in occurrences.values():
        if occ.all_columns and occ.schema is not None:
            occ.columns = occ.schema.column_names()
        elif occ.schema is not None:
            order = {c.lower(): i for i, c in enumerate(occ.schema.column_names())}
            occ.columns = [occ.schema.columns[order[c.lower()]].name for c in occ.columns
                           if c.lower() in order]
            occ.columns.sort(key=lambda c: order[c.lower()])
    return Bound(occurrences, copy, cte_names(stmt), absorbed_selects, absorbed_tables)


def _bind_error(text: str) -> BindError:
    # sqlglot: "Column 'x' could not be resolved" / "Ambiguous column 'x' ..."
    low = text.lower()
    name = text.split("'")[1] if "'" in text else text
    if "ambiguous" in low:
        return BindError(f"Column '{name}' in field list is ambiguous", 1052)
    return BindError(f"Unknown column '{name}' in 'field list'", 1054)


def _source_of(scope: Scope, table_alias: str) -> tuple[exp.Expression | Scope | None, bool]:
    """The source ``table_alias`` names from ``scope`` (walking out to enclosing
    scopes for correlated references), and whether it was found in ``scope`` itself."""
    s: Scope | None = scope
    local = True
    while s is not None:
        src = s.sources.get(table_alias)
        if src is not None:
            return src, local
        s = s.parent
        local = False
    return None, False


def _occurrence_of(scope: Scope, col: exp.Column, occs: dict[int, Occurrence]) -> tuple[Occurrence | None, bool]:
    src, local = _source_of(scope, col.table)
    if isinstance(src, exp.Table) and TAG in src.meta:
        return occs.get(src.meta[TAG]), local
    return None, local


def _collect_columns(scope: Scope, occs: dict[int, Occurrence], known: bool) -> None:
    expr = scope.expression
    local_occs = [occs[s.meta[TAG]] for s in scope.sources.values()
                  if isinstance(s, exp.Table) and TAG in s.meta]
    natural = isinstance(expr, exp.Select) and any(
        (j.args.get("method") or "").upper() == "NATURAL" for j in expr.args.get("joins") or [])
    stars = isinstance(expr, exp.Select) and any(
        isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
        for e in expr.expressions)
    if natural or stars or not known:
        for o in local_occs:
            o.all_columns = True
    if len(local_occs) == 1 and len(scope.sources) == 1 and _is_existence_test(expr):  # type: ignore[arg-type]  # sqlglot types parses and parents as Expr, Expression's base
        local_occs[0].existence_only = True
    for col in scope.columns:
        if not col.table:
            if len(local_occs) == 1 and not known:
                local_occs[0].add_column(col.name)
            continue
        occ, _local = _occurrence_of(scope, col, occs)
        if occ is not None:
            occ.add_column(col.name)


def _is_existence_test(sel: exp.Expression) -> bool:
    """``sel`` is the body of EXISTS or of ``x IN (...)`` and does not aggregate."""
    if not isinstance(sel, exp.Select):
        return False
    parent = sel.parent.parent if isinstance(sel.parent, exp.Subquery) else sel.parent
    if not (isinstance(parent, exp.Exists) or (isinstance(parent, exp.In) and parent.args.get("query") is not None)):
        return False
    if any(sel.args.get(k) for k in ("group", "having", "limit", "offset", "windows")):
        return False
    return not any(True for _ in sel.find_all(exp.AggFunc, exp.Window))


def simplify_exists(stmt: exp.Expression) -> None:
    """``EXISTS (SELECT <anything> ...)`` -> ``EXISTS (SELECT 1 ...)`` (in place) when the
    select list cannot change the answer (no aggregate, so no always-present row): its
    columns then need not be fetched."""
    for e in stmt.find_all(exp.Exists):
        sel = e.this
        if isinstance(sel, exp.Select) and not sel.args.get("group") and not sel.args.get("having") \
                and not any(True for x in sel.expressions for _ in x.find_all(exp.AggFunc, exp.Window)):
            sel.set("expressions", [exp.Literal.number(1)])


def conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    if e is None:
        return []
    if isinstance(e, exp.And):
        return list(e.flatten())  # type: ignore[arg-type]  # sqlglot types parses and parents as Expr, Expression's base
    if isinstance(e, exp.Paren) and isinstance(e.this, exp.And):
        return conjuncts(e.this)
    return [e]


def _null_supplied(sel: exp.Select, occs: dict[int, Occurrence]) -> set[int]:
    """Tags of the occurrences of ``sel``'s FROM that an outer join may NULL-extend."""
    out: set[int] = set()
    seen: list[int] = []
    frm = sel.args.get("from_") or sel.args.get("from")

    def tags_in(node: exp.Expression) -> list[int]:
        return [t.meta[TAG] for t in node.find_all(exp.Table) if TAG in t.meta]

    if frm is not None:
        seen.extend(tags_in(frm.this))
    for j in sel.args.get("joins") or []:
        side = (j.args.get("side") or "").upper()
        here = tags_in(j.this)
        if not isinstance(j.this, exp.Table):
            out.update(here)  # a parenthesised join: not analysed, nothing pushed in
        if side in ("LEFT", "FULL"):
            out.update(here)
        if side in ("RIGHT", "FULL"):
            out.update(seen)
        seen.extend(here)
    return out


def _pushable(pred: exp.Expression, subqueries: bool = False) -> bool:
    """Whether ``pred`` may be evaluated where a table's rows are fetched: nothing volatile
    or session-bound; no subquery, aggregate or window unless ``subqueries`` (a condition
    whose subqueries run on the same shard)."""
    for node in pred.walk():
        if isinstance(node, exp.Window) or (
                not subqueries and isinstance(node, exp.Subquery | exp.Select | exp.AggFunc | exp.Star)):
            return False
        if isinstance(node, (*_VOLATILE_CLASSES, exp.Parameter, exp.SessionParameter, exp.PropertyEQ)):
            return False
        if isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if name in _VOLATILE_NAMES:
                return False
    return True


def _local_columns_occurrence(scope: Scope, pred: exp.Expression,
                              occs: dict[int, Occurrence]) -> Occurrence | None:
    """The one local base occurrence all of ``pred``'s columns belong to, else None."""
    found: Occurrence | None = None
    cols = list(pred.find_all(exp.Column))
    if not cols:
        return None
    for col in cols:
        if not col.table:
            return None
        occ, local = _occurrence_of(scope, col, occs)
        if occ is None or not local:
            return None
        if found is not None and found is not occ:
            return None
        found = occ
    return found


def _collect_predicates(scope: Scope, occs: dict[int, Occurrence],
                        absorbed_selects: set[int], absorbed_tables: set[int]) -> None:
    sel = scope.expression
    assert isinstance(sel, exp.Select)
    nulls = _null_supplied(sel, occs)
    for tag in nulls:
        if tag in occs:
            occs[tag].null_supplied = True
    where = sel.args.get("where")
    # (conjunct, tags it may be pushed into / reduce)
    candidates: list[tuple[exp.Expression, set[int] | None]] = []
    for p in conjuncts(where.this if where is not None else None):
        candidates.append((p, None))  # None: any local occurrence not NULL-extended
    for j in sel.args.get("joins") or []:
        side = (j.args.get("side") or "").upper()
        if not isinstance(j.this, exp.Table) or TAG not in j.this.meta:
            continue
        right = j.this.meta[TAG]
        if side in ("", "INNER", "CROSS", "LEFT"):
            for p in conjuncts(j.args.get("on")):
                candidates.append((p, {right}))
    stated = {id(p) for p, _ in candidates}  # conjuncts as written (not implied ones)
    for pred, allowed in list(candidates):
        candidates.extend(_implied_by_disjunction(scope, pred, allowed, occs))
    for pred, allowed in candidates:
        if any(True for _ in pred.find_all(exp.Select)):
            target = _colocated_subquery_target(scope, pred, occs) if id(pred) in stated else None
            if target is not None and target.tag not in absorbed_tables and (
                    (target.tag in allowed) if allowed is not None else target.tag not in nulls):
                target.predicates.append(pred)
                absorbed_selects.update(x.meta[SELECT_TAG] for x in pred.find_all(exp.Select)
                                        if SELECT_TAG in x.meta)
                absorbed_tables.update(t.meta[TAG] for t in pred.find_all(exp.Table) if TAG in t.meta)
            else:
                _in_subquery(scope, pred, occs, allowed)
            continue
        occ = _local_columns_occurrence(scope, pred, occs)
        if occ is not None:
            ok = (occ.tag in allowed) if allowed is not None else occ.tag not in nulls
            if ok and _pushable(pred):
                occ.predicates.append(pred)
            continue
        _equality(scope, pred, occs, allowed)
        _in_subquery(scope, pred, occs, allowed)


def _colocated_subquery_target(scope: Scope, pred: exp.Expression,
                               occs: dict[int, Occurrence]) -> Occurrence | None:
    """The occurrence ``pred`` (a condition with subqueries) can be evaluated with, on
    that occurrence's own shard: ``pred``'s outer columns all belong to one local
    sharded occurrence T, and every table inside is a reference table of T's keyspace
    or a sharded one tied to T by equal primary vindex values (``l2.l_orderkey =
    l1.l_orderkey``), so every row the subquery reads lives where T's row lives."""
    inner_aliases = {t.alias_or_name for t in pred.find_all(exp.Table)}
    target: Occurrence | None = None
    for col in pred.find_all(exp.Column):
        if not col.table:
            return None
        if col.table in inner_aliases:
            continue
        occ, local = _occurrence_of(scope, col, occs)
        if occ is None or not local or (target is not None and occ is not target):
            return None
        target = occ
    if target is None or not target.ref.sharded or target.ref.is_reference or target.ref.pinned is not None:
        return None
    vcol = _vindex_column(target.ref)
    if vcol is None or not _pushable(pred, subqueries=True):
        return None
    tied = {target.alias: target.ref}
    inner = []
    for t in pred.find_all(exp.Table):
        if TAG not in t.meta:
            return None  # a CTE or derived name: not on the shard
        ref = resolve_ref(t, occs)
        if ref is None or ref.keyspace != target.ref.keyspace:
            return None
        if ref.sharded and not ref.is_reference:
            inner.append((t, ref))
    pending = list(inner)
    while pending:
        progress = False
        for t, ref in list(pending):
            if _tied(t, ref, tied):
                tied[t.alias_or_name] = ref
                pending.remove((t, ref))
                progress = True
        if not progress:
            return None
    return target


def resolve_ref(t: exp.Table, occs: dict[int, Occurrence]) -> TableRef | None:
    occ = occs.get(t.meta[TAG])
    return occ.ref if occ is not None else None


def _vindex_column(ref: TableRef) -> str | None:
    cv = ref.primary_vindex()
    if cv is None or len(cv.columns) != 1:
        return None
    return cv.columns[0].lower()


def _vindex_kind(ref: TableRef) -> object:
    cv = ref.primary_vindex()
    v = cv.vindex if cv is not None else None
    return (type(v).__name__, getattr(v, "name", None)) if getattr(v, "needs_lookup", False) else type(v).__name__


def _tied(t: exp.Table, ref: TableRef, tied: dict[str, TableRef]) -> bool:
    """``t``'s own WHERE equates its vindex column with a tied table's, or its select is
    ``tied.v IN (SELECT t.v ...)`` (not negated)."""
    col = _vindex_column(ref)
    sel = t.find_ancestor(exp.Select)
    if col is None or sel is None or ref.pinned is not None:
        return False
    in_pred = sel.parent.parent if isinstance(sel.parent, exp.Subquery) else sel.parent
    if isinstance(in_pred, exp.In) and not isinstance(in_pred.parent, exp.Not) \
            and len(sel.expressions) == 1 and isinstance(in_pred.this, exp.Column):
        item = sel.expressions[0]
        item = item.this if isinstance(item, exp.Alias) else item
        outer = tied.get(in_pred.this.table)
        if isinstance(item, exp.Column) and item.table == t.alias_or_name and item.name.lower() == col \
                and outer is not None and _vindex_column(outer) == in_pred.this.name.lower() \
                and _vindex_kind(outer) == _vindex_kind(ref):
            return True
    where = sel.args.get("where")
    alias = t.alias_or_name
    for p in conjuncts(where.this if where is not None else None):
        if not isinstance(p, exp.EQ):
            continue
        for mine, theirs in ((p.this, p.expression), (p.expression, p.this)):
            if not (isinstance(mine, exp.Column) and isinstance(theirs, exp.Column)):
                continue
            if mine.table != alias or mine.name.lower() != col:
                continue
            other = tied.get(theirs.table)
            if other is not None and _vindex_column(other) == theirs.name.lower() \
                    and _vindex_kind(other) == _vindex_kind(ref):
                return True
    return False


def _implied_by_disjunction(scope: Scope, pred: exp.Expression, allowed: set[int] | None,
                            occs: dict[int, Occurrence]) -> list[tuple[exp.Expression, set[int] | None]]:
    """From ``(a AND b AND x) OR (a AND c AND y)``: ``a`` (in every branch) holds, and for
    each table the OR of its own conditions in every branch holds (``b OR c`` if both
    are about one table) — filters and join keys TPC-H Q7/Q19 only state this way."""
    while isinstance(pred, exp.Paren):
        pred = pred.this
    if not isinstance(pred, exp.Or):
        return []
    branches = [conjuncts(d.this if isinstance(d, exp.Paren) else d) for d in pred.flatten()]  # type: ignore[arg-type]  # sqlglot types parses and parents as Expr, Expression's base
    out: list[tuple[exp.Expression, set[int] | None]] = []
    texts = [{c.sql(): c for c in b} for b in branches]
    for text, c in texts[0].items():
        if all(text in t for t in texts[1:]):
            out.append((c, allowed))
    per_table: dict[int, list[list[exp.Expression]]] = {}
    for i, branch in enumerate(branches):
        for c in branch:
            occ = _local_columns_occurrence(scope, c, occs)
            if occ is not None and _pushable(c):
                per_table.setdefault(occ.tag, [[] for _ in branches])[i].append(c)
    for tag, parts in per_table.items():
        if all(parts) and tag in occs:
            ors = [exp.and_(*p) if len(p) > 1 else p[0] for p in parts]
            implied = exp.or_(*[exp.paren(o.copy()) for o in ors])
            if len({o.sql() for o in ors}) == 1:
                implied = ors[0].copy()  # type: ignore[assignment]  # copy() keeps the Condition type
            out.append((implied, allowed))  # type: ignore[arg-type]  # copy() keeps the Condition type
    return out


def _in_subquery(scope: Scope, pred: exp.Expression, occs: dict[int, Occurrence],
                 allowed: set[int] | None) -> None:
    """``t.x IN (SELECT u.y FROM u ...)`` (a conjunct, not negated): ``t`` needs only rows
    whose ``x`` is among ``u``'s ``y`` values (a semi-join); and when the subquery does
    not aggregate, ``u`` only rows whose ``y`` is among ``t``'s ``x`` values."""
    if not isinstance(pred, exp.In) or pred.args.get("query") is None or not isinstance(pred.this, exp.Column):
        return
    sub = pred.args["query"]
    sel = sub.this if isinstance(sub, exp.Subquery) else sub
    if not isinstance(sel, exp.Select) or len(sel.expressions) != 1 or sel.args.get("limit"):
        return
    item = sel.expressions[0]
    item = item.this if isinstance(item, exp.Alias) else item
    if not isinstance(item, exp.Column) or not item.table:
        return
    inner = next((t for t in sel.find_all(exp.Table) if t.alias_or_name == item.table and TAG in t.meta
                  and t.find_ancestor(exp.Select) is sel), None)
    t_occ, local = _occurrence_of(scope, pred.this, occs)
    u_occ = occs.get(inner.meta[TAG]) if inner is not None else None
    if t_occ is None or u_occ is None or t_occ is u_occ or not local:
        return
    if not _same_type_class(t_occ, pred.this.name, u_occ, item.name):
        return
    t_occ.join_keys.add(pred.this.name)
    u_occ.join_keys.add(item.name)
    if allowed is None or t_occ.tag in allowed:
        t_occ.reductions.append(Reduction(pred.this.name, u_occ.tag, item.name))
    aggregates = sel.args.get("group") or sel.args.get("having") or any(
        isinstance(n, exp.AggFunc | exp.Window) for n in sel.find_all(exp.AggFunc, exp.Window))
    if not aggregates and not u_occ.null_supplied:
        u_occ.reductions.append(Reduction(item.name, t_occ.tag, pred.this.name))


def _equality(scope: Scope, pred: exp.Expression, occs: dict[int, Occurrence],
              allowed: set[int] | None) -> None:
    """``a.x = b.y``: both columns are join keys; a local side may be reduced by the other."""
    if not isinstance(pred, exp.EQ):
        return
    a, b = pred.this, pred.expression
    if not (isinstance(a, exp.Column) and isinstance(b, exp.Column) and a.table and b.table):
        return
    oa, la = _occurrence_of(scope, a, occs)
    ob, lb = _occurrence_of(scope, b, occs)
    if oa is None or ob is None or oa is ob:
        return
    oa.join_keys.add(a.name)
    ob.join_keys.add(b.name)
    for target, tcol, local, source, scol in ((oa, a.name, la, ob, b.name), (ob, b.name, lb, oa, a.name)):
        if not local:
            continue
        if allowed is not None and target.tag not in allowed:
            continue
        if not _same_type_class(target, tcol, source, scol):
            continue
        target.reductions.append(Reduction(tcol, source.tag, scol))


_INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
_STRINGS = frozenset({"char", "varchar", "text", "tinytext", "mediumtext", "longtext"})


def _type_class(occ: Occurrence, column: str) -> tuple[str, str | None] | None:
    if occ.schema is None:
        return None
    c = occ.schema.column(column)
    if c is None:
        return None
    t = c.data_type.lower()
    if t in _INTEGERS:
        return ("int", None)
    if t in _STRINGS:
        return ("str", c.collation)
    if t in ("date", "datetime", "timestamp", "decimal"):
        return (t, c.column_type.lower() if t == "decimal" else None)
    return None


def _same_type_class(a: Occurrence, acol: str, b: Occurrence, bcol: str) -> bool:
    """Reductions compare literals under the reduced column's type: only between
    columns that compare the same way on either side."""
    ta, tb = _type_class(a, acol), _type_class(b, bcol)
    return ta is not None and ta == tb
