"""VEXPLAIN QUERIES and VEXPLAIN ALL: run the statement through a ``QueryLog``.

QUERIES answers the log as Vitess does: ``#`` (queries of one call share it),
``keyspace``, ``shard``, ``query``. ALL answers the plan's JSON (as VEXPLAIN PLAN)
with, on each node that sent queries, ``mysql_explain_json``: the shard's ``EXPLAIN
FORMAT=JSON`` of what it sent, keyed by shard. A logged query is matched to the first
node whose ``Query`` (or ``FieldQuery``) it instantiates (bind placeholders standing for any text);
queries no node names (a Compute's temporary-table loads, lookup-vindex writes) are
listed under ``OtherQueries`` with their own explain. An EXPLAIN the shard refuses
(a query over a temporary table already dropped) is shown as ``mysql_explain_error``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import AsyncGenerator, Iterator, Mapping
from typing import Any

from mysql_mimic.types import ColumnType

from proxy.engine import dispatch
from proxy.engine.query_log import LoggedQuery, QueryLog
from proxy.engine.result import Result, local_result
from proxy.engine.vcursor import VCursor
from proxy.errors import ProxyError
from rewriter.nodes import VExplainRun

_PLACEHOLDER = re.compile(r"::?[A-Za-z_]\w*")
_EXPLAINABLE = ("select", "with", "(", "insert", "update", "delete", "replace")


async def execute(node: VExplainRun, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    log = QueryLog(vcursor)
    await dispatch.execute(node.inner, log, bindvars)
    if node.kind == "queries":
        return local_result(
            ["#", "keyspace", "shard", "query"],
            [[q.group, q.keyspace, q.shard, q.sql] for q in log.queries],
            types=[ColumnType.LONG, ColumnType.VAR_STRING, ColumnType.VAR_STRING, ColumnType.VAR_STRING],
        )
    plan = copy.deepcopy(node.plan)
    nodes = [(d, _matcher(d[k])) for d in _walk(plan) for k in ("Query", "FieldQuery") if isinstance(d.get(k), str)]
    others: list[dict[str, Any]] = []
    for q in log.queries:
        if not q.sql.lstrip().lower().startswith(_EXPLAINABLE):
            continue
        explain = await _explain(vcursor, q)
        owner = next((d for d, m in nodes if m.fullmatch(q.sql.strip())), None)
        if owner is None:
            others.append({"Keyspace": q.keyspace, "Shard": q.shard, "Query": q.sql, **explain})
            continue
        for key, value in explain.items():
            owner.setdefault(key, {})[q.shard] = value
    if others:
        plan["OtherQueries"] = others
    return local_result(["JSON"], [[json.dumps(plan, indent="\t")]])


async def stream(node: VExplainRun, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    yield await execute(node, vcursor, bindvars)


async def _explain(vcursor: VCursor, q: LoggedQuery) -> dict[str, Any]:
    try:
        res = await vcursor.execute_shard(q.keyspace, q.shard, "explain format=json " + q.sql)
    except ProxyError as e:
        return {"mysql_explain_error": f"{e.code}: {e.message}"}
    rows = res.rows
    text = rows[0][0] if rows and rows[0] else None
    if not isinstance(text, bytes):
        return {"mysql_explain_error": "the shard returned no EXPLAIN"}
    return {"mysql_explain_json": json.loads(text)}


def _matcher(template: str) -> re.Pattern[str]:
    """The query text with each bind placeholder standing for any text."""
    pieces = _PLACEHOLDER.split(template.strip())
    return re.compile(".*?".join(re.escape(p) for p in pieces), re.S)


def _walk(d: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield d
    for child in d.get("Inputs", ()):
        if isinstance(child, dict):
            yield from _walk(child)
