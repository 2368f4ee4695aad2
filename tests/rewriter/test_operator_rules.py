"""The logical operator planner: the tree the builder makes, what each rewrite rule
turns it into at the fixpoint, which statements it sends whole as one Route, and which
it leaves to Compute."""

from __future__ import annotations

import pytest

from rewriter import nodes
from rewriter.context import PlanContext
from rewriter.nodes import Opcode
from rewriter.operator_builder import WHOLE, build
from rewriter.operator_planner import plan_with_operators
from rewriter.operators import (
    Aggregator,
    ApplyJoin,
    Filter,
    Limit,
    Operator,
    Ordering,
    Projection,
    Route,
    Union,
)
from rewriter.planner import parse, plan
from rewriter.rules import rewrite
from rewriter.rules.planning import Planning
from tests.rewriter.test_golden_plans import SCHEMA


def rewritten(vschema, sql: str) -> tuple[Operator, Planning]:
    ctx = PlanContext(vschema, None, source=sql)
    op = build(parse(sql), ctx)
    assert op is not None, sql
    planning = Planning(ctx)
    return rewrite(op, planning), planning


def shape(op: Operator) -> str:
    """``Limit(Ordering(Route))``: the operator types from the top."""
    inputs = op.inputs()
    inner = ",".join(shape(i) for i in inputs)
    return f"{type(op).__name__}({inner})" if inputs else type(op).__name__


def test_builder_makes_a_route_per_table_joins_filter_and_projection(vschema):
    ctx = PlanContext(vschema, None)
    op = build(parse("select c.email from customer c join corder o on o.price = c.tenant_id where c.tenant_id = 3"),
               ctx)
    assert shape(op) == "Projection(Filter(ApplyJoin(Route,Route)))"
    join = op.input.input  # type: ignore[attr-defined]
    assert isinstance(join, ApplyJoin) and [t.name for r in join.inputs() for t in r.tables] == ["customer", "corder"]


def test_builder_orders_clauses_as_sql_evaluates_them(vschema):
    ctx = PlanContext(vschema, None)
    op = build(parse("select tenant_id, count(*) from customer where country = 'x' group by tenant_id "
                     "having count(*) > 1 order by 2 desc limit 3"), ctx)
    assert shape(op) == "Limit(Ordering(Projection(Filter(Aggregator(Filter(Route))))))"
    assert isinstance(op.input.input.input, Filter) and op.input.input.input.clause == "having"  # type: ignore[attr-defined]


@pytest.mark.parametrize("sql", [
    "select (select max(o.price) from corder o where o.sku in (select email from customer)) from customer",
    "select * from customer where tenant_id > any (select price from corder)",
    "select * from (select * from customer) t join corder o on o.customer_id = t.customer_id",
    "select * from customer intersect select * from customer",
])
def test_constructs_without_an_operator_across_shards_are_left_to_compute(vschema, sql):
    stmt = parse(sql)
    assert build(stmt, PlanContext(vschema, None)) is None
    assert isinstance(plan(sql, vschema, None), nodes.Compute)


@pytest.mark.parametrize("sql", [
    "with recursive t (n) as (select 1 union all select n + 1 from t where n < 3) select * from t",
    "select tenant_id, count(*) from customer where customer_id = 5 group by tenant_id with rollup",
    "select * from customer c full outer join corder o on o.customer_id = c.customer_id where c.customer_id = 5",
    "select name from product intersect select name from product where id = 1",
])
def test_constructs_without_an_operator_on_one_shard_are_one_route_carrying_the_statement(vschema, sql):
    op = build(parse(sql), PlanContext(vschema, None))
    assert isinstance(op, Route) and op.absorbed == WHOLE
    planned = plan(sql, vschema, None)
    assert isinstance(planned, nodes.Route) and planned.query.text() == sql


@pytest.mark.parametrize("sql", [
    "select tenant_id, count(*) from customer group by tenant_id with rollup",
])
def test_a_whole_statement_over_a_scatter_the_shards_cannot_combine_is_computed(vschema, sql):
    op = build(parse(sql), PlanContext(vschema, None))
    assert isinstance(op, Route) and op.absorbed == WHOLE
    assert isinstance(plan(sql, vschema, None), nodes.Compute)


@pytest.mark.parametrize("sql", [
    "select * from customer c where c.tenant_id in (select o.price from corder o group by o.price having "
    "max(o.sku) = (select 1))",
    "select * from customer where customer_id in (select customer_id from corder where price in (select 1))",
])
def test_an_uncorrelated_where_subquery_with_subqueries_of_its_own_is_pulled_out(vschema, sql):
    op, _ = rewritten(vschema, sql)
    assert shape(op).startswith("Projection(SubQuery(") and op.input.pullout  # type: ignore[attr-defined]


def test_filter_on_the_vindex_is_pushed_into_the_route_and_the_route_takes_the_statement(vschema):
    op, planning = rewritten(vschema, "select email from customer where customer_id = 5 order by email limit 1")
    assert isinstance(op, Route)
    assert op.absorbed == {"where", "select", "order", "limit"}
    assert planning.routing(op).opcode is Opcode.EqualUnique


def test_join_on_equal_vindex_columns_merges_into_one_route(vschema):
    op, planning = rewritten(vschema, "select c.email, o.price from customer c join corder o "
                                      "on o.customer_id = c.customer_id where c.customer_id = 7")
    assert isinstance(op, Route) and [t.name for t in op.tables] == ["customer", "corder"]
    assert planning.routing(op).opcode is Opcode.EqualUnique


def test_where_equality_of_vindex_columns_merges_a_comma_join(vschema):
    op, _ = rewritten(vschema, "select c.email, o.sku from customer c, corder o where c.customer_id = o.customer_id")
    assert isinstance(op, Route)


def test_join_on_a_non_vindex_column_stays_a_join_with_filters_pushed_to_each_side(vschema):
    op, _ = rewritten(vschema, "select c.email, o.price from customer c join corder o on o.order_id = c.tenant_id "
                               "where c.email = 'a' and o.price > 3")
    assert shape(op) == "Projection(ApplyJoin(Route,Route))"
    join = op.input  # type: ignore[attr-defined]
    assert [len(r.predicates) for r in join.inputs()] == [1, 1]
    assert len(join.predicates) == 1  # o.order_id = c.tenant_id


def test_reference_table_merges_with_a_sharded_table_of_its_keyspace(vschema):
    op, _ = rewritten(vschema, "select c.email, k.name from customer c join country k on c.country = k.code")
    assert isinstance(op, Route) and {t.name for t in op.tables} == {"customer", "country"}


def test_tables_of_two_keyspaces_do_not_merge(vschema):
    op, _ = rewritten(vschema, "select p.name, c.email from product p join customer c on c.customer_id = p.id")
    assert shape(op) == "Projection(ApplyJoin(Route,Route))"


def test_join_tables_merge_in_any_order(vschema):
    op, _ = rewritten(vschema, "select a.email from customer a join customer b on a.tenant_id = b.tenant_id "
                               "join corder o on o.customer_id = a.customer_id and o.customer_id = b.customer_id")
    assert isinstance(op, Route) and len(op.tables) == 3


def test_join_using_the_vindex_column_merges_into_one_route(vschema):
    op, _ = rewritten(vschema, "select email, sku from customer join corder using (customer_id)")
    assert isinstance(op, Route) and len(op.tables) == 2


def test_natural_join_compares_the_common_columns_of_the_tracked_schema(vschema):
    ctx = PlanContext(vschema, None, schema=SCHEMA)
    op = build(parse("select * from customer natural join corder"), ctx)
    join = op.input  # type: ignore[attr-defined]
    assert isinstance(join, ApplyJoin)
    assert [p.sql() for p in join.predicates] == ["customer.customer_id = corder.customer_id"]
    assert isinstance(rewrite(op, Planning(ctx)), Route)


def test_natural_join_without_known_columns_is_left_to_compute(vschema):
    assert build(parse("select * from customer natural join corder"), PlanContext(vschema, None)) is None


def test_right_join_on_the_vindex_merges_and_keeps_its_where_above_until_merged(vschema):
    op, _ = rewritten(vschema, "select c.email from customer c right join corder o on o.customer_id = c.customer_id "
                               "where c.email is null")
    assert isinstance(op, Route) and op.absorbed >= {"where"}
    op, _ = rewritten(vschema, "select c.email from customer c right join product p on p.id = c.tenant_id "
                               "where c.email is null")
    assert shape(op) == "Projection(Filter(ApplyJoin(Route,Route)))"


def test_left_join_whose_where_rejects_padded_rows_is_planned_as_inner(vschema):
    op, _ = rewritten(vschema, "select c.email from customer c left join corder o on o.sku = c.email "
                               "where o.customer_id = c.customer_id")
    assert isinstance(op, Route)


def test_left_join_keeps_a_where_on_its_nullable_side_above_the_join(vschema):
    op, _ = rewritten(vschema, "select c.email from customer c left join product p on p.id = c.tenant_id "
                               "where p.name is null")
    assert shape(op) == "Projection(Filter(ApplyJoin(Route,Route)))"


def test_scatter_aggregation_is_split_and_ordering_and_limit_pushed(vschema):
    op, _ = rewritten(vschema, "select tenant_id, count(*) from customer group by tenant_id "
                               "order by count(*) desc limit 5")
    assert shape(op) == "Limit(Ordering(Projection(Aggregator(Route))))"
    assert isinstance(op, Limit) and op.pushed
    assert isinstance(op.input, Ordering) and op.input.pushed
    agg = op.input.input.input
    assert isinstance(agg, Aggregator) and agg.pushed


def test_scatter_route_takes_the_select_list_but_not_the_ordering(vschema):
    op, _ = rewritten(vschema, "select email from customer order by email")
    assert shape(op) == "Ordering(Route)"
    assert isinstance(op.input, Route) and op.input.absorbed == {"select"}  # type: ignore[attr-defined]


def test_union_arms_on_the_same_vindex_value_merge_into_one_route(vschema):
    op, planning = rewritten(vschema, "select email from customer where customer_id = 1 "
                                      "union select sku from corder where customer_id = 1")
    assert isinstance(op, Route)
    assert planning.routing(op).opcode is Opcode.EqualUnique


@pytest.mark.parametrize("sql", [
    "select email from customer where customer_id = 1 union select sku from corder where customer_id = 2",
    "select email from customer where customer_id = 1 union select sku from corder where customer_id = '1'",
    "select email from customer union select name from product",
])
def test_union_arms_on_different_shards_or_keyspaces_stay_apart(vschema, sql):
    op, _ = rewritten(vschema, sql)
    assert isinstance(op, Union) and len(op.sources) == 2


def test_union_of_unsharded_arms_is_one_route(vschema):
    op, planning = rewritten(vschema, "select id from product union select id from customer_seq")
    assert isinstance(op, Route) and planning.routing(op).opcode is Opcode.Unsharded


def test_rules_never_change_the_built_tree_in_place(vschema):
    ctx = PlanContext(vschema, None)
    op = build(parse("select c.email from customer c join corder o on o.customer_id = c.customer_id"), ctx)
    before = shape(op)
    rewrite(op, Planning(ctx))
    assert shape(op) == before == "Projection(ApplyJoin(Route,Route))"
    assert isinstance(op, Projection)


@pytest.mark.parametrize("sql", [
    "select k.name, c.email from country k left join customer c on c.country = k.code",
    "select k.name, c.email from customer c right join country k on c.country = k.code",
])
def test_reference_table_preserved_by_an_outer_join_to_a_sharded_table_does_not_merge(vschema, sql):
    op, _ = rewritten(vschema, sql)
    assert shape(op) == "Projection(ApplyJoin(Route,Route))"


def test_row_by_row_derived_table_merges_with_its_route_and_outer_filters_do_not_route(vschema):
    op, planning = rewritten(vschema, "select * from (select tenant_id as customer_id from customer) t "
                                      "where customer_id = 5")
    assert isinstance(op, Route) and "derived" in op.absorbed and op.predicates == ()
    assert planning.routing(op).opcode is Opcode.Scatter


def test_derived_table_ordering_is_dropped_when_merging(vschema):
    op, _ = rewritten(vschema, "select t.email from (select email from customer order by email) t")
    assert isinstance(op, Route) and "derived" in op.absorbed


def test_aggregating_derived_table_is_not_merged(vschema):
    op, _ = rewritten(vschema, "select * from (select tenant_id, count(*) as n from customer group by tenant_id) t")
    assert shape(op) == "Projection(Derived(Projection(Aggregator(Route))))"


def test_in_subquery_on_the_same_vindex_merges_into_the_outer_route(vschema):
    op, planning = rewritten(vschema, "select c.email from customer c where c.customer_id = 4 and "
                                      "c.customer_id in (select o.customer_id from corder o)")
    assert isinstance(op, Route) and {t.name for t in op.tables} == {"customer", "corder"}
    assert planning.routing(op).opcode is Opcode.EqualUnique


@pytest.mark.parametrize("sql", [
    "select c.email from customer c where c.customer_id not in (select o.customer_id from corder o)",
    "select c.email from customer c where c.tenant_id in (select o.customer_id from corder o)",
    "select c.email from customer c where exists (select 1 from corder o where o.price = 3)",
])
def test_subquery_reading_other_shards_stays_to_be_pulled_out(vschema, sql):
    op, _ = rewritten(vschema, sql)
    assert shape(op) == "Projection(SubQuery(Route,Route))"


def test_correlated_subquery_on_the_vindex_column_merges(vschema):
    op, _ = rewritten(vschema, "select c.email, (select count(*) from corder o where o.customer_id = c.customer_id) "
                               "from customer c")
    assert isinstance(op, Route) and {t.name for t in op.tables} == {"customer", "corder"}


def test_correlated_subquery_elsewhere_is_left_to_compute(vschema):
    sql = "select c.email from customer c where exists (select 1 from corder o where o.sku = c.email)"
    op, _ = rewritten(vschema, sql)
    assert shape(op) == "Projection(SubQuery(Route,Route))"
    assert plan_with_operators(parse(sql), PlanContext(vschema, None)) is None


def test_window_partitioned_by_the_unique_vindex_column_is_computed_by_the_shards(vschema):
    op, _ = rewritten(vschema, "select customer_id, row_number() over (partition by customer_id order by email) "
                               "from customer")
    assert isinstance(op, Route) and "window" in op.absorbed


def test_window_over_all_rows_of_a_scatter_is_computed_at_the_proxy_over_the_sorted_route(vschema):
    sql = "select customer_id, row_number() over (order by email) from customer"
    op, _ = rewritten(vschema, sql)
    assert shape(op) == "Projection(Window(Route))"
    plan = plan_with_operators(parse(sql), PlanContext(vschema, None))
    assert isinstance(plan, nodes.SimpleProjection) and plan.columns == [0, 2]  # the email helper dropped
    window = plan.input
    assert isinstance(window, nodes.Window) and [f.kind for f in window.functions] == [nodes.WIN_ROW_NUMBER]
    route = window.input
    assert isinstance(route, nodes.Route) and route.opcode is Opcode.Scatter
    assert route.query.text() == "SELECT customer_id, email FROM customer ORDER BY email ASC"
    assert route.order_by == [nodes.OrderKey(1, False, "email")]


@pytest.mark.parametrize("sql", [
    "select customer_id, rank() over v from customer window w as (order by email)",  # names no window
    "select customer_id, sum(customer_id) over (order by email, customer_id range between 1 preceding "
    "and current row) from customer",  # RANGE with an offset over two keys
    "select customer_id, sum(distinct customer_id) over (order by email) from customer",  # DISTINCT inside
    "select customer_id, 1 + row_number() over (order by email) w from customer order by w + 1",  # ORDER BY over one
    "select distinct row_number() over (order by email) from customer",
    "select customer_id, sum(customer_id) over (order by email rows between current row and 1 preceding) "
    "from customer",  # a frame ending before it starts: the server's own error
])
def test_window_without_a_proxy_primitive_is_left_to_compute(vschema, sql):
    assert isinstance(plan(sql, vschema, None), nodes.Compute)


def test_cte_is_built_as_the_derived_table_it_names(vschema):
    op, planning = rewritten(vschema, "with t as (select customer_id, email from customer where customer_id = 5) "
                                      "select email from t")
    assert isinstance(op, Route) and planning.routing(op).opcode is Opcode.EqualUnique
