"""Cross-shard statements that use MySQL's functions over aggregates (select list, HAVING,
ORDER BY, filters over a derived aggregation) and over window functions are finished at the
proxy by the one evaluator (``rewriter.functions``), not sent to ``Compute``, and answer
exactly as one MariaDB holding the same rows: same column names, same column types, same
values (dates as DATE text, DECIMAL scales as MariaDB shows them)."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import random
from decimal import Decimal

import pymysql
import pytest
import pytest_asyncio

from proxy import engine
from proxy.engine.projection_compute import field_kind
from proxy.errors import ProxyError
from rewriter import PlanCache, plan_query
from rewriter.nodes import Compute, Plan
from tests.engine.shard_vcursor import ShardVCursor
from tests.engine.test_oracle import _sortable, normalised
from vschema.loader import build_vschema

pytestmark = pytest.mark.asyncio(loop_scope="session")

CACHE = PlanCache()
DDL = """CREATE TABLE IF NOT EXISTS fn_orders (
  id BIGINT NOT NULL PRIMARY KEY,
  customer_id BIGINT,
  region VARCHAR(20),
  placed DATE,
  placed_at DATETIME,
  amount DECIMAL(10,2),
  note VARCHAR(20)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""
REGIONS = ["north", "North", "nörth", "south ", "South", "east", None]
NOTES = [None, "12abc", "05/02/2024", "31/01/2024", "x", "2024-02-29", "30/02/2024"]


def _rows() -> list[str]:
    rnd = random.Random(20261124)
    start = datetime.date(2023, 12, 20)
    out = []
    for i in range(1, 401):
        day = start + datetime.timedelta(days=rnd.randint(0, 80))
        at = datetime.datetime(day.year, day.month, day.day, rnd.randint(0, 23), rnd.randint(0, 59), rnd.randint(0, 59))
        amount = None if rnd.random() < 0.08 else Decimal(rnd.randint(-5000, 30000)) / 100
        values = [i, rnd.randint(1, 25), rnd.choice(REGIONS), None if rnd.random() < 0.05 else day,
                  None if rnd.random() < 0.05 else at, amount, rnd.choice(NOTES)]
        out.append("(" + ", ".join("NULL" if v is None else str(v) if isinstance(v, int | Decimal)
                                   else f"'{v}'" for v in values) + ")")
    return out


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fn_vcursor(local_cluster, oracle):
    """The example cluster's vschema with ``fn_orders`` sharded by ``id``; the same rows in
    the oracle database."""
    docs = {}
    for name, kc in local_cluster.config.keyspaces.items():
        doc = copy.deepcopy(kc.vschema)
        if name == "commerce":
            doc["tables"]["fn_orders"] = {"column_vindexes": [{"column": "id", "name": "hash"}]}
        docs[name] = (doc, list(kc.shards))
    vc = ShardVCursor(build_vschema(docs, local_cluster.config.routing_rules or None), local_cluster.endpoints)
    for run in [*(lambda q, s=s: vc.execute_shard("commerce", s, q) for s in vc.vschema.shards("commerce")), oracle]:
        await run(DDL)
        await run("DELETE FROM fn_orders")
    rows = _rows()
    for begin in range(0, len(rows), 100):
        sql = "INSERT INTO fn_orders (id, customer_id, region, placed, placed_at, amount, note) VALUES " + \
              ", ".join(rows[begin:begin + 100])
        plan, bindvars = plan_query(sql, vc.vschema, "commerce")
        await engine.execute(plan, vc, bindvars)
        await oracle(sql)
    yield vc
    await vc.close()


# Functions of MAX/MIN over collation-equal strings ('South', 'south ') are not compared where the
# chosen representative shows (CHAR_LENGTH, LOCATE of a case): MySQL does not define which one it is.
QUERIES = {
    "round_and_truncate_of_aggregates": (
        "select region, round(avg(amount), 1), truncate(sum(amount) / count(*), 2), round(sum(amount), -2), "
        "ceil(avg(amount)), abs(min(amount)), sign(sum(amount)) from fn_orders group by region", "unordered"),
    "date_functions_of_aggregates": (
        "select year(placed) y, month(placed) m, count(*), date_format(max(placed), '%Y-%m-%d %W'), "
        "datediff(max(placed), min(placed)), last_day(min(placed)), dayname(max(placed)) "
        "from fn_orders group by year(placed), month(placed)", "unordered"),
    "interval_arithmetic_of_aggregates": (
        "select customer_id, max(placed) + interval 1 month, date_sub(min(placed), interval 1 year), "
        "date_add(min(placed_at), interval 90 minute), adddate(max(placed), 3), "
        "timestampdiff(day, min(placed_at), max(placed_at)), timestampdiff(month, min(placed), max(placed)) "
        "from fn_orders group by customer_id", "unordered"),
    "date_parts_of_aggregates": (
        "select customer_id, week(max(placed)), week(min(placed), 3), quarter(min(placed)), dayofweek(max(placed)), "
        "dayofyear(max(placed)), weekday(min(placed)), extract(year_month from max(placed_at)), hour(max(placed_at)), "
        "date(max(placed_at)), time(min(placed_at)) from fn_orders group by customer_id", "unordered"),
    "control_flow_of_aggregates": (
        "select customer_id, case when sum(amount) > 500 then 'gold' when sum(amount) > 100 then 'silver' "
        "else 'bronze' end tier, coalesce(max(note), 'none'), if(count(*) > 15, max(placed), min(placed)), "
        "nullif(count(*), 16), greatest(max(amount), 0), least(min(placed), '2024-01-15'), ifnull(sum(amount), 0) "
        "from fn_orders group by customer_id", "unordered"),
    "string_functions_of_aggregates": (
        "select customer_id, concat(upper(left(max(region), 3)), '-', count(*)), lpad(count(*), 4, '0'), "
        "char_length(min(note)), locate('/', min(note)), replace(min(note), '/', '.'), "
        "concat_ws('|', min(region), max(region)), substring(max(note), 2, 3), trim(max(region)) "
        "from fn_orders group by customer_id", "unordered"),
    "casts_of_aggregates": (
        "select region, cast(sum(amount) as signed), cast(avg(amount) as decimal(8,1)), "
        "cast(max(placed) as datetime), cast(count(*) as char), convert(min(note), signed), "
        "str_to_date(max(note), '%d/%m/%Y'), str_to_date(min(note), '%d/%m/%Y%Q'), "
        "str_to_date(min(note), '%Q%d/%m/%Y') from fn_orders group by region", "unordered"),
    "having_with_functions": (
        "select region, count(*) from fn_orders group by region "
        "having datediff(max(placed), min(placed)) > 30 and round(sum(amount)) > 100 "
        "and date_format(max(placed_at), '%m') = '03'", "unordered"),
    "having_keeps_only_what_mysql_reads_as_true": (
        "select customer_id, count(*) from fn_orders group by customer_id "
        "having concat(count(*) % 3, 'x')", "unordered"),
    "derived_filter_reads_strings_as_numbers": (
        "select * from (select customer_id, max(region) r, concat(count(*), 'abc') c from fn_orders "
        "group by customer_id) t where concat(length(c) % 2, 'x')", "unordered"),
    "having_on_customer_months": (
        "select customer_id, count(*) from fn_orders group by customer_id "
        "having month(max(placed)) = 3 or last_day(min(placed)) = '2023-12-31'", "unordered"),
    "order_by_computed_alias": (
        "select customer_id, round(sum(amount), -1) r from fn_orders group by customer_id "
        "order by r desc, customer_id limit 10", "ordered"),
    "order_by_an_expression_over_aggregates_that_is_no_select_item": (
        "select customer_id, count(*) from fn_orders group by customer_id "
        "order by sum(amount) / count(*) desc, customer_id limit 12", "ordered"),
    "order_by_a_date_function_of_aggregates_not_selected": (
        "select region, max(placed) from fn_orders group by region "
        "order by datediff(max(placed), min(placed)), region", "ordered"),
    "order_by_a_function_of_the_group_key": (
        "select customer_id, count(*) c from fn_orders group by customer_id "
        "order by customer_id % 7, c desc, customer_id", "ordered"),
    "order_by_date_of_aggregate": (
        "select customer_id, date_format(max(placed), '%d.%m.%Y') d, max(placed) + interval 1 day nxt "
        "from fn_orders group by customer_id order by nxt, customer_id", "ordered"),
    "filter_over_derived_aggregation": (
        "select * from (select customer_id, sum(amount) s, max(placed) p from fn_orders group by customer_id) t "
        "where round(s, -2) >= 200 and month(p) = 3", "unordered"),
    "join_items_over_both_tables": (
        "select a.id, concat(a.region, '/', b.region) r, datediff(a.placed, b.placed), a.amount - b.amount, "
        "if(a.placed > b.placed, 'after', 'before'), date_format(greatest(a.placed_at, b.placed_at), '%Y-%m-%d %H') "
        "from fn_orders a join fn_orders b on b.id = a.customer_id where a.id < 200", "unordered"),
    "left_join_items_over_padded_rows": (
        "select a.id, coalesce(b.note, a.note), ifnull(b.placed, a.placed) + interval 1 day, concat(a.id, b.id) "
        "from fn_orders a left join fn_orders b on b.id = a.customer_id * 20 where a.id < 200", "unordered"),
    "join_items_ordered_by_alias": (
        "select a.id, round(a.amount / b.amount, 2) q from fn_orders a join fn_orders b on b.id = a.customer_id "
        "order by q desc, a.id limit 20", "ordered"),
    "join_ordered_by_expressions": (
        "select a.id, a.amount, b.amount from fn_orders a join fn_orders b on b.id = a.customer_id "
        "order by abs(a.amount - b.amount) desc, a.id limit 25", "ordered"),
    "left_join_ordered_by_padded_side": (
        "select a.id, b.placed from fn_orders a left join fn_orders b on b.id = a.customer_id * 20 "
        "where a.id < 100 order by coalesce(b.placed, '2000-01-01'), datediff(a.placed, '2024-01-01'), a.id",
        "ordered"),
    "aggregates_over_join_expressions": (
        "select a.region, sum(a.amount + b.amount), count(*), max(datediff(a.placed, b.placed)) "
        "from fn_orders a join fn_orders b on b.id = a.customer_id group by a.region", "unordered"),
    "date_functions_over_window_values": (
        "select id, datediff(placed, lag(placed) over (partition by customer_id order by id)) gap, "
        "coalesce(lead(placed) over (partition by customer_id order by id), placed) + interval 1 month nxt "
        "from fn_orders where id < 150", "unordered"),
    "window_with_functions": (
        "select id, concat('#', row_number() over (partition by customer_id order by id)) rn, "
        "round(avg(amount) over (partition by customer_id), 1) a from fn_orders where id < 120", "unordered"),
}


def _plan_nodes(plan: object) -> list[Plan]:
    out: list[Plan] = []
    if isinstance(plan, Plan):
        out.append(plan)
        for f in dataclasses.fields(plan):  # type: ignore[arg-type]
            value = getattr(plan, f.name)
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, Plan):
                    out.extend(_plan_nodes(child))
    return out


_SAME_FAMILY = {("int", "decimal"), ("decimal", "int")}


@pytest.mark.parametrize("name", sorted(QUERIES))
async def test_functions_finish_at_the_proxy_as_mariadb_answers(name, fn_vcursor, oracle):
    sql, how = QUERIES[name]
    plan, bindvars = plan_query(sql, fn_vcursor.vschema, "commerce", CACHE)
    assert not any(isinstance(n, Compute) for n in _plan_nodes(plan)), "planned as Compute"
    got = await engine.execute(plan, fn_vcursor, bindvars)
    want = await oracle(sql)
    assert [f.name for f in got.fields] == [f.name for f in want.fields]
    for g, w in zip(got.fields, want.fields, strict=True):
        ours, theirs = field_kind(g), field_kind(w)
        assert ours == theirs or (ours[0], theirs[0]) in _SAME_FAMILY or (ours[0] == theirs[0] == "string"), \
            (g.name, ours, theirs)
    g_rows, w_rows = normalised(got), normalised(want)
    if how == "ordered":
        assert g_rows == w_rows
    else:
        assert _sortable(g_rows) == _sortable(w_rows)


async def test_a_double_out_of_range_fails_as_mariadb_does(fn_vcursor, oracle):
    """MariaDB refuses a DOUBLE result out of range (1690) rather than answer inf: so does
    the proxy's evaluator, with MySQL's error and text, never a Python exception's."""
    sql = "select customer_id, pow(10, max(id)) from fn_orders group by customer_id"
    with pytest.raises(pymysql.err.OperationalError) as theirs:
        await oracle(sql)
    plan, bindvars = plan_query(sql, fn_vcursor.vschema, "commerce", CACHE)
    assert not any(isinstance(n, Compute) for n in _plan_nodes(plan))
    with pytest.raises(ProxyError) as ours:
        await engine.execute(plan, fn_vcursor, bindvars)
    assert ours.value.code == theirs.value.args[0] == 1690
    assert ours.value.message.startswith("DOUBLE value is out of range in '")
