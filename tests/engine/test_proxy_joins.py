"""Joins matched at the proxy (BatchedJoin, HashJoin) answer as one MariaDB does.

The planner picks them from the tracked schema: a table joined only by comparable
column equalities is looked up for a batch of left rows at a time, or — when the row
estimates say reading it whole is cheaper — read once and hashed. Each query below runs
with the shards' real estimates (small tables: batched) and with estimates raised to a
million rows per shard (hash), and must equal the oracle both ways: NULL keys match
nothing, text keys match under utf8mb4_general_ci (case, accents, trailing spaces), LEFT
JOIN pads, and a left side of 3000 rows crosses batch boundaries. With the large
estimates, rows are priced near zero so that every keyed join is hashed (the cost model
itself is checked on its own below).
"""

from __future__ import annotations

import dataclasses
import json

import pymysql  # noqa: F401 - named in a warnings filter
import pytest
import pytest_asyncio

from proxy import engine
from rewriter import PlanCache, join_strategy, plan_query
from tests.engine.test_oracle import _sortable, normalised
from vschema.tracked_schema import TrackedSchema


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def schema(loaded, vcursor):
    return await vcursor.tracked_schema()


def _large(schema: TrackedSchema) -> TrackedSchema:
    """The same columns, every table estimated at a million rows per shard."""
    out = schema
    for ks in ("commerce", "lookup"):
        tables = schema.keyspaces.get(ks, {})
        out = out.replace_keyspace(ks, {k: dataclasses.replace(t, rows=1_000_000) for k, t in tables.items()})
    return out


def operators_of(plan_json: dict, operator_type: str) -> list[dict]:
    """The VEXPLAIN plan's operators of one type, outermost first."""
    found = []

    def walk(d: dict) -> None:
        if d.get("OperatorType") == operator_type:
            found.append(d)
        for i in d.get("Inputs", []):
            walk(i)

    walk(plan_json)
    return found


def _variants(plan_json: dict) -> list[str]:
    return [d["Variant"] for d in operators_of(plan_json, "Join")]


async def _run(vcursor, schema, sql):
    explain, _ = plan_query("vexplain plan " + sql, vcursor.vschema, "commerce", PlanCache(), schema=schema)
    plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", PlanCache(), schema=schema)
    return _variants(json.loads(explain.json)), await engine.execute(plan, vcursor, bindvars)


QUERIES = {
    "int_key_every_row": "select a.id, b.name from items a join items b on b.id = a.customer_id",
    "int_key_with_filters": "select a.id, b.qty from items a join items b on b.id = a.customer_id "
                            "where a.qty < 5 and b.grp is not null",
    "text_key_general_ci": "select a.id, b.id from items a join items b on b.name = a.name where a.qty = 3",
    "left_join_null_and_unmatched_keys": "select a.id, b.id, b.name from items a left join items b "
                                         "on b.id = a.customer_id + 0 * a.qty where a.id < 400",
    "left_join_text_key": "select a.id, b.id from items a left join items b on b.grp = a.name where a.id < 300",
    "two_keys": "select a.id, b.id from items a join items b on b.customer_id = a.customer_id and b.qty = a.qty "
                "where a.id < 500",
    "three_tables": "select a.id, b.id, l.label from items a join items b on b.id = a.customer_id "
                    "join lookup.qty_labels l on l.qty = b.qty where a.id < 1000",
    "aggregate_over_proxy_join": "select b.grp, count(*), sum(a.qty) from items a join items b "
                                 "on b.id = a.customer_id group by b.grp",
}


@pytest.mark.parametrize("estimates", ["real", "large"])
@pytest.mark.parametrize("name", sorted(QUERIES))
async def test_proxy_matched_join_equals_oracle(name, estimates, schema, vcursor, oracle, monkeypatch):
    sql = QUERIES[name]
    if estimates == "large":
        monkeypatch.setattr(join_strategy, "ROW_COST", 0.001)
    variants, ours = await _run(vcursor, schema if estimates == "real" else _large(schema), sql)
    theirs = await oracle(sql.replace("lookup.", ""))
    assert [f.name.lower() for f in ours.fields] == [f.name.lower() for f in theirs.fields]
    assert _sortable(normalised(ours)) == _sortable(normalised(theirs))
    assert theirs.rows, "the query should return rows"
    if "+ 0 *" not in sql:  # an expression key keeps the per-row nested loop
        assert any(v.startswith("Batched" if estimates == "real" else "Hash") for v in variants), variants


async def test_equal_estimates_choose_hash_and_small_left_chooses_batches(schema, vcursor):
    sql = "select a.id, b.name from items a join items b on b.id = a.customer_id"
    variants, _ = await _run(vcursor, _large(schema), sql)
    assert variants == ["HashJoin"]
    variants, _ = await _run(vcursor, _large(schema), sql + " where a.id = 7")
    assert variants == ["BatchedJoin"]


@pytest.mark.filterwarnings("ignore::pymysql.err.Warning")  # 'g3' compared with a number
async def test_keys_of_different_types_keep_the_per_row_nested_loop(schema, vcursor, oracle):
    sql = "select a.id, b.id from items a join items b on b.grp = a.qty where a.id < 50"
    variants, ours = await _run(vcursor, _large(schema), sql)
    assert variants == ["Join"]
    theirs = await oracle(sql)
    assert _sortable(normalised(ours)) == _sortable(normalised(theirs))


async def test_batched_join_sends_one_lookup_per_batch_of_left_rows(schema, vcursor):
    sql = "select a.id, b.name from items a join items b on b.id = a.customer_id"
    before = len(vcursor.statements)
    variants, res = await _run(vcursor, schema, sql)
    assert variants == ["BatchedJoin"]
    sent = vcursor.statements[before:]
    lookups = [s for s in sent if " IN (" in s[2]]
    # 3000 left rows in batches of 1000: 3 batches, each to at most both shards
    assert 3 <= len(lookups) <= 6, len(lookups)
    assert len(res.rows) > 2000
