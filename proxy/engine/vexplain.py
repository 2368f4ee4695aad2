"""VEXPLAIN PLAN: one row, one column ``JSON`` with the plan in Vitess's shape."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine.result import Result, local_result
from proxy.engine.vcursor import VCursor
from rewriter.nodes import VExplain


async def execute(node: VExplain, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return local_result(["JSON"], [[node.json]])


async def stream(node: VExplain, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    yield await execute(node, vcursor, bindvars)
