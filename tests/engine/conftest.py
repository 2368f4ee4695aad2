"""Engine fixtures: the example cluster's vschema plus a test table, a VCursor over it,
and an "oracle" database (one plain MariaDB database holding the same rows)."""

from __future__ import annotations

import copy

import aiomysql
import pytest_asyncio

from proxy import engine
from proxy.engine.result import Result
from rewriter import plan_query
from tests.engine.dataset import generated_rows
from tests.engine.shard_vcursor import ShardVCursor, fields_of
from tests.engine.wide_dataset import add_to_vschema, load_wide
from vschema.loader import build_vschema

ITEMS_DDL = """CREATE TABLE IF NOT EXISTS items (
  id BIGINT NOT NULL PRIMARY KEY,
  customer_id BIGINT,
  grp VARCHAR(20),
  name VARCHAR(40),
  qty INT,
  price DECIMAL(10,2),
  score DOUBLE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

ORACLE_DB = "engine_oracle"


def engine_vschema(config):
    docs = {}
    for name, kc in config.keyspaces.items():
        doc = copy.deepcopy(kc.vschema)
        if name == "commerce":
            doc["tables"]["items"] = {"column_vindexes": [{"column": "id", "name": "hash"}]}
            doc["tables"]["grp_labels"] = {"type": "reference"}
        docs[name] = (doc, list(kc.shards))
    add_to_vschema({name: doc for name, (doc, _shards) in docs.items()})
    return build_vschema(docs, config.routing_rules or None)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def vcursor(local_cluster):
    vs = engine_vschema(local_cluster.config)
    vc = ShardVCursor(vs, local_cluster.endpoints)
    for shard in vs.shards("commerce"):
        await vc.execute_shard("commerce", shard, ITEMS_DDL)
        await vc.execute_shard("commerce", shard, "DELETE FROM items")
    yield vc
    await vc.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def oracle(vcursor):
    """Run SQL in one plain database (on the lookup instance) that holds all the rows."""
    shard = vcursor.vschema.shards("lookup")[0]
    ep = vcursor._endpoints[("lookup", shard)]
    await vcursor.execute_shard("lookup", shard, f"CREATE DATABASE IF NOT EXISTS {ORACLE_DB}")
    conn = await aiomysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password,
                                  db=ORACLE_DB, autocommit=True, conv={}, use_unicode=False,
                                  charset="utf8mb4")

    async def run(sql: str) -> Result:
        async with conn.cursor() as cur:
            await cur.execute(sql)
            rows = [tuple(r) for r in await cur.fetchall()] if cur.description else []
            return Result(fields=fields_of(cur), rows=rows,
                          affected_rows=0 if cur.description else max(cur.rowcount, 0))

    await run(ITEMS_DDL)
    await run("DELETE FROM items")
    yield run
    conn.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def loaded(vcursor, oracle):
    rows = generated_rows()
    cols = "id, customer_id, grp, name, qty, price, score"
    for start in range(0, len(rows), 250):
        sql = f"insert into items ({cols}) values " + ", ".join(rows[start:start + 250])
        plan, bindvars = plan_query(sql, vcursor.vschema, "commerce")
        res = await engine.execute(plan, vcursor, bindvars)
        assert res.affected_rows == len(rows[start:start + 250])
        await oracle(sql)
    # a small unsharded table for cross-keyspace joins, in both places
    for run in (lambda q: vcursor.execute_shard("lookup", "0", q), oracle):
        await run("CREATE TABLE IF NOT EXISTS qty_labels (qty INT PRIMARY KEY, label VARCHAR(20))")
        await run("DELETE FROM qty_labels")
        await run("INSERT INTO qty_labels VALUES " + ", ".join(f"({q}, 'q{q % 4}')" for q in range(0, 25, 2)))
    # a reference table of the sharded keyspace (every shard holds all its rows); one
    # group no item has, so outer joins pad it
    grp_rows = ", ".join(f"({g!r}, 'label {k}')" for k, g in enumerate(["a", "c", "no items here"]))
    for run in [*(lambda q, s=s: vcursor.execute_shard("commerce", s, q) for s in vcursor.vschema.shards("commerce")),
                oracle]:
        await run("CREATE TABLE IF NOT EXISTS grp_labels (grp VARCHAR(20) PRIMARY KEY, label VARCHAR(20))")
        await run("DELETE FROM grp_labels")
        await run("INSERT INTO grp_labels VALUES " + grp_rows)
    return True


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def wide_loaded(loaded, vcursor, oracle):
    """``loaded`` plus the tables of tests/engine/wide_dataset.py (other vindex types,
    DATE / DATETIME / DECIMAL columns, a reference table)."""

    async def through_engine(sql: str) -> None:
        plan, bindvars = plan_query(sql, vcursor.vschema, "commerce")
        await engine.execute(plan, vcursor, bindvars)

    await load_wide(vcursor.execute_shard, vcursor.vschema.shards("commerce"), vcursor.vschema.shards("lookup")[0],
                    through_engine, oracle)
    return True
