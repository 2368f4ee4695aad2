"""Plan node -> primitive module. Every primitive module exposes
``async execute(node, vcursor, bindvars) -> Result`` and
``stream(node, vcursor, bindvars) -> AsyncIterator[Result]``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from types import ModuleType
from typing import Any

from proxy.engine.result import Result
from rewriter import nodes as P

_MODULES: dict[type, ModuleType] = {}


def _registry() -> dict[type, ModuleType]:
    if not _MODULES:
        from proxy.engine import (
            batched_join,
            compute,
            concatenate,
            distinct,
            dml,
            dml_with_input,
            filter,
            hash_join,
            insert,
            insert_select,
            join,
            limit,
            memory_sort,
            ordered_aggregate,
            projection,
            projection_compute,
            pullout,
            route,
            send,
            sequence,
            vexplain,
            vexplain_run,
            vindex_lookup,
        )

        _MODULES.update({
            P.Route: route,
            P.VindexLookup: vindex_lookup,
            P.Limit: limit,
            P.MemorySort: memory_sort,
            P.Aggregate: ordered_aggregate,
            P.Distinct: distinct,
            P.Filter: filter,
            P.SimpleProjection: projection,
            P.Truncate: projection,
            P.ProjectNames: projection,
            P.Projection: projection_compute,
            P.Join: join,
            P.HashJoin: hash_join,
            P.BatchedJoin: batched_join,
            P.Concatenate: concatenate,
            P.PulloutSubquery: pullout,
            P.Send: send,
            P.SequenceNext: sequence,
            P.Insert: insert,
            P.InsertSelect: insert_select,
            P.Update: dml,
            P.Delete: dml,
            P.ReferenceWrite: dml,
            P.VExplain: vexplain,
            P.VExplainRun: vexplain_run,
            P.Compute: compute,
            P.DMLWithInput: dml_with_input,
        })
    return _MODULES


def module_for(plan: P.Plan) -> ModuleType:
    mod = _registry().get(type(plan))
    if mod is None:
        raise TypeError(f"no engine primitive for plan node {type(plan).__name__}")
    return mod


async def execute(plan: P.Plan, vcursor: Any, bindvars: Mapping[str, Any]) -> Result:
    return await module_for(plan).execute(plan, vcursor, bindvars)


def stream(plan: P.Plan, vcursor: Any, bindvars: Mapping[str, Any]) -> AsyncIterator[Result]:
    return module_for(plan).stream(plan, vcursor, bindvars)


async def field_result(plan: P.Plan, vcursor: Any, bindvars: Mapping[str, Any]) -> Result:
    """The columns a (route-like) plan returns, without rows."""
    from proxy.engine import route

    if isinstance(plan, P.Route):
        return await route.field_result(plan, vcursor, bindvars)
    if isinstance(plan, P.VindexLookup):
        return await route.field_result(plan.route, vcursor, bindvars)
    res = await execute(plan, vcursor, bindvars)
    res.rows = []
    return res
