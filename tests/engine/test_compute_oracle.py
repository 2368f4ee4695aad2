"""Statements no single route answers, planned as ``Compute`` (inputs fetched at the
shards, the statement finished on one shard's server), against the oracle: one
MariaDB database holding the same rows. Same comparison rules as test_oracle."""

from __future__ import annotations

import pytest
import pytest_asyncio

from proxy import engine
from rewriter import PlanCache, plan_query
from tests.engine.test_oracle import _sortable, normalised

CACHE = PlanCache()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def schema(loaded, vcursor):
    return await vcursor.tracked_schema()


async def run_sharded(vcursor, schema, sql):
    plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", CACHE, schema=schema)
    return plan, await engine.execute(plan, vcursor, bindvars)


QUERIES = {
    "cte_single": ("with t as (select customer_id, sum(qty) s from items group by customer_id) "
                   "select * from t where s > 100", "unordered"),
    "cte_twice": ("with t as (select customer_id, count(*) n from items group by customer_id) "
                  "select a.customer_id, b.n from t a join t b on a.customer_id = b.customer_id + 1", "unordered"),
    "cte_recursive": ("with recursive r (n) as (select 1 union all select n + 1 from r where n < 10) "
                      "select r.n, count(i.id) from r left join items i on i.qty = r.n group by r.n order by r.n",
                      "ordered"),
    "correlated_scalar_subquery": ("select i.id, (select count(*) from items j where j.qty = i.qty) c from items i "
                                   "where i.id < 40", "unordered"),
    "exists_across_shards": ("select count(*) from items i where exists (select 1 from items j "
                             "where j.customer_id = i.id)", "ordered"),
    "not_exists_across_shards": ("select count(*) from items i where not exists (select 1 from items j "
                                 "where j.customer_id = i.id)", "ordered"),
    "not_in_correlated_nulls": ("select count(*) from items i where i.qty not in (select j.qty from items j "
                                "where j.grp = i.grp)", "ordered"),
    "window_row_number": ("select id, qty, row_number() over (partition by qty order by id) rn from items "
                          "where id < 200", "unordered"),
    "window_rank_frames": ("select id, grp, rank() over (order by qty desc), sum(price) over (partition by grp order by id "
                           "rows between 2 preceding and current row) from items where id < 300", "unordered"),
    "join_using": ("select count(*) from items a join items b using (customer_id) where a.qty = 3", "ordered"),
    "self_join_unqualified": ("select a.id, b.id from items a join items b on a.id = b.customer_id where a.qty = 7",
                              "unordered"),
    "union_order_limit": ("select id from items where qty = 1 union select id from items where qty = 2 "
                          "order by id desc limit 5", "ordered"),
    "intersect": ("select qty from items where id < 100 intersect select qty from items where id > 2900", "unordered"),
    "except": ("select qty from items except select qty from items where id > 10", "unordered"),
    "group_concat_distinct_order": ("select qty, group_concat(distinct customer_id % 7 order by customer_id % 7 desc separator ';') "
                                    "from items where qty < 5 group by qty", "ordered"),
    "rollup": ("select qty, count(*), sum(price) from items where qty < 4 group by qty with rollup", "unordered"),
    "json_arrayagg": ("select qty, json_length(json_arrayagg(id)) from items group by qty", "unordered"),
    "exists_scalar": ("select exists(select 1 from items where qty = 3)", "ordered"),
    "derived_aggregate_order_limit": ("select t.c, count(*) from (select customer_id, count(*) c from items "
                                      "group by customer_id) t group by t.c order by t.c limit 3", "ordered"),
    "cross_keyspace_join": ("select l.label, count(*) from items i join lookup.qty_labels l on l.qty = i.qty "
                            "group by l.label", "unordered"),
    "merged_correlated_count": ("select i.id, (select count(*) from items j where j.id = i.id and j.qty > 3) "
                                "from items i where i.qty < 3", "unordered"),
    "merged_not_exists": ("select count(*) from items i where not exists (select 1 from items j "
                          "where j.id = i.id and j.price > 100)", "ordered"),
    "colocated_exists_under_not": ("select count(*) from items a join items b on b.id = a.customer_id "
                                   "where a.customer_id in (59, 59) and not ((not exists (select 1 from items s1 "
                                   "where s1.id = a.id and abs(s1.score - 2e0) <= 4) and a.id = null))", "ordered"),
    "colocated_in_under_not": ("select count(*) n from items i left join lookup.qty_labels l on l.qty = i.qty "
                               "where not (i.customer_id * 2 >= 27 and i.id in (select s1.id from items s1 "
                               "where s1.id >= 1774))", "ordered"),
    "union_then_union_all": ("select customer_id from items union select customer_id from items where qty = 3 "
                             "union all select id from items where id < 50", "unordered"),
    "std_variance_bit": ("select std(qty), variance(price), bit_or(qty), bit_and(qty), bit_xor(qty) from items",
                         "ordered"),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
async def test_compute_result_equals_oracle(name, schema, vcursor, oracle):
    sql, how = QUERIES[name]
    _plan, got = await run_sharded(vcursor, schema, sql)
    want = await oracle(sql)
    assert [f.name for f in got.fields] == [f.name for f in want.fields]
    g, w = normalised(got), normalised(want)
    if how == "ordered":
        assert g == w
    else:
        assert _sortable(g) == _sortable(w)
