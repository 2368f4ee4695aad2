"""UNION [ALL] across shards with ORDER BY / LIMIT over the whole UNION: the arms run as
their own routes, the proxy concatenates (DISTINCT for UNION), sorts and limits —
answering as one MariaDB holding the same rows does. A key whose type differs between
the arms (MySQL sorts by the type it derives from every arm) stays on Compute.
"""

from __future__ import annotations

import json

import pytest
import pytest_asyncio

from proxy import engine
from rewriter import PlanCache, plan_query
from tests.engine.test_oracle import _sortable, normalised
from tests.engine.test_proxy_joins import operators_of


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def schema(loaded, vcursor):
    return await vcursor.tracked_schema()


async def _run(vcursor, schema, sql):
    explain, _ = plan_query("vexplain plan " + sql, vcursor.vschema, "commerce", PlanCache(), schema=schema)
    plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", PlanCache(), schema=schema)
    return json.loads(explain.json), await engine.execute(plan, vcursor, bindvars)


# name: (sql, sorted completely by its ORDER BY: rows compared in sequence)
SORTED_AT_THE_PROXY = {
    "union_order_by_name_desc_limit": (
        "select id from items where qty = 3 union select customer_id from items where qty = 4 "
        "order by id desc limit 7", True),
    "union_all_order_by_position_with_nulls_offset": (
        "select qty, id from items where grp = 'a' union all select qty, id from items where grp = 'b' "
        "order by 1, 2 desc limit 20 offset 5", True),
    "union_order_by_collated_text_keeps_ties": (
        "select name from items where qty = 1 union select name from items where qty = 2 order by name", False),
    "union_order_by_alias_of_the_first_arm": (
        "select price as p, id from items where qty = 5 union all select price, id from items where qty = 6 "
        "order by p desc, id limit 12", True),
}


@pytest.mark.parametrize("name", sorted(SORTED_AT_THE_PROXY))
async def test_union_sorted_and_limited_at_the_proxy_equals_oracle(name, schema, vcursor, oracle):
    sql, total = SORTED_AT_THE_PROXY[name]
    plan, ours = await _run(vcursor, schema, sql)
    assert operators_of(plan, "Concatenate") and not operators_of(plan, "Compute")
    theirs = await oracle(sql)
    assert theirs.rows
    assert [f.name.lower() for f in ours.fields] == [f.name.lower() for f in theirs.fields]
    if total:
        assert normalised(ours) == normalised(theirs)
    else:  # ties under the collation: the sort keys in sequence, the rows as multisets
        assert [r[0] for r in normalised(ours)] == [r[0] for r in normalised(theirs)]
        assert _sortable(normalised(ours)) == _sortable(normalised(theirs))


async def test_union_limit_without_order_returns_that_many_rows_of_the_union(schema, vcursor, oracle):
    sql = "select id from items where qty = 3 union all select id from items where qty = 4 limit 9"
    plan, ours = await _run(vcursor, schema, sql)
    assert operators_of(plan, "Limit") and not operators_of(plan, "Compute")
    every = await oracle(sql.removesuffix(" limit 9"))
    assert len(ours.rows) == 9 and set(ours.rows) <= set(every.rows)


@pytest.mark.parametrize("sql", [
    # a number in one arm and a string in the other: MySQL sorts the column as strings
    "select qty from items where id < 30 union select name from items where id > 2970 order by 1",
    # an expression as the key
    "select id from items where qty = 3 union select id from items where qty = 4 order by id + 1 limit 5",
])
async def test_union_keys_the_proxy_cannot_sort_as_mysql_stay_on_compute(sql, schema, vcursor, oracle):
    plan, ours = await _run(vcursor, schema, sql)
    assert plan["OperatorType"] == "Compute"
    theirs = await oracle(sql)
    assert normalised(ours) == normalised(theirs)
