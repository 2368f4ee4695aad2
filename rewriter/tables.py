"""Name resolution of table references against the vschema (Vitess semantics).

- ``ks.t`` always names keyspace ``ks``; an unqualified ``t`` is looked up in the
  session's keyspace, or across all keyspaces when none is selected (the name must
  be unique); routing rules are applied by ``VSchema.find_table``.
- ``information_schema``, ``performance_schema``, ``mysql`` and ``sys`` tables are
  system tables: they go to any shard (Route variant ``DBA``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from rewriter import errors
from vschema import errors as verr

SYSTEM_SCHEMAS = frozenset({"information_schema", "performance_schema", "mysql", "sys"})


@dataclass(slots=True)
class TableRef:
    """One table in a FROM clause, resolved."""

    node: exp.Table
    alias: str  # how columns refer to it (alias, or the table name)
    keyspace: str
    sharded: bool
    name: str  # the physical table name on the shards
    table: Any = None  # vschema Table (None for system tables)
    system: bool = False

    @property
    def is_reference(self) -> bool:
        return self.table is not None and getattr(self.table, "type", "") == "reference"

    @property
    def is_sequence(self) -> bool:
        return self.table is not None and getattr(self.table, "type", "") == "sequence"

    @property
    def pinned(self) -> bytes | None:
        p = getattr(self.table, "pinned", None) if self.table is not None else None
        if not p:
            return None
        return bytes.fromhex(p) if isinstance(p, str) else p

    def primary_vindex(self) -> Any:
        cvs = getattr(self.table, "column_vindexes", None) or []
        return cvs[0] if cvs else None

    def qualified(self) -> str:
        return f"{self.keyspace}.{self.name}"


def _vschema_errors() -> tuple[type[Exception], type[Exception], type[Exception]]:
    return verr.TableNotFound, verr.AmbiguousTable, verr.VSchemaError


def _resolve_name(vschema: Any, name: str, db: str | None, keyspace: str | None) -> Any:
    not_found, ambiguous, base = _vschema_errors()
    try:
        return vschema.find_table(name, db or keyspace or None)
    except not_found:
        where = db or keyspace
        shown = f"{where}.{name}" if where else name
        raise errors.TableNotFound(f"Table '{shown}' doesn't exist") from None
    except ambiguous as e:
        raise errors.AmbiguousTable(str(e)) from None
    except base as e:
        raise errors.PlanningError(str(e)) from None


def resolve_table(node: exp.Table, vschema: Any, keyspace: str | None) -> TableRef:
    name = node.name
    db = node.args.get("db")
    db_name = db.name if db is not None else None
    alias = node.alias or name
    if db_name is not None and db_name.lower() in SYSTEM_SCHEMAS:
        ks = keyspace or any_keyspace(vschema)
        return TableRef(node, alias, ks, _is_sharded(vschema, ks), name, None, system=True)
    if db_name is not None and db_name not in getattr(vschema, "keyspaces", {}):
        raise errors.PlanningError(f"VT05003: unknown database '{db_name}' in vschema")
    table = _resolve_name(vschema, name, db_name, keyspace)
    ks_name = _keyspace_name_of(table)
    sharded = _is_sharded(vschema, ks_name)
    return TableRef(node, alias, ks_name, sharded, table.name, table)


def _keyspace_name_of(table: Any) -> str:
    ks = table.keyspace
    return ks if isinstance(ks, str) else ks.name


def _is_sharded(vschema: Any, ks: str) -> bool:
    k = vschema.keyspaces.get(ks)
    return bool(k is not None and k.sharded)


def any_keyspace(vschema: Any) -> str:
    names = list(getattr(vschema, "keyspaces", {}))
    if not names:
        raise errors.PlanningError("VT09005: no database selected")
    unsharded = [n for n in names if not vschema.keyspaces[n].sharded]
    return sorted(unsharded or names)[0]


def ambient_keyspace(vschema: Any, keyspace: str | None) -> str:
    """The keyspace a statement without tables runs in: the session's, else any."""
    if keyspace and keyspace in vschema.keyspaces:
        return keyspace
    return any_keyspace(vschema)


def rewrite_table_node(ref: TableRef) -> bool:
    """Make the AST name the physical table with no keyspace qualifier, keeping how
    columns refer to it (alias). Returns whether the AST changed."""
    node = ref.node
    changed = False
    db = node.args.get("db")
    if db is not None and not ref.system:
        node.set("db", None)
        changed = True
    if node.name != ref.name:
        if not node.alias:
            node.set("alias", exp.TableAlias(this=exp.to_identifier(node.name)))
        node.set("this", exp.to_identifier(ref.name))
        changed = True
    return changed


def names_cte(t: exp.Table) -> bool:
    """Whether ``t`` reads a CTE of an enclosing ``WITH`` rather than a table: an
    unqualified name one of them defines, outside that CTE's own body unless the
    ``WITH`` is RECURSIVE (MySQL's scoping)."""
    if t.args.get("db") is not None:
        return False
    name = t.name.lower()
    node: exp.Expression | None = t
    while node is not None:
        parent = node.parent
        with_ = parent.args.get("with_") or parent.args.get("with") if parent is not None else None
        if isinstance(with_, exp.With):
            for cte in with_.expressions:
                if cte.alias_or_name.lower() != name:
                    continue
                inside_own_body = cte is node or any(a is cte for a in _ancestors(t))
                if not inside_own_body or with_.args.get("recursive"):
                    return True
        node = parent  # type: ignore[assignment]  # sqlglot types parses and parents as Expr, Expression's base
    return False


def _ancestors(e: exp.Expression) -> list[exp.Expression]:
    out = []
    p = e.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out  # type: ignore[return-value]  # sqlglot types parses and parents as Expr, Expression's base
