"""UPDATE/DELETE whose rows depend on other shards' tables (subqueries, joins,
multi-table forms) change exactly the rows one MariaDB changes: DMLWithInput."""

from __future__ import annotations

import copy

import pytest
import pytest_asyncio

from proxy import engine
from rewriter import PlanCache, plan_query
from tests.engine.shard_vcursor import ShardVCursor
from vschema.loader import build_vschema

LEDGER_DDL = """CREATE TABLE IF NOT EXISTS ledger (
  id BIGINT NOT NULL PRIMARY KEY, acct BIGINT, amount DECIMAL(10,2), tag VARCHAR(10)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""
CACHE = PlanCache()


@pytest_asyncio.fixture(loop_scope="session")
async def ledger(local_cluster, loaded, vcursor, oracle):
    docs = {}
    for name, kc in local_cluster.config.keyspaces.items():
        doc = copy.deepcopy(kc.vschema)
        if name == "commerce":
            doc["tables"]["items"] = {"column_vindexes": [{"column": "id", "name": "hash"}]}
            doc["tables"]["ledger"] = {"column_vindexes": [{"column": "id", "name": "hash"}]}
        docs[name] = (doc, list(kc.shards))
    vc = ShardVCursor(build_vschema(docs, local_cluster.config.routing_rules or None), local_cluster.endpoints)
    rows = ", ".join(f"({i}, {i * 7 % 300}, {i % 50}.25, 't{i % 3}')" for i in range(1, 401))
    for shard in vc.vschema.shards("commerce"):
        await vc.execute_shard("commerce", shard, LEDGER_DDL)
        await vc.execute_shard("commerce", shard, "DELETE FROM ledger")
    await oracle(LEDGER_DDL)
    await oracle("DELETE FROM ledger")
    await oracle(f"INSERT INTO ledger VALUES {rows}")
    schema = await vc.tracked_schema()

    async def run(sql):
        plan, bv = plan_query(sql, vc.vschema, "commerce", CACHE, schema=schema)
        return plan, await engine.execute(plan, vc, bv)

    await run(f"INSERT INTO ledger (id, acct, amount, tag) VALUES {rows}")
    yield run
    await vc.close()


STATEMENTS = [
    "update ledger set tag = 'hit' where acct in (select customer_id from items where qty = 3)",
    "delete from ledger where id in (select id from items where qty > 23)",
    "update ledger l join items i on i.id = l.acct set l.amount = i.price where i.qty < 5",
    "update ledger l join items i on i.id = l.acct set l.tag = 'j', l.amount = l.amount * 2 where i.qty = 9",
    "delete l from ledger l join items i on i.id = l.acct where i.grp = 'alpha'",
    "delete from ledger where acct in (select id from items where qty = 1) order by id limit 3",
    "update ledger set amount = amount + 1 where exists (select 1 from items i where i.id = ledger.acct and i.qty = 7)",
    "delete from ledger where not exists (select 1 from items i where i.id = ledger.acct)",
]


@pytest.mark.parametrize("step", range(len(STATEMENTS)))
async def test_dml_depending_on_other_shards_changes_what_mariadb_changes(step, ledger, oracle):
    sql = STATEMENTS[step]  # each on a freshly loaded table
    plan, got = await ledger(sql)
    want = await oracle(sql)
    assert type(plan).__name__ == "DMLWithInput"
    assert got.affected_rows == want.affected_rows
    _p, mine = await ledger("select id, acct, amount, tag from ledger order by id")
    theirs = await oracle("select id, acct, amount, tag from ledger order by id")
    assert mine.rows == theirs.rows


async def test_writes_to_a_reference_table_reach_every_shards_copy(local_cluster, loaded):
    docs = {}
    for name, kc in local_cluster.config.keyspaces.items():
        doc = copy.deepcopy(kc.vschema)
        if name == "commerce":
            doc["tables"]["colors"] = {"type": "reference"}
        docs[name] = (doc, list(kc.shards))
    vc = ShardVCursor(build_vschema(docs, local_cluster.config.routing_rules or None), local_cluster.endpoints)
    try:
        for shard in vc.vschema.shards("commerce"):
            await vc.execute_shard("commerce", shard, "CREATE TABLE IF NOT EXISTS colors "
                                                      "(id INT PRIMARY KEY, name VARCHAR(10))")
            await vc.execute_shard("commerce", shard, "DELETE FROM colors")

        async def run(sql):
            plan, bv = plan_query(sql, vc.vschema, "commerce", PlanCache())
            return plan, await engine.execute(plan, vc, bv)

        plan, res = await run("insert into colors (id, name) values (1, 'red'), (2, 'blue'), (3, 'green')")
        assert type(plan).__name__ == "ReferenceWrite" and res.affected_rows == 3
        _p, res = await run("update colors set name = upper(name) where id < 3")
        assert res.affected_rows == 2
        _p, res = await run("delete from colors where id = 3")
        assert res.affected_rows == 1
        for shard in vc.vschema.shards("commerce"):
            copy_rows = await vc.execute_shard("commerce", shard, "select id, name from colors order by id")
            assert copy_rows.rows == [(b"1", b"RED"), (b"2", b"BLUE")]
    finally:
        await vc.close()
