"""Correlated [NOT] EXISTS / [NOT] IN across shards, filtered at the proxy (SemiJoin),
answer as one MariaDB does.

``items`` is sharded by ``id``; a subquery keyed on another column cannot merge into
the outer route, so its keys are read once and the outer rows filtered at the proxy.
The data set has NULL keys on both sides, duplicates, and text keys differing in case,
accents and trailing spaces (utf8mb4_general_ci groups them). SQL's NULL rules: a NULL
outer key is never IN anything, NOT IN over a set holding a NULL is never true, NOT IN
over an empty set is always true (even for a NULL key).
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import pytest_asyncio

from proxy import engine
from rewriter import PlanCache, plan_query
from rewriter import nodes as P
from tests.engine.test_oracle import _sortable, normalised
from tests.engine.test_proxy_joins import operators_of


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def schema(loaded, vcursor):
    return await vcursor.tracked_schema()


def _semi_joins(plan_json: dict) -> list[tuple[str, bool]]:
    return [(d["Variant"], d["Anti"]) for d in operators_of(plan_json, "SemiJoin")]


async def _run(vcursor, schema, sql):
    explain, _ = plan_query("vexplain plan " + sql, vcursor.vschema, "commerce", PlanCache(), schema=schema)
    plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", PlanCache(), schema=schema)
    return _semi_joins(json.loads(explain.json)), await engine.execute(plan, vcursor, bindvars)


QUERIES = {
    # name: (sql, the query returns rows)
    "exists_int_key": ("select a.id, a.name from items a where exists "
                       "(select 1 from items b where b.customer_id = a.id and b.qty > 2)", True),
    "exists_select_star": ("select * from items a where exists "
                           "(select 1 from items b where b.customer_id = a.id and b.qty = 3)", True),
    "exists_with_outer_predicates": ("select a.id from items a where a.qty < 5 and exists "
                                     "(select b.id from items b where a.id = b.customer_id)", True),
    "not_exists_keeps_null_outer_keys": ("select a.id, a.customer_id from items a where not exists "
                                         "(select 1 from items b where b.id = a.customer_id and b.qty = 1)", True),
    "exists_text_key_general_ci": ("select a.id from items a where exists "
                                   "(select 1 from items b where b.name = a.name and b.id < 12)", True),
    "exists_empty_inner": ("select a.id from items a where exists "
                           "(select 1 from items b where b.customer_id = a.id and b.qty > 1000000)", False),
    "not_exists_empty_inner_keeps_all": ("select a.id from items a where not exists "
                                         "(select 1 from items b where b.customer_id = a.id and b.qty > 1000000)",
                                         True),
    # IN: a SemiJoin only when the subquery's keys are estimated to outnumber a's rows
    # (fewer filters on b than on a), else the IN list is pulled out (test below)
    "in_duplicates_and_null_keys": ("select a.id, a.customer_id from items a where a.qty > 1 and a.customer_id in "
                                    "(select b.customer_id from items b)", True),
    "in_text_key": ("select a.id, a.name from items a where a.qty < 8 and a.name in (select b.name from items b)",
                    True),
    "not_in_inner_holds_null": ("select a.id from items a where a.qty > 1 and a.customer_id not in "
                                "(select b.customer_id from items b)", False),
    "not_in_without_null": ("select a.id, a.customer_id from items a where a.id > 0 and a.id < 5000 and "
                            "a.customer_id not in (select b.customer_id from items b where b.customer_id > 3)", True),
    "not_in_empty_inner_keeps_null_keys": ("select a.id, a.customer_id from items a where a.id > 0 and a.id < 5000 "
                                           "and a.customer_id not in (select b.customer_id from items b "
                                           "where b.qty > 1000000)", True),
    "not_in_text_key": ("select a.id, a.grp from items a where a.id > 0 and a.id < 5000 and a.grp not in "
                        "(select b.grp from items b where b.grp > 'b')", True),
}


async def test_order_by_and_limit_apply_after_the_filter(schema, vcursor, oracle):
    sql = ("select a.name, a.id as ident from items a where not exists (select 1 from items b "
           "where b.customer_id = a.id and b.qty > 2) order by a.name desc, ident limit 40 offset 3")
    found, ours = await _run(vcursor, schema, sql)
    assert found == [("AntiJoin", True)]
    theirs = await oracle(sql)
    assert [f.name for f in ours.fields] == ["name", "ident"]
    assert normalised(ours) == normalised(theirs) and len(theirs.rows) == 40


@pytest.mark.parametrize("name", sorted(QUERIES))
async def test_semi_join_equals_oracle(name, schema, vcursor, oracle):
    sql, has_rows = QUERIES[name]
    found, ours = await _run(vcursor, schema, sql)
    anti = "not " in sql
    assert found == [("AntiJoin" if anti else "SemiJoin", anti)]
    theirs = await oracle(sql)
    assert [f.name.lower() for f in ours.fields] == [f.name.lower() for f in theirs.fields]
    assert _sortable(normalised(ours)) == _sortable(normalised(theirs))
    assert bool(theirs.rows) == has_rows


async def test_keys_of_different_types_stay_on_compute(schema, vcursor, oracle):
    sql = "select a.id from items a where exists (select 1 from items b where b.grp = a.qty)"
    found, ours = await _run(vcursor, schema, sql)
    assert found == []
    assert _sortable(normalised(ours)) == _sortable(normalised(await oracle(sql)))


@pytest.mark.parametrize("sql", [
    # on a's vindex column the IN list routes
    "select a.id from items a where a.id in (select b.customer_id from items b)",
    # fewer keys estimated than a's rows: the shards filter a by the list
    "select a.id from items a where a.customer_id not in (select b.customer_id from items b where b.id < 60)",
])
async def test_in_stays_a_pullout_when_its_list_is_cheaper(sql, schema, vcursor, oracle):
    found, ours = await _run(vcursor, schema, sql)
    assert found == []
    assert _sortable(normalised(ours)) == _sortable(normalised(await oracle(sql)))


async def test_streamed_semi_join_sends_fields_once_and_every_admitted_row(schema, vcursor):
    sql = QUERIES["not_exists_keeps_null_outer_keys"][0]
    plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", PlanCache(), schema=schema)
    executed = await engine.execute(plan, vcursor, bindvars)
    chunks = [c async for c in engine.stream(plan, vcursor, bindvars)]
    assert [f.name for f in chunks[0].fields] == ["id", "customer_id"]
    assert all(not c.fields for c in chunks[1:])
    assert sorted(r for c in chunks for r in c.rows) == sorted(executed.rows)


async def test_exists_over_an_aggregate_stays_on_compute(schema, vcursor, oracle):
    sql = "select a.id from items a where exists (select count(*) from items b where b.customer_id = a.id)"
    found, ours = await _run(vcursor, schema, sql)
    assert found == []
    theirs = await oracle(sql)
    assert len(theirs.rows) == 3000  # one row (the count) for every outer row
    assert _sortable(normalised(ours)) == _sortable(normalised(theirs))


def _huge(schema):
    """The tracked schema with every commerce table estimated at 100M rows a shard: each
    subquery too large to read whole, so the SemiJoins look it up per batch of outer keys."""
    tables = schema.keyspaces["commerce"]
    return schema.replace_keyspace("commerce", {k: dataclasses.replace(t, rows=100_000_000)
                                                for k, t in tables.items()})


def _semi_join_node(plan: P.Plan) -> P.SemiJoin:
    todo = [plan]
    while todo:
        node = todo.pop()
        if isinstance(node, P.SemiJoin):
            return node
        todo.extend(v for f in dataclasses.fields(node) if isinstance(v := getattr(node, f.name), P.Plan))
    raise AssertionError("no SemiJoin in the plan")


@pytest.mark.parametrize("batch_size", [7, 1000])
@pytest.mark.parametrize("name", sorted(QUERIES))
async def test_semi_join_per_batch_of_outer_keys_equals_oracle(name, batch_size, schema, vcursor, oracle):
    """A subquery too large to hold is read per batch of outer keys; 7 rows a batch puts
    NULL keys, duplicates and collation peers on both sides of batch boundaries, and
    NOT IN's NULL / empty-set rules must hold for the whole set, not each batch's part."""
    sql, has_rows = QUERIES[name]
    plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", PlanCache(), schema=_huge(schema))
    node = _semi_join_node(plan)
    assert node.batch_var and (node.probe is not None) == (" not in " in sql)
    node.batch_size = batch_size
    ours = await engine.execute(plan, vcursor, bindvars)
    theirs = await oracle(sql)
    assert [f.name.lower() for f in ours.fields] == [f.name.lower() for f in theirs.fields]
    assert _sortable(normalised(ours)) == _sortable(normalised(theirs))
    assert bool(theirs.rows) == has_rows


async def test_batched_lookup_on_the_inner_vindex_column_routes_by_it(schema, vcursor):
    sql = QUERIES["not_exists_keeps_null_outer_keys"][0]  # b.id = a.customer_id: b's vindex column
    explain, _ = plan_query("vexplain plan " + sql, vcursor.vschema, "commerce", PlanCache(), schema=_huge(schema))
    (semi,) = operators_of(json.loads(explain.json), "SemiJoin")
    inner = semi["Inputs"][1]
    while inner["OperatorType"] != "Route":
        inner = inner["Inputs"][0]
    assert inner["Variant"] == "IN" and inner["Values"] == [f"::{semi['BatchVar']}"]


async def test_order_by_and_limit_over_a_batched_semi_join(schema, vcursor, oracle):
    sql = ("select a.name, a.id as ident from items a where a.qty > 1 and a.customer_id in "
           "(select b.customer_id from items b) order by a.name desc, ident limit 40 offset 3")
    plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", PlanCache(), schema=_huge(schema))
    _semi_join_node(plan).batch_size = 11
    ours = await engine.execute(plan, vcursor, bindvars)
    theirs = await oracle(sql)
    assert normalised(ours) == normalised(theirs) and len(theirs.rows) == 40
