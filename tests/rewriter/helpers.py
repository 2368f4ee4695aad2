from __future__ import annotations

import json
from typing import Any

from rewriter import PlanCache, plan_query


def explain(vschema: Any, sql: str, keyspace: str | None = None) -> dict[str, Any]:
    """The VEXPLAIN PLAN JSON of ``sql`` as a dict."""
    node, bindvars = plan_query("vexplain plan " + sql, vschema, keyspace, PlanCache())
    assert bindvars == {}
    return json.loads(node.json)
