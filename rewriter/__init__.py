"""The query planner: SQL + vschema -> plan trees (pure, no I/O).

Entry points (stable; the proxy calls these):

``plan_query(sql, vschema, keyspace, cache=DEFAULT_CACHE, schema=None) -> (Plan, bindvars)``
    Normalises ``sql`` (literals -> bind variables), looks the shape up in the plan
    cache keyed by (shape, keyspace, vschema), plans on a miss, and returns the plan
    with this execution's bind variables. Pass both to
    ``proxy.engine.execute(plan, vcursor, bindvars)`` / ``proxy.engine.stream(...)``.
    ``VEXPLAIN PLAN <q>`` returns a ``VExplain`` node whose ``json`` is the answer (one
    row, one column named ``JSON``); ``VEXPLAIN QUERIES|ALL <q>`` a ``VExplainRun``
    (the engine runs the statement and answers what it sent to the shards). ``keyspace`` is the session's target: ``None``,
    ``"ks"``, or ``"ks:-80"`` for a shard-targeted session (statements sent verbatim).
    ``schema`` is the proxy's ``TrackedSchema`` (the shards' columns: INSERT/REPLACE
    without a column list); ``REPLACE`` is planned as the INSERT it routes like.

``plan(sql_or_ast, vschema, keyspace) -> Plan`` (``rewriter.planner.plan``; nodes in ``rewriter.nodes``)
    Plans literal SQL without normalisation or cache (values stay constants).

Errors: ``rewriter.errors.PlanningError`` and subclasses carry ``.code`` (1235 for
``Unsupported``, 1146 ``TableNotFound``, 1064 ``ParseError``, else 1105) and
``.message``.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from rewriter.cache import PlanCache, vschema_version
from rewriter.dialect import without_vindex_hints
from rewriter.dml_planner import parse_replace, replace_verb
from rewriter.errors import ParseError, PlanningError, TableNotFound, Unsupported
from rewriter.nodes import (
    Delete,
    DMLWithInput,
    Insert,
    InsertSelect,
    Plan,
    ReferenceWrite,
    Send,
    Update,
    VExplain,
    VExplainRun,
)
from rewriter.normalize import normalize_cached
from rewriter.planner import plan
from rewriter.sqltemplate import SqlTemplate
from rewriter.vexplain import describe, vexplain_json
from vschema.tracked_schema import TrackedSchema

__all__ = [
    "DEFAULT_CACHE",
    "ParseError",
    "Plan",
    "PlanCache",
    "PlanningError",
    "TableNotFound",
    "Unsupported",
    "cached_plan",
    "plan",
    "plan_query",
]

DEFAULT_CACHE = PlanCache()
logger = logging.getLogger(__name__)

_VEXPLAIN = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*vexplain\s+(?P<hints>(?:/\*.*?\*/\s*)*)(?:(?P<kind>plan|queries|all)\s+)?",
    re.I | re.S,
)
# Plans that change data: VEXPLAIN QUERIES/ALL runs them only when told to (Vitess's VT09008).
_WRITES = (Insert, InsertSelect, Update, Delete, ReferenceWrite, DMLWithInput)


def _cache_key(shape: str, vschema: Any, keyspace: str | None, schema: TrackedSchema | None) -> Any:
    return (shape, keyspace, vschema_version(vschema), schema.version if schema is not None else 0)


# The normalisations of long statements ``cached_plan`` found a plan for, for ``plan_query`` to
# take instead of normalising the text again: the fast path finds a 100-row INSERT's plan, sees
# its rows go to two shards and leaves it to the normal path, which planned it again (normalising
# it took 160 us). Keyed by the text alone (the normalisation depends on nothing else); a few, for
# the statements of other connections the fast path looks up meanwhile. A shorter statement
# normalises again at less than keeping it costs (a point select: ~9 us).
_RECENT: dict[str, tuple[str, dict[str, Any]]] = {}
_RECENT_MAX = 16
_RECENT_FROM = 1024  # characters


def cached_plan(sql: str, vschema: Any, keyspace: str | None,
                schema: TrackedSchema | None = None) -> tuple[Plan, dict[str, Any]] | None:
    """``plan_query``'s answer if the statement's plan is in ``DEFAULT_CACHE``, else None
    (never plans, never raises: a statement that does not normalise is None too).
    ``sql`` must not be a VEXPLAIN. The caller must not change the bind variables."""
    try:
        shape, bindvars = normalize_cached(sql)
    except ValueError:
        return None
    cached = DEFAULT_CACHE.peek(_cache_key(shape, vschema, keyspace, schema))
    if cached is None:
        return None
    if len(sql) >= _RECENT_FROM:
        if len(_RECENT) >= _RECENT_MAX:
            del _RECENT[next(iter(_RECENT))]
        _RECENT[sql] = (shape, bindvars)
    return cached, bindvars


def _normalized(sql: str) -> tuple[str, dict[str, Any]]:
    if _RECENT and len(sql) >= _RECENT_FROM:
        recent = _RECENT.pop(sql, None)
        if recent is not None:
            return recent[0], dict(recent[1])  # a copy: the plan's execution may add to it
    return normalize_cached(sql)


def plan_query(sql: str, vschema: Any, keyspace: str | None,
               cache: PlanCache | None = None,
               schema: TrackedSchema | None = None) -> tuple[Plan, dict[str, Any]]:
    m = _VEXPLAIN.match(sql)
    if m:
        kind = (m.group("kind") or "plan").lower()
        inner = _plan_text(sql[m.end():], vschema, keyspace, schema=schema)
        if kind == "plan":
            return VExplain(vexplain_json(inner)), {}
        if _writes(inner) and "execute_dml_queries" not in m.group("hints").lower():
            raise PlanningError("VT09008: vexplain queries/all will actually run queries")
        return VExplainRun(kind, inner, describe(inner)), {}
    if cache is None:
        cache = DEFAULT_CACHE
    sql = without_vindex_hints(sql)
    try:
        shape, bindvars = _normalized(sql)
    except ValueError as e:
        raise ParseError(f"You have an error in your SQL syntax; {e}") from None
    key = _cache_key(shape, vschema, keyspace, schema)
    cached = cache.get(key)
    if cached is not None:
        return cached, bindvars
    list_vars = frozenset(k for k, v in bindvars.items() if isinstance(v, list))
    # '::v' (list) keeps its length as ' :v' so sqlglot positions match the source text
    source = shape.replace("::", " :") if list_vars else shape
    try:
        result = _plan_text(source, vschema, keyspace, list_vars=list_vars, schema=schema)
    except PlanningError as normalized_error:
        # The message quotes the normalised text (":vtg1"); plan the client's own text
        # to report the same refusal with its literals.
        try:
            _plan_text(sql, vschema, keyspace, schema=schema)
        except PlanningError as literal_error:
            raise literal_error from None
        raise normalized_error
    cache.put(key, result)
    logger.debug("query planned", extra={"shape": shape[:500], "keyspace": keyspace,
                                         "plan": type(result).__name__, "cached_plans": len(cache)})
    return result, bindvars


def _writes(node: Plan) -> bool:
    if isinstance(node, _WRITES):
        return True
    return isinstance(node, Send) and node.is_dml


def _plan_text(text: str, vschema: Any, keyspace: str | None, *,
               list_vars: frozenset[str] = frozenset(), schema: TrackedSchema | None = None) -> Plan:
    """``plan`` for statement text; a ``REPLACE`` (which sqlglot cannot parse as a
    statement) is planned as the INSERT it routes like (``dml_planner.parse_replace``)."""
    stmt = parse_replace(text)
    if stmt is None:
        return plan(text, vschema, keyspace, list_vars=list_vars, schema=schema)
    result = plan(stmt, vschema, keyspace, list_vars=list_vars, source=text, schema=schema)
    if isinstance(result, Send):  # a shard-qualified table: sent as written, verb included
        q = result.query
        result.query = SqlTemplate((replace_verb(q.parts[0]), *q.parts[1:]), q.names)
    return result
