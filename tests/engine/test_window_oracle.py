"""Window functions computed at the proxy (``Window`` over a scatter route), against
the oracle: one MariaDB database holding the same rows (NULLs, ties, case and accent
variants that the collation makes peers). Same comparison rules as test_oracle."""

from __future__ import annotations

import pytest
from mysql_mimic.types import ColumnType

from proxy.engine.result import Result
from proxy.errors import ProxyError
from rewriter import nodes as P
from rewriter.vexplain import describe
from tests.engine.test_compute_oracle import run_sharded, schema  # noqa: F401  (fixture)
from tests.engine.test_oracle import _sortable, normalised

QUERIES = {
    "row_number_partitioned_by_collation": (
        "select id, grp, row_number() over (partition by grp order by id) rn from items", "unordered"),
    "row_number_no_partition_desc": (
        "select id, row_number() over (order by qty desc, id) from items", "unordered"),
    "rank_and_dense_rank_ties_nulls": (
        "select id, qty, rank() over (order by qty) r, dense_rank() over (order by qty) dr from items", "unordered"),
    "rank_partitioned_ties": (
        "select id, rank() over (partition by customer_id order by qty desc) from items", "unordered"),
    "ntile_uneven_buckets": (
        "select id, ntile(7) over (partition by qty order by id) from items", "unordered"),
    "lag_lead_offsets": (
        "select id, lag(price) over (order by id) l1, lag(price, 3) over (order by id) l3, "
        "lead(name, 2) over (partition by grp order by id) ld, lead(qty, 0) over (order by id) l0 from items",
        "unordered"),
    "first_last_value_default_frame_peers": (
        "select id, first_value(id) over (partition by qty order by price, id) f, "
        "last_value(qty) over (order by qty) l, max(id) over (order by qty) m from items", "unordered"),
    "aggregates_whole_partition": (
        "select id, sum(price) over (partition by qty) s, count(*) over (partition by qty) c, "
        "count(price) over (partition by qty) cp, avg(price) over (partition by qty) a, "
        "min(name) over (partition by qty) mn, max(score) over (partition by qty) mx from items", "unordered"),
    "running_sum_range_peers": (
        "select id, sum(qty) over (order by qty) s, avg(qty) over (order by qty) a from items", "unordered"),
    "rows_frame_sliding": (
        "select id, sum(price) over (partition by grp order by id rows between 2 preceding and 1 following) s, "
        "min(price) over (order by id rows between 3 preceding and current row) mn, "
        "avg(score) over (order by id rows between current row and unbounded following) a, "
        "last_value(name) over (order by id rows between 1 following and 2 following) lv from items", "unordered"),
    # DOUBLE frames summed row by row as MySQL (windowing_use_high_precision); MariaDB
    # adds and removes rows as the frame slides, so values that cancel to 0 differ in
    # their last bits: the arguments are kept positive
    "double_and_collated_extremes_sliding": (
        "select id, avg(abs(score) / 3) over (partition by qty order by id rows between 2 preceding and 2 following) a, "
        "sum(abs(score) / 7) over (order by id rows between 4 preceding and 1 preceding) s, "
        "max(grp) over (order by id rows between 3 preceding and 3 following) mx from items", "unordered"),
    "range_unbounded_both": (
        "select id, count(qty) over (order by qty range between unbounded preceding and unbounded following) c, "
        "first_value(price) over (order by qty, id range between current row and unbounded following) f "
        "from items", "unordered"),
    "windows_inside_expressions": (
        "select id, row_number() over (order by id) + 1 r1, "
        "sum(price) over (partition by qty) / count(*) over (partition by qty) share, "
        "qty * 2 - rank() over (order by qty) d from items order by d desc, id limit 50", "ordered"),
    "where_order_limit_over_window": (
        "select id, qty, row_number() over (order by qty, id) rn from items where price > 50 "
        "order by rn desc limit 10", "ordered"),
    "order_by_window_alias_and_hidden": (
        "select id, dense_rank() over (partition by grp order by qty) d from items order by d, price, id limit 40",
        "ordered"),
    "string_desc_nulls_last_and_collation_peers": (
        "select id, row_number() over (order by name desc, id) rn, "
        "rank() over (partition by grp order by name desc) r from items", "unordered"),
    # the shards sort by the second window's keys, which the first's are a prefix of:
    # both read the merged order without a sort at the proxy
    "later_window_extends_the_first_order": (
        "select id, rank() over (order by grp) r, "
        "sum(qty) over (partition by grp order by qty desc, id rows between 1 preceding and current row) s, "
        "row_number() over (partition by grp order by qty desc, id) rn from items", "unordered"),
    # DECIMAL and integer SUM/AVG added as scaled integers: negative values, AVG's 4
    # extra digits rounded half away from zero (frames of 32 rows make exact ties)
    "decimal_sums_negative_and_rounding_ties": (
        "select id, sum(price - 60) over (partition by grp order by id rows between 2 preceding and current row) s, "
        "avg(0 - qty) over (order by id rows between 15 preceding and 16 following) a32, "
        "avg(price - 55.5) over (order by id rows between 15 preceding and 16 following) ap, "
        "sum(qty) over (order by qty desc) sq from items", "unordered"),
    "percent_rank_cume_dist_ties_nulls": (
        "select id, percent_rank() over (order by qty) pr, cume_dist() over (order by qty) cd, "
        "percent_rank() over (partition by grp order by name desc) pg, "
        "cume_dist() over (partition by customer_id order by price) cg from items", "unordered"),
    "nth_value_frames": (
        "select id, nth_value(name, 2) over (partition by grp order by id) n2, "
        "nth_value(price, 3) over (order by qty, id rows between 1 preceding and 2 following) n3, "
        "nth_value(id, 4) over (partition by qty order by id range between unbounded preceding and "
        "unbounded following) n4 from items", "unordered"),
    "named_windows_built_on_each_other": (
        "select id, rank() over w r, sum(qty) over (w rows between 1 preceding and current row) s, "
        "row_number() over w2 rn, count(*) over (p order by id) c from items "
        "window p as (partition by grp), w as (p order by qty, id), w2 as (w)", "unordered"),
    # RANGE n PRECEDING / FOLLOWING over one numeric key: ties, NULL keys (their own
    # peers), DESC (preceding = larger values), DECIMAL and fractional offsets
    "range_numeric_offsets": (
        "select id, sum(price) over (order by qty range between 2 preceding and 1 following) s, "
        "count(*) over (partition by grp order by qty desc range between 1 preceding and current row) c, "
        "min(id) over (order by price range between 10.5 preceding and 5 following) mn, "
        "avg(qty) over (order by score desc range between current row and 100 following) a, "
        "max(name) over (order by customer_id range between 3 following and 7 following) mx from items",
        "unordered"),
}


def _types(res: Result) -> list[tuple[int, int | None]]:
    """Column types, with the scale of DECIMAL columns (strings' decimals differ
    between MariaDB's temporary tables and the columns they came from)."""
    return [(f.type, f.decimals if f.type == ColumnType.NEWDECIMAL else None) for f in res.fields]


def _operators(plan: P.Plan) -> list[str]:
    out = []
    stack = [describe(plan)]
    while stack:
        d = stack.pop()
        out.append(d["OperatorType"])
        stack.extend(d.get("Inputs", []))
    return out


@pytest.mark.parametrize("name", sorted(QUERIES))
async def test_window_at_proxy_equals_oracle(name, schema, vcursor, oracle):  # noqa: F811
    sql, how = QUERIES[name]
    plan, got = await run_sharded(vcursor, schema, sql)
    assert "Window" in _operators(plan) and "Compute" not in _operators(plan)
    want = await oracle(sql)
    assert [f.name for f in got.fields] == [f.name for f in want.fields]
    assert _types(got) == _types(want)
    g, w = normalised(got), normalised(want)
    assert len(g) == len(w)
    if how == "ordered":
        assert g == w
    else:
        assert _sortable(g) == _sortable(w)


@pytest.mark.parametrize("sql", [
    "select distinct qty, rank() over (order by qty) from items",  # DISTINCT over windows
    "select id, row_number() over (order by id) + (select 1) from items",  # a subquery beside a window
])
async def test_window_without_proxy_primitive_goes_to_compute(sql, schema, vcursor, oracle):  # noqa: F811
    plan, got = await run_sharded(vcursor, schema, sql)
    assert "Window" not in _operators(plan)
    want = await oracle(sql)
    assert _sortable(normalised(got)) == _sortable(normalised(want))


async def test_lag_lead_default_fills_past_the_partition(schema, vcursor, oracle):  # noqa: F811
    """MySQL's LAG/LEAD take a default; MariaDB's do not, so the oracle spells it out."""
    sql = ("select id, lag(price, 3, 0) over (order by id) l3, "
           "lead(name, 2, 'none') over (partition by grp order by id) ld from items")
    plan, got = await run_sharded(vcursor, schema, sql)
    assert "Window" in _operators(plan)
    want = await oracle(
        "select id, case when row_number() over (order by id) > 3 then lag(price, 3) over (order by id) "
        "else 0 end, case when row_number() over (partition by grp order by id desc) > 2 "
        "then lead(name, 2) over (partition by grp order by id) else 'none' end from items")
    assert [f.name for f in got.fields] == ["id", "l3", "ld"]
    first = sorted((int(r[0]), r[1]) for r in got.rows)[:3]
    assert first == [(1, b"0.00"), (2, b"0.00"), (3, b"0.00")]  # the default at price's scale, as MySQL prints it
    assert _sortable(normalised(got)) == _sortable(normalised(want))


async def test_ntile_of_zero_buckets_is_refused_as_mysql_does(schema, vcursor):  # noqa: F811
    with pytest.raises(ProxyError) as e:
        await run_sharded(vcursor, schema, "select id, ntile(0) over (order by id) from items")
    assert (e.value.code, e.value.message) == (1210, "Incorrect arguments to ntile")


async def test_order_by_the_window_order_needs_no_sort_at_the_proxy(schema, vcursor, oracle):  # noqa: F811
    """ORDER BY keys that are the window's PARTITION BY / ORDER BY keys: the route's merge
    already gives that order, Window keeps it, and the LIMIT takes the first rows."""
    sql = ("select id, grp, row_number() over (partition by grp order by price desc, id) rn from items "
           "order by grp, price desc, id limit 25")
    plan, got = await run_sharded(vcursor, schema, sql)
    assert "Window" in _operators(plan) and "Sort" not in _operators(plan)
    want = await oracle(sql)
    assert normalised(got) == normalised(want)


async def test_range_offset_over_a_text_key_is_refused_naming_it(schema, vcursor):  # noqa: F811
    """MySQL answers an error for RANGE n PRECEDING over a string; the proxy refuses it
    with 1235 rather than compare strings by distance."""
    with pytest.raises(ProxyError) as e:
        await run_sharded(vcursor, schema, "select id, count(*) over (order by name range between 1 preceding "
                                           "and current row) from items")
    assert e.value.code == 1235 and "RANGE frame with an offset" in e.value.message
