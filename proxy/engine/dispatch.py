"""Plan node -> primitive module. Every primitive module exposes
``async execute(node, vcursor, bindvars) -> Result`` and
``stream(node, vcursor, bindvars) -> AsyncIterator[Result]``."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from types import ModuleType
from typing import Any

from proxy.engine import route
from proxy.engine.result import Result
from proxy.engine.vcursor import VCursor
from rewriter import nodes as P

# Plan node type -> primitive module; filled by ``proxy.engine`` (the package imports every
# primitive, and primitives with children import this module to run them: the table is
# handed in rather than imported, so the imports run one way).
_MODULES: dict[type, ModuleType] = {}


def register(modules: Mapping[type, ModuleType]) -> None:
    _MODULES.update(modules)


def module_for(plan: P.Plan) -> ModuleType:
    mod = _MODULES.get(type(plan))
    if mod is None:
        raise TypeError(f"no engine primitive for plan node {type(plan).__name__}")
    return mod


async def execute(plan: P.Plan, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await module_for(plan).execute(plan, vcursor, bindvars)


def stream(plan: P.Plan, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    return module_for(plan).stream(plan, vcursor, bindvars)


async def field_result(plan: P.Plan, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    """The columns a (route-like) plan returns, without rows."""
    if isinstance(plan, P.Route):
        return await route.field_result(plan, vcursor, bindvars)
    if isinstance(plan, P.VindexLookup):
        return await route.field_result(plan.route, vcursor, bindvars)
    res = await execute(plan, vcursor, bindvars)
    res.rows = []
    return res
