"""``plan(sql_or_ast, vschema, keyspace) -> Plan``: the pure planner entry point.

Dispatches on the statement: SELECT/set operations -> ``read_planner`` (operators,
rules, primitives; or Compute), INSERT/UPDATE/DELETE -> ``dml_planner``, ``SELECT NEXT n VALUES
FROM seq`` -> ``SequenceNext``, and sessions targeted at one shard (``USE ks:-80``)
-> ``Send``. A read's ``information_schema`` tables leave out the proxy's own tables
(``internal_tables``). ``keyspace`` is the session's keyspace: ``None``, ``"ks"`` or a targeted
``"ks:-80"`` / ``"ks@primary"``.
"""

from __future__ import annotations

import re
from typing import Any

import sqlglot
from sqlglot import exp

from rewriter import errors
from rewriter.context import DIALECT, PlanContext
from rewriter.dml_planner import plan_delete, plan_insert, plan_update
from rewriter.errors import unsupported
from rewriter.internal_tables import hide_internal_tables
from rewriter.nodes import Plan, Send, SequenceNext, Val
from rewriter.read_planner import plan_read
from rewriter.sqltemplate import parse_template
from rewriter.tables import resolve_table
from vschema.errors import InvalidShardName
from vschema.keyrange import KeyRange
from vschema.tracked_schema import TrackedSchema

_NEXT_VALUES = re.compile(
    r"^\s*select\s+next\s+(?:(\d+|:\w+)\s+values|value)\s+from\s+([`\w.]+)\s*$", re.I | re.S
)

def parse(sql: str) -> exp.Expression:
    """One statement through ``rewriter.dialect`` (which refuses nesting too deep to plan
    before parsing: 1473 / 1436 / 1064, and names constructs it does not plan: 1235)."""
    try:
        stmt = sqlglot.parse_one(sql, read=DIALECT)
    except sqlglot.errors.SqlglotError as e:  # ParseError, TokenError (an unterminated quote)
        raise errors.syntax_error(e) from None
    except RecursionError:  # not expected past the dialect's nesting guard; never a 1105
        raise errors.StackOverrun(DIALECT.max_nesting + 1, DIALECT.max_nesting) from None
    if stmt is None:
        raise errors.ParseError("Query was empty")
    return stmt  # type: ignore[return-value]  # sqlglot types parses and parents as Expr, Expression's base


def split_target(keyspace: str | None) -> tuple[str | None, str | None]:
    """``"ks:-80@primary"`` -> ``("ks", "-80")``."""
    if not keyspace:
        return None, None
    ks = keyspace.split("@", 1)[0]
    if ":" in ks:
        name, shard = ks.split(":", 1)
        return name or None, shard or None
    return ks or None, None


def plan(sql_or_ast: str | exp.Expression, vschema: Any, keyspace: str | None,
         *, list_vars: frozenset[str] = frozenset(), source: str | None = None,
         schema: TrackedSchema | None = None) -> Plan:
    """Plan one statement. ``source`` is the SQL text the AST came from (when given, a
    statement that goes to one route unchanged is sent as that text, so result column
    names are the client's own)."""
    ks, shard = split_target(keyspace)
    if isinstance(sql_or_ast, str):
        text = sql_or_ast
        m = _NEXT_VALUES.match(text)
        if m:
            return _plan_next(m, vschema, ks)
        if shard is not None:
            return Send(ks or "", shard, parse_template(text), is_dml=_is_dml_text(text))
        stmt = parse(text)
        src = text if source is None else source
    else:
        stmt = sql_or_ast
        src = source or ""
        if shard is not None:
            return Send(ks or "", shard, parse_template(src or stmt.sql(dialect=DIALECT)),
                        is_dml=isinstance(stmt, exp.Insert | exp.Update | exp.Delete))
    targeted = _shard_qualified(stmt, vschema)
    if targeted is not None:
        return targeted
    ctx = PlanContext(vschema, ks, list_vars, src, schema)
    if isinstance(stmt, exp.Select | exp.SetOperation | exp.Subquery):
        if hide_internal_tables(stmt):
            # Planned from the AST now: the shard runs its text, the client's names stay.
            ctx.source, ctx.names_from = "", src
        return plan_read(stmt, ctx)
    if isinstance(stmt, exp.Insert):
        return plan_insert(stmt, ctx)
    if isinstance(stmt, exp.Update):
        return plan_update(stmt, ctx)
    if isinstance(stmt, exp.Delete):
        return plan_delete(stmt, ctx)
    raise unsupported(f"statement type {type(stmt).__name__.lower()} in the planner")


def _shard_qualified(stmt: exp.Expression, vschema: Any) -> Plan | None:
    """Tables qualified with a shard target (`` `ks:-80`.t ``, as Vitess accepts): the
    statement goes verbatim to that shard, with the qualifier removed."""
    targets = set()
    for t in stmt.find_all(exp.Table):
        db = t.args.get("db")
        if db is not None and (":" in db.name or db.name.endswith("]")):
            targets.add(db.name)
    if not targets:
        return None
    if len(targets) > 1:
        raise unsupported("statement targeting several shards by name")
    target = targets.pop()
    ks, shard = _target_shard(target, vschema)
    stmt = stmt.copy()
    for t in stmt.find_all(exp.Table):
        db = t.args.get("db")
        if db is not None and db.name in (target, ks):
            t.set("db", None)
    return Send(ks, shard, parse_template(stmt.sql(dialect=DIALECT)),
                is_dml=isinstance(stmt, exp.Insert | exp.Update | exp.Delete))


def _target_shard(target: str, vschema: Any) -> tuple[str, str]:
    """``ks:-80`` (a shard) or ``ks[-80]`` (a key range, which must fall in one shard)."""
    if target.endswith("]") and "[" in target:
        ks, rng = target[:-1].split("[", 1)
    else:
        ks, rng = target.split(":", 1)
    if ks not in vschema.keyspaces:
        raise errors.PlanningError(f"VT05003: unknown database '{ks}' in vschema")
    if rng in vschema.shards(ks):
        return ks, rng
    if target.endswith("]"):
        try:
            shards = vschema.keyspace(ks).shard_map.shards_for_range(KeyRange.parse(rng))
        except InvalidShardName:
            shards = []
        if len(shards) == 1:
            return ks, shards[0]
        if len(shards) > 1:
            raise unsupported(f"key range {rng} spanning several shards of {ks}")
    raise errors.PlanningError(f"VT05005: no shard {rng} in keyspace {ks}")


def _is_dml_text(text: str) -> bool:
    word = text.lstrip().split(None, 1)[0].lower() if text.strip() else ""
    return word in ("insert", "update", "delete", "replace")


def _plan_next(m: re.Match[str], vschema: Any, keyspace: str | None) -> Plan:
    count_text, name = m.group(1), m.group(2).replace("`", "")
    table = exp.to_table(name, dialect=DIALECT)
    ref = resolve_table(table, vschema, keyspace)
    if not ref.is_sequence:
        raise errors.PlanningError(f"NEXT used on a non-sequence table `{ref.name}`")
    if count_text is None:
        count = Val(const=1)
    elif count_text.startswith(":"):
        count = Val(name=count_text[1:])
    else:
        count = Val(const=int(count_text))
    return SequenceNext(ref.keyspace, ref.name, count)
