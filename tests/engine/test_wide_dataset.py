"""The wide data set (tests/engine/wide_dataset.py) lands where its vindexes say."""

from __future__ import annotations

import pytest_asyncio

from proxy import engine
from rewriter import PlanCache, plan_query
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
