"""Plans with work at the proxy above a multi-shard route."""

from __future__ import annotations

import json

import pytest

from rewriter import PlanCache, errors, plan_query
from tests.rewriter.helpers import explain
from vschema.tracked_schema import ColumnInfo, TableSchema, TrackedSchema


def test_limit_is_pushed_as_offset_plus_count(vschema):
    plan = explain(vschema, "select * from customer order by email limit 10 offset 5")
    assert (plan["OperatorType"], plan["Count"], plan["Offset"]) == ("Limit", "10", "5")
    route = plan["Inputs"][0]
    assert route["Query"].endswith("LIMIT :__upper_limit")


def test_order_by_merges_shard_streams(vschema):
    plan = explain(vschema, "select customer_id, email from customer order by email desc")
    assert plan["OperatorType"] == "Route"
    assert plan["OrderBy"] == "1 DESC"
    assert plan["Query"].endswith("ORDER BY email DESC")


def test_order_by_column_not_selected_adds_hidden_column(vschema):
    plan = explain(vschema, "select customer_id from customer order by tenant_id")
    assert plan["Query"].startswith("SELECT customer_id, tenant_id FROM customer")
    assert (plan["OrderBy"], plan["ResultColumns"]) == ("-1 ASC", -1)


def test_single_shard_query_with_limit_is_sent_whole(vschema):
    plan = explain(vschema, "select * from customer where customer_id = 1 order by email limit 3")
    assert plan["OperatorType"] == "Route"
    assert plan["Query"] == "select * from customer where customer_id = 1 order by email limit 3"


def test_count_star_sums_partial_counts(vschema):
    plan = explain(vschema, "select count(*) from customer")
    assert (plan["OperatorType"], plan["Variant"]) == ("Aggregate", "Scalar")
    assert plan["Aggregates"] == "sum_count_star(0) AS count(*)"


def test_avg_is_split_into_sum_and_count(vschema):
    plan = explain(vschema, "select avg(tenant_id) from customer")
    assert plan["Aggregates"] == "avg(0,1) AS avg(tenant_id)"
    assert plan["Inputs"][0]["Query"] == "SELECT SUM(tenant_id), COUNT(tenant_id) FROM customer"


def test_group_by_is_ordered_at_the_shards(vschema):
    plan = explain(vschema, "select tenant_id, count(*) from customer group by tenant_id")
    assert (plan["Variant"], plan["GroupBy"]) == ("Ordered", "0")
    route = plan["Inputs"][0]
    assert route["Query"].endswith("GROUP BY tenant_id ORDER BY tenant_id")
    assert route["OrderBy"] == "0 ASC"


def test_count_distinct_groups_by_the_distinct_column(vschema):
    plan = explain(vschema, "select tenant_id, count(distinct email) from customer group by tenant_id")
    assert plan["Aggregates"] == "count_distinct(1) AS count(distinct email)"
    assert plan["Inputs"][0]["Query"].endswith("GROUP BY tenant_id, email ORDER BY tenant_id, email")


def test_having_becomes_a_filter_over_aggregates(vschema):
    plan = explain(vschema, "select tenant_id from customer group by tenant_id having count(*) > 2")
    assert plan["OperatorType"] == "SimpleProjection"  # drops the hidden count(*)
    assert plan["Inputs"][0]["OperatorType"] == "Filter"
    assert plan["Inputs"][0]["Predicate"] == "COUNT(*) > 2"


def test_order_by_aggregate_sorts_in_memory(vschema):
    plan = explain(vschema, "select tenant_id, count(*) c from customer group by tenant_id order by c desc limit 3")
    assert plan["OperatorType"] == "Limit"
    assert plan["Inputs"][0]["OperatorType"] == "Sort"
    assert plan["Inputs"][0]["OrderBy"] == "1 DESC"


def test_distinct_is_applied_at_the_proxy(vschema):
    plan = explain(vschema, "select distinct tenant_id from customer")
    assert plan["OperatorType"] == "Distinct"
    assert plan["Inputs"][0]["Query"] == "SELECT DISTINCT tenant_id FROM customer"


def test_cross_shard_join_is_a_nested_loop_with_join_vars(vschema):
    plan = explain(vschema, "select c.email, o.sku from customer c join corder o on o.order_id = c.tenant_id")
    join = plan["Inputs"][0]
    assert (join["OperatorType"], join["Variant"]) == ("Join", "Join")
    assert join["JoinVars"] == {"c_tenant_id": 1}
    right = join["Inputs"][1]
    assert right["OperatorType"] == "VindexLookup"  # order_id has a lookup vindex
    assert right["Inputs"][1]["Query"] == "SELECT o.sku FROM corder AS o WHERE o.order_id = :c_tenant_id"


def test_left_join_across_keyspaces(vschema):
    plan = explain(vschema, "select c.email, p.name from customer c left join product p on p.id = c.tenant_id")
    join = plan["Inputs"][0]
    assert join["Variant"] == "LeftJoin"
    assert join["Inputs"][1]["Variant"] == "Unsharded"


def test_join_routes_right_side_by_vindex_of_join_var(vschema):
    plan = explain(vschema, "select p.name, c.email from product p join customer c on c.customer_id = p.id")
    right = plan["Inputs"][0]["Inputs"][1]
    assert (right["Variant"], right["Values"]) == ("EqualUnique", [":p_id"])


@pytest.mark.parametrize("sql", [
    "select * from customer c join product p on p.id = c.tenant_id",
    "select soundex(concat(c.email, p.name)) from customer c join product p on p.id = c.tenant_id",
    "select c.email from customer c left join product p on p.id = c.tenant_id where p.name = 'x'",
    "select (select count(*) from corder) from customer",
    "select soundex(count(*)) from customer",
    "select count(*) + rand() from customer",
    "select group_concat(email) from customer",
    "select t.n + 1 from (select tenant_id, count(*) n from customer group by tenant_id) t",
    "select * from (select tenant_id, count(*) n from customer group by tenant_id) t order by n",
    "select email from customer union all select name from product order by 1",
    "select stddev(tenant_id) from customer",
    "select bit_xor(tenant_id) from customer",
    "select customer_id, count(distinct tenant_id) over (order by customer_id) from customer",
    "select tenant_id, count(*) from customer group by tenant_id with rollup",
    "select * from customer c where exists (select 1 from corder o where o.customer_id = c.tenant_id)",
])
def test_what_shards_cannot_combine_is_finished_by_a_compute(vschema, sql):
    plan = explain(vschema, sql)
    assert plan["OperatorType"] == "Compute"
    assert all(i["OperatorType"] == "TempTable" for i in plan["Inputs"])


@pytest.mark.parametrize(("sql", "finisher"), [
    ("select concat(count(*), 'x') from customer", "Projection"),
    ("select tenant_id, round(avg(customer_id), 1) from customer group by tenant_id", "Projection"),
    ("select tenant_id, date_format(max(created), '%Y-%m') from customer group by tenant_id", "Projection"),
    ("select tenant_id from customer group by tenant_id having datediff(max(created), min(created)) > 7",
     "Filter"),
])
def test_functions_over_aggregates_are_finished_by_the_evaluator(vschema, sql, finisher):
    """MySQL's functions over cross-shard aggregates are computed at the proxy (one
    evaluator, rewriter.functions) over the merged aggregate, not sent to Compute."""
    plan = explain(vschema, sql)
    while plan["OperatorType"] in ("SimpleProjection", "Truncate"):
        (plan,) = plan["Inputs"]
    assert plan["OperatorType"] == finisher
    assert plan["Inputs"][0]["OperatorType"] == "Aggregate"


def test_compute_pushes_single_table_filters_and_reduces_joined_inputs(vschema):
    schema = TrackedSchema({
        "customer": {"customer": TableSchema("customer", (
            ColumnInfo("customer_id", "bigint"), ColumnInfo("tenant_id", "bigint"),
            ColumnInfo("email", "varchar", collation="utf8mb4_general_ci")))},
        "commerce": {"product": TableSchema("product", (
            ColumnInfo("id", "bigint"), ColumnInfo("name", "varchar", collation="utf8mb4_general_ci")))},
    })
    node, _ = plan_query("vexplain plan select c.email, count(p.name) from customer c left join product p "
                         "on p.id = c.tenant_id and p.name = 'x' where c.email like 'a%' "
                         "group by c.email with rollup", vschema, None, PlanCache(), schema=schema)
    plan = json.loads(node.json)
    assert plan["OperatorType"] == "Compute"
    customer, product = plan["Inputs"]
    assert customer["Columns"] == ["tenant_id", "email"]
    assert customer["Inputs"][0]["Query"] == "SELECT c.tenant_id, c.email FROM customer AS c WHERE c.email LIKE 'a%'"
    assert product["Inputs"][0]["Query"] == "SELECT p.id, p.name FROM product AS p WHERE p.name = 'x'"
    # product is the NULL-supplied side: it may be fetched for customer's tenants only
    assert product["Reductions"] == ["::__sg_red1 = _sg_tmp_0.tenant_id"]
    assert product["Inputs"][1]["Query"].endswith("WHERE p.name = 'x' AND p.id IN (:__sg_red1)")


def test_window_function_on_one_shard_is_sent_whole(vschema):
    plan = explain(vschema, "select row_number() over (order by email) from customer where customer_id = 1")
    assert (plan["OperatorType"], plan["Variant"]) == ("Route", "EqualUnique")


def test_scalar_subquery_on_reference_table_stays_in_the_route(vschema):
    plan = explain(vschema, "select (select count(*) from country) from customer")
    assert (plan["OperatorType"], plan["Variant"]) == ("Route", "Scatter")


def test_query_over_aggregated_derived_table_filters_and_projects_at_the_proxy(vschema):
    plan = explain(vschema, "select * from (select tenant_id, count(*) as n from customer group by tenant_id) "
                            "SPARK_GEN_SUBQ_0 where 1 = 0")
    assert (plan["OperatorType"], plan["Columns"]) == ("SimpleProjection", "*")
    assert plan["Inputs"][0]["OperatorType"] == "Filter"
    assert plan["Inputs"][0]["Inputs"][0]["OperatorType"] == "Aggregate"


def test_uncorrelated_in_subquery_runs_first_and_routes_the_outer_by_its_values(vschema):
    plan = explain(vschema, "select email from customer where customer_id in (select customer_id from corder where sku = 'x')")
    assert (plan["OperatorType"], plan["Variant"]) == ("UncorrelatedSubquery", "PulloutIn")
    outer = plan["Inputs"][1]
    assert (outer["Variant"], outer["Values"]) == ("IN", ["::__sq1"])
    assert outer["Query"] == "SELECT email FROM customer WHERE (:__sq_has_values1 = 1 AND customer_id IN (:__sq1))"


def test_not_in_subquery_keeps_empty_result_semantics(vschema):
    plan = explain(vschema, "select * from product where id not in (select tenant_id from customer)")
    assert plan["Inputs"][1]["Query"] == "SELECT * FROM product WHERE (:__sq_has_values1 = 0 OR NOT id IN (:__sq1))"


def test_scalar_subquery_value_routes_the_outer_query(vschema):
    plan = explain(vschema, "select * from customer where customer_id = (select max(customer_id) from corder)")
    assert plan["Variant"] == "PulloutValue"
    assert plan["Inputs"][1]["Variant"] == "EqualUnique"


def test_expression_over_aggregates_is_computed_by_a_projection(vschema):
    plan = explain(vschema, "select sum(tenant_id) / count(*) as mean from customer")
    assert plan["OperatorType"] == "SimpleProjection"  # drops the helper aggregates
    projection = plan["Inputs"][0]
    assert projection["OperatorType"] == "Projection"
    assert projection["Expressions"] == ["SUM(tenant_id) / COUNT(*) as mean"]
    assert projection["Inputs"][0]["Aggregates"] == "sum(0) AS SUM(tenant_id), sum_count_star(1) AS COUNT(*)"


def test_aggregation_over_cross_shard_join_sorts_and_aggregates_at_the_proxy(vschema):
    plan = explain(vschema, "select c.tenant_id, count(*), sum(p.id) from customer c join product p "
                            "on p.id = c.tenant_id group by c.tenant_id")
    assert (plan["OperatorType"], plan["Variant"], plan["GroupBy"]) == ("Aggregate", "Ordered", "0")
    assert plan["Aggregates"] == "sum_count_star(1) AS count(*), sum(2) AS sum(p.id)"
    assert plan["Inputs"][0]["OperatorType"] == "Sort"


@pytest.mark.parametrize(("sql", "message"), [
    ("select count(*) into @c from customer", "SELECT INTO"),
    ("select sql_calc_found_rows email from customer limit 3", "SQL_CALC_FOUND_ROWS across shards"),
    ("select @x := tenant_id from customer", "user variable assignment across shards"),
])
def test_session_side_effects_across_shards_are_refused(vschema, sql, message):
    with pytest.raises(errors.Unsupported, match=message):
        explain(vschema, sql)


def test_star_in_cross_shard_join_expands_authoritative_columns(vschema):
    plan = explain(vschema, "select n.* from customer c join customer_note n on n.customer_id = c.tenant_id")
    right = plan["Inputs"][0]["Inputs"][1]
    assert right["Query"] == ("SELECT n.note_id, n.customer_id, n.body FROM customer_note AS n "
                              "WHERE n.customer_id = :c_tenant_id")


@pytest.mark.parametrize("sql", [
    "select c.email, (select count(*) from corder o where o.customer_id = c.customer_id) from customer c",
    "select c.email from customer c where exists (select 1 from corder o where o.customer_id = c.customer_id)",
    "select c.email from customer c where not exists (select 1 from corder o where o.customer_id = c.customer_id)",
    "select c.email from customer c where c.customer_id in (select o.customer_id from corder o where o.sku = 3)",
])
def test_subquery_on_the_outer_rows_vindex_value_merges_into_one_route(vschema, sql):
    plan = explain(vschema, sql)
    assert (plan["OperatorType"], plan["Variant"]) == ("Route", "Scatter")
    assert plan["Query"] == sql


@pytest.mark.parametrize("sql", [
    "select c.email from customer c where exists (select 1 from corder o where o.customer_id = c.tenant_id)",
    "select c.email from customer c where c.customer_id not in (select o.customer_id from corder o)",
])
def test_subquery_not_tied_to_the_vindex_value_does_not_merge(vschema, sql):
    assert explain(vschema, sql)["OperatorType"] != "Route"


def test_select_items_over_both_sides_of_a_join_are_finished_by_the_evaluator(vschema):
    """An expression over several tables of a cross-shard join is computed at the proxy
    over the joined row (a Projection above the Join), not sent to Compute."""
    plan = explain(vschema, "select concat(c.email, p.name), c.tenant_id + p.id from customer c "
                            "join product p on p.id = c.tenant_id")
    assert plan["OperatorType"] == "SimpleProjection"
    (projection,) = plan["Inputs"]
    assert projection["OperatorType"] == "Projection"
    assert projection["Inputs"][0]["OperatorType"] == "Join"
