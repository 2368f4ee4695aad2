"""The oracle over the wide data set (tests/engine/wide_dataset.py: a VARCHAR key on
unicode_loose_md5, xxhash on a non-unique column with a consistent_lookup, a reference
table, DATE / DATETIME / DECIMAL columns): the rows land where their vindexes say, and
the differences the random differential tester found, each kept as the behaviour it
broke."""

from __future__ import annotations

import pymysql  # noqa: F401 - named in a warnings filter
import pytest
import pytest_asyncio

from proxy import engine
from rewriter import PlanCache, plan_query
from tests.engine.test_differential import compare
from tests.engine.wide_dataset import N_ACCOUNTS, N_ENTRIES

CACHE = PlanCache()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def schema(wide_loaded, vcursor):
    return await vcursor.tracked_schema()


async def _rows(vcursor, schema, sql):
    plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", CACHE, schema=schema)
    return (await engine.execute(plan, vcursor, bindvars)).rows


async def test_wide_tables_hold_every_row_once(vcursor, schema, oracle):
    for table, n in (("accounts", N_ACCOUNTS), ("entries", N_ENTRIES)):
        got = await _rows(vcursor, schema, f"select count(*) from {table}")
        assert int(got[0][0]) == n
        assert int((await oracle(f"select count(*) from {table}")).rows[0][0]) == n


async def test_a_routed_varchar_key_finds_its_row_under_the_columns_collation(vcursor, schema):
    # stored as 'Ácc4': unicode_loose_md5 maps both spellings to one shard, as general_ci compares them
    got = await _rows(vcursor, schema, "select code from accounts where code = 'acc4'")
    assert [r[0] for r in got] == ["Ácc4".encode()]


async def test_the_lookup_vindex_finds_entries_by_code_in_any_case(vcursor, schema, oracle):
    sql = "select id from entries where account_code = 'ACC10' order by id"
    assert await _rows(vcursor, schema, sql) == (await oracle(sql)).rows


# name -> (statement, compared in order)
QUERIES = {
    # a lookup finding no row sends the statement to no shard: the columns still come from
    # the field query, which must carry the ORDER BY's hidden column the rows would have
    "no_shard_route_ordered_by_an_unselected_column_keeps_every_column": (
        "select id as e0, amount as e1 from entries w where account_code = 'nope' order by w.kind, w.id", True),
    "no_shard_route_with_limit_offset_keeps_every_column": (
        "select case when customer_id < 0 then 'neg' else 'pos' end as e0, amount from entries "
        "where account_code = 'nope' order by e0, id limit 24 offset 18", True),
}


@pytest.mark.filterwarnings("ignore::pymysql.err.Warning")
@pytest.mark.parametrize("name", sorted(QUERIES))
async def test_wide_result_equals_oracle(name, vcursor, schema, oracle):
    sql, ordered = QUERIES[name]
    plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", CACHE, schema=schema)
    ours = await engine.execute(plan, vcursor, bindvars)
    diff = compare(ours, await oracle(sql), ordered)
    assert diff is None, diff


@pytest.mark.parametrize(("sql", "name"), [
    ("select customer_id from items i join accounts a on a.customer_id = i.customer_id", "customer_id"),
    ("select a.id from items a join items b on b.id = a.customer_id where qty < 3", "qty"),
    ("select x from (select customer_id as x from items) d join (select code as x from accounts) e on 1 = 1", "x"),
])
async def test_an_unqualified_column_of_several_joined_tables_is_ambiguous_1052(sql, name, vcursor, schema, oracle):
    with pytest.raises(Exception) as ours:
        plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", CACHE, schema=schema)
        await engine.execute(plan, vcursor, bindvars)
    with pytest.raises(pymysql.err.MySQLError) as theirs:
        await oracle(sql)
    assert ours.value.code == theirs.value.args[0] == 1052
    assert str(ours.value) == f"Column '{name}' in field list is ambiguous"


async def test_strings_through_a_compute_temporary_table_keep_their_varchar_type(vcursor, schema, oracle):
    # CTEs over a sharded and an unsharded table run in Compute: its temporary table held
    # strings as LONGTEXT, announced to clients as BLOB (252) instead of VAR_STRING (253)
    sql = ("with a as (select id, qty, grp from items where id <= 22), b as (select qty, max(grp) as g, count(*) as n "
           "from a group by qty) select b.qty, b.g, b.n, l.label from b left join lookup.qty_labels l on l.qty = b.qty")
    plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", CACHE, schema=schema)
    ours = await engine.execute(plan, vcursor, bindvars)
    theirs = await oracle(sql.replace("lookup.", ""))
    assert [f.type for f in ours.fields] == [f.type for f in theirs.fields]
    assert compare(ours, theirs, False) is None


@pytest.mark.parametrize("sql", [
    "select qty from items where id < 5 union all select customer_id from items where id > 2995",
    "select qty from items where id < 5 union select price from items where id > 2995",
    "select price from items where id < 5 union all select score from items where id > 2995",
    "select qty from items where id < 5 union all select grp from items where id > 2995",
    "select opened from accounts where code = 'acc5' union all select last_seen from accounts where code = 'acc6'",
    "select null union all select amount from entries where customer_id = 3",
])
async def test_a_union_across_routes_types_each_column_from_every_arm(sql, vcursor, schema, oracle):
    # MySQL joins the arms' types (INT with BIGINT is BIGINT, with DECIMAL a DECIMAL, with a
    # string a VARCHAR); the first arm's type made clients convert '1.50' as an INT
    plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", CACHE, schema=schema)
    ours = await engine.execute(plan, vcursor, bindvars)
    theirs = await oracle(sql)
    assert [f.type for f in ours.fields] == [f.type for f in theirs.fields]
    assert compare(ours, theirs, False) is None


async def test_an_unaliased_expression_with_literals_is_named_by_its_literals_from_a_cached_plan(vcursor, schema,
                                                                                               oracle):
    # scatter + ORDER BY: the shard query names each column with an alias; from the
    # normalised statement that alias said 'concat(code, :vtg1, region)'
    for sep, bound in (("/", 0), ("-", 5)):
        sql = (f"select concat(code, '{sep}', region), if(rate > {bound}, 'up', 'down'), qty in (1, 2) "
               f"from accounts a join items i on i.id = a.customer_id where a.customer_id < 5 order by code")
        plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", CACHE, schema=schema)
        ours = await engine.execute(plan, vcursor, bindvars)
        diff = compare(ours, await oracle(sql), True)
        assert diff is None, diff
        sql = f"select concat(code, '{sep}', region), rate > {bound} from accounts where customer_id < 5 order by code"
        plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", CACHE, schema=schema)
        ours = await engine.execute(plan, vcursor, bindvars)
        assert [f.name for f in ours.fields] == [f.name for f in (await oracle(sql)).fields]


@pytest.mark.parametrize(("sql", "code"), [
    ("select id from items union select id, qty from items", 1222),
    ("select id, qty from items where id = 3 union all (select id from items where id = 4)", 1222),
    ("select * from items where id = 3 union all select id from items where id = 4", 1222),
    ("select id from items where id = 3 union all select * from items where id = 4", 1222),
    ("select id from items order by 9", 1054),
    ("select i.id from items i join items j on j.id = i.customer_id order by 3", 1054),
    ("select id, count(*) from items group by 5", 1054),
    ("select sum(qty) from items group by sum(qty)", 1056),  # MariaDB: 1111
])
async def test_statements_mysql_rejects_answer_mysqls_error_number(sql, code, vcursor, schema):
    # were answered with rows of different widths (a UNION's arms planned apart) or 1105
    with pytest.raises(Exception) as ours:
        plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", CACHE, schema=schema)
        await engine.execute(plan, vcursor, bindvars)
    assert ours.value.code == code, ours.value
