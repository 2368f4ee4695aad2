"""``VEXPLAIN PLAN``: a plan as JSON in Vitess's shape.

Keys and their order follow Vitess's ``PrimitiveDescription`` marshalling:
``OperatorType``, ``Variant``, ``Keyspace {Name, Sharded}``, then operator-specific
fields (``FieldQuery``, ``Query``, ``Table``, ``Values``, ``Vindex``, ``Count``,
``Aggregates``, ``GroupBy``, ``OrderBy``, ``JoinColumnIndexes``, ``JoinVars``, ...)
and ``Inputs``.
"""

from __future__ import annotations

import json
from typing import Any

from rewriter import nodes as P

_AGG_NAMES = {
    P.AGG_SUM_COUNT_STAR: "sum_count_star",
    P.AGG_SUM_COUNT: "sum_count",
    P.AGG_SUM: "sum",
    P.AGG_MIN: "min",
    P.AGG_MAX: "max",
    P.AGG_AVG: "avg",
    P.AGG_COUNT_DISTINCT: "count_distinct",
    P.AGG_SUM_DISTINCT: "sum_distinct",
    P.AGG_ANY_VALUE: "any_value",
}


def _keyspace(name: str, sharded: bool) -> dict[str, Any]:
    return {"Name": name, "Sharded": sharded}


def _order(keys: list[P.OrderKey]) -> str:
    return ", ".join(f"{k.column} {'DESC' if k.desc else 'ASC'}" for k in keys)


def _values(opcode: P.Opcode, values: list[P.Val], in_var: str | None) -> list[str]:
    """Vitess shows an IN / MultiEqual value list as one tuple (or its list bind var)."""
    if opcode in (P.Opcode.IN, P.Opcode.MultiEqual):
        if in_var is not None:
            return ["::" + in_var]
        return ["(" + ", ".join(v.describe() for v in values) + ")"]
    return [v.describe() for v in values]


def describe(node: P.Plan) -> dict[str, Any]:
    if isinstance(node, P.Route):
        d: dict[str, Any] = {"OperatorType": "Route", "Variant": str(node.opcode),
                             "Keyspace": _keyspace(node.keyspace, node.sharded)}
        if node.field_query:
            d["FieldQuery"] = node.field_query
        if node.order_by:
            d["OrderBy"] = _order(node.order_by)
        d["Query"] = node.query.text()
        if node.truncate:
            d["ResultColumns"] = -node.truncate
        if node.table:
            d["Table"] = node.table
        if node.target_ksid is not None:
            d["TargetDestination"] = f"KeyspaceID({node.target_ksid.hex()})"
        if node.values:
            d["Values"] = _values(node.opcode, node.values, node.in_var)
        if node.vindex_name:
            d["Vindex"] = node.vindex_name
        return d
    if isinstance(node, P.VindexLookup):
        # as in Vitess: the route below runs on the shards the lookup found
        routed = describe(node.route)
        routed["Variant"] = "ByDestination"
        routed.pop("Values", None)
        routed.pop("Vindex", None)
        return {"OperatorType": "VindexLookup", "Variant": str(node.route.opcode),
                "Keyspace": _keyspace(node.keyspace, True),
                "Values": _values(node.route.opcode, node.values, node.route.in_var),
                "Vindex": node.vindex_name,
                "Inputs": [_lookup_input(node), routed]}
    if isinstance(node, P.Limit):
        d = {"OperatorType": "Limit", "Count": node.count.describe()}
        if node.offset is not None:
            d["Offset"] = node.offset.describe()
        d["Inputs"] = [describe(node.input)]
        return d
    if isinstance(node, P.MemorySort):
        return {"OperatorType": "Sort", "Variant": "Memory", "OrderBy": _order(node.order_by),
                "Inputs": [describe(node.input)]}
    if isinstance(node, P.Window):
        funcs = ", ".join(f.text if "".join(f.text.lower().split()) == "".join(f.name.lower().split())
                          else f"{f.text} AS {f.name}" for f in node.functions)
        return {"OperatorType": "Window", "Functions": funcs,
                "Inputs": [describe(node.input)]}
    if isinstance(node, P.Aggregate):
        aggs = ", ".join(
            f"{_AGG_NAMES[a.kind]}({a.column}{',' + str(a.column2) if a.column2 >= 0 else ''}) AS {a.alias}"
            for a in node.aggregates
            if a.kind != P.AGG_COMPUTED and (a.kind != P.AGG_ANY_VALUE or a.column not in node.group_by)
        )
        d = {"OperatorType": "Aggregate", "Variant": node.variant, "Aggregates": aggs}
        if node.group_by:
            d["GroupBy"] = ", ".join(str(g) for g in node.group_by)
        d["Inputs"] = [describe(node.input)]
        return d
    if isinstance(node, P.Distinct):
        return {"OperatorType": "Distinct", "Inputs": [describe(node.input)]}
    if isinstance(node, P.Filter):
        return {"OperatorType": "Filter", "Predicate": node.text, "Inputs": [describe(node.input)]}
    if isinstance(node, P.SimpleProjection):
        return {"OperatorType": "SimpleProjection", "Columns": ",".join(str(c) for c in node.columns),
                "Inputs": [describe(node.input)]}
    if isinstance(node, P.ProjectNames):
        cols = [("*" if c is None else c.describe() if isinstance(c, P.Val) else c) + (f" AS {a}" if a else "")
                for c, a in zip(node.columns, node.aliases, strict=True)]
        return {"OperatorType": "SimpleProjection", "Columns": ", ".join(cols), "Inputs": [describe(node.input)]}
    if isinstance(node, P.Truncate):
        return {"OperatorType": "SimpleProjection", "ColumnsToTruncate": node.count,
                "Inputs": [describe(node.input)]}
    if isinstance(node, P.Projection):
        return {"OperatorType": "Projection",
                "Expressions": [f"{c.text} as {c.name}" for c in node.computed],
                "Inputs": [describe(node.input)]}
    if isinstance(node, P.Join):
        cols = ",".join(f"L:{-c - 1}" if c < 0 else f"R:{c - 1}" for c in node.cols)  # type: ignore[assignment]  # cols: the node's columns, then their text
        d = {"OperatorType": "Join", "Variant": "LeftJoin" if node.left_join else "Join",
             "JoinColumnIndexes": cols}
        if node.vars:
            d["JoinVars"] = dict(node.vars)
        d["TableName"] = node.table_name
        d["Inputs"] = [describe(node.left), describe(node.right)]
        return d
    if isinstance(node, P.HashJoin | P.BatchedJoin):
        # Vitess's HashJoin description (OperatorType Join, Variant HashJoin/HashLeftJoin)
        hashed = isinstance(node, P.HashJoin)
        kind = "LeftJoin" if node.left_join else "Join"
        d = {"OperatorType": "Join", "Variant": ("Hash" if hashed else "Batched") + kind,
             "JoinColumnIndexes": ",".join(str(c) for c in node.cols) if hashed else
             ",".join(f"L:{-c - 1}" if c < 0 else f"R:{c - 1}" for c in node.cols),
             "Predicate": node.predicate}
        if isinstance(node, P.BatchedJoin):
            d["BatchVar"] = node.batch_var
            d["BatchSize"] = node.batch_size
        d["TableName"] = node.table_name
        d["Inputs"] = [describe(node.left), describe(node.right)]
        return d
    if isinstance(node, P.PulloutSubquery):
        d = {"OperatorType": "UncorrelatedSubquery",
             "Variant": {"in": "PulloutIn", "exists": "PulloutExists", "value": "PulloutValue"}[node.kind],
             "PulloutVars": [node.has_values_var, node.values_var] if node.kind == "in" else
             [node.has_values_var] if node.kind == "exists" else [node.values_var],
             "Inputs": [describe(node.subquery), describe(node.outer)]}
        return d
    if isinstance(node, P.SemiJoin):
        return {"OperatorType": "SemiJoin",
                "Variant": {"exists": "SemiJoin", "in": "SemiJoin", "not_exists": "AntiJoin",
                            "not_in": "AntiJoin"}[node.kind],
                "Anti": node.kind.startswith("not_"), "Predicate": node.predicate,
                **({"BatchVar": node.batch_var} if node.batch_var else {}),
                "Inputs": [describe(node.outer), describe(node.inner),
                           *([describe(node.probe)] if node.probe is not None else [])]}
    if isinstance(node, P.Concatenate):
        return {"OperatorType": "Concatenate", "Inputs": [describe(s) for s in node.sources]}
    if isinstance(node, P.Send):
        return {"OperatorType": "Send", "Keyspace": _keyspace(node.keyspace, True),
                "TargetDestination": f"Shard({node.shard})", "Query": node.query.text()}
    if isinstance(node, P.SequenceNext):
        return {"OperatorType": "Route", "Variant": "Next", "Keyspace": _keyspace(node.keyspace, False),
                "Query": f"select next {node.count.describe()} values from {node.table}",
                "Table": node.table}
    if isinstance(node, P.Insert):
        d = {"OperatorType": "Insert", "Variant": str(node.opcode),
             "Keyspace": _keyspace(node.keyspace, node.opcode is not P.DMLOpcode.Unsharded),
             "TargetTabletType": "PRIMARY"}
        if node.auto_increment is not None:
            a = node.auto_increment
            d["AutoIncrement"] = f"{a.sequence_keyspace}.{a.sequence_table}:{a.column}"
        if node.query is not None:
            d["Query"] = node.query.text()
        else:
            d["Query"] = node.prefix.text() + ", ".join(r.text() for r in node.row_templates) + node.suffix.text()
        d["TableName"] = node.table
        if node.vindex_values:
            # a row that gave its auto_increment value shows that value, else the sequence var
            given: dict[str, P.Val] = {}
            if node.auto_increment is not None:
                for var, g in zip(node.auto_increment.row_vars, node.auto_increment.given, strict=True):
                    if g is not None and (g.name is not None or g.const is not None):
                        given[var] = g

            def show(v: P.Val) -> str:
                return given.get(v.name or "", v).describe()

            d["VindexValues"] = {
                vv.vindex_name: ", ".join(":".join(show(v) for v in row) for row in vv.rows)
                for vv in node.vindex_values
            }
        return d
    if isinstance(node, P.InsertSelect):
        d = {"OperatorType": "Insert", "Variant": "Select" if node.sharded else "Unsharded",
             "Keyspace": _keyspace(node.keyspace, node.sharded), "TargetTabletType": "PRIMARY"}
        if node.sequence is not None:
            d["AutoIncrement"] = f"{node.sequence[0]}.{node.sequence[1]}:{node.columns[node.auto_column or 0]}"
        d["Query"] = node.prefix.text() + "<rows of the select>" + node.suffix.text()
        d["TableName"] = node.table
        if node.vindex_columns:
            d["VindexOffsetFromSelect"] = {name: ", ".join(str(p) for p in pos)
                                           for name, _v, pos, _o in node.vindex_columns}
        d["Inputs"] = [describe(node.source)]
        return d
    if isinstance(node, P.Update | P.Delete | P.ReferenceWrite):
        d = {"OperatorType": node.verb if isinstance(node, P.ReferenceWrite) else type(node).__name__, "Variant": str(node.opcode),
             "Keyspace": _keyspace(node.keyspace, node.opcode is not P.DMLOpcode.Unsharded),
             "TargetTabletType": "PRIMARY"}
        if node.owned_lookups:
            d["OwnedVindexQuery"] = node.owned_select.text() if node.owned_select else ""
        d["Query"] = node.query.text()
        d["Table"] = node.table
        if node.values:
            d["Values"] = [v.describe() for v in node.values]
        if node.vindex_name:
            d["Vindex"] = node.vindex_name
        return d
    if isinstance(node, P.DMLWithInput):
        d = {"OperatorType": "DMLWithInput", "TargetTabletType": "PRIMARY"}
        if node.keys_var:
            d["BindVars"] = ["::" + node.keys_var]
        else:
            d["BindVars"] = [":" + v for v in node.row_vars]
        d["Inputs"] = [describe(node.input), describe(node.dml)]
        return d
    if isinstance(node, P.Compute):
        return {"OperatorType": "Compute", "Keyspace": _keyspace(node.keyspace, True),
                "TargetDestination": f"Shard({node.shard})", "Query": node.query.text(),
                "Inputs": [_temp_input(i, node) for i in node.inputs]}
    return {"OperatorType": type(node).__name__}


def _temp_input(inp: P.TempInput, node: P.Compute) -> dict[str, Any]:
    d: dict[str, Any] = {"OperatorType": "TempTable", "Name": inp.name, "Table": inp.table,
                         "Columns": list(inp.columns)}
    if inp.indexes:
        d["Indexes"] = list(inp.indexes)
    if inp.local_query is not None:
        d["CopiedInPlaceOn"] = node.shard
    inputs = [describe(inp.source)]
    for r in inp.reductions:
        src = node.inputs[r.from_input]
        d.setdefault("Reductions", []).append(
            f"::{r.var} = {src.name}.{src.columns[r.from_column]}")
        inputs.append(describe(r.source))
    d["Inputs"] = inputs
    return d


def _lookup_input(node: P.VindexLookup) -> dict[str, Any]:
    v = node.vindex
    n = len(node.values) if node.values else 1
    q = v.lookup_query(n).replace("%s", "::name")
    return {"OperatorType": "Route", "Variant": "IN" if node.lookup_keyspace else "Unsharded",
            "Keyspace": _keyspace(node.lookup_keyspace or node.keyspace, False),
            "Query": q, "Table": getattr(v, "table_name", ""), "Vindex": node.vindex_name}


def vexplain_json(node: P.Plan) -> str:
    return json.dumps(describe(node), indent="\t")
