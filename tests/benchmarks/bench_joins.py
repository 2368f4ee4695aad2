"""Cross-shard equi-joins at the proxy: per-row nested loop vs batched lookups vs hash
join, next to one MariaDB holding all the rows, in one run.

    python -m tests.benchmarks joins      # BENCH_JOIN_ROWS=20000 BENCH_ROUNDS=3

Two tables of the example cluster's `commerce` keyspace (2 shards): `orders` (N rows,
sharded by `id`) and `buyers` (N/4 rows, sharded by `id`); orders join buyers on
`buyers.id = orders.buyer_id` (the right side's vindex: batches route by it) and on
`buyers.region = orders.region` (not a vindex column: every batch is a scatter). Each
query is planned three ways through the planner and run by the engine in this process
over the shards (the proxy's own primitives; the client protocol hop is left out so the
figures are the join's): no tracked schema (Vitess's per-row nested loop), tracked
schema with the shards' estimates (the planner's choice), and row cost forced to zero
(hash join). The direct figure runs the same SQL on one MariaDB server holding both
tables. Also prints the constants the cost model uses, measured: time per shard query
and per row through the engine.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import statistics
import time

import aiomysql

from proxy import engine
from proxy.cluster import LocalCluster
from rewriter import PlanCache, join_strategy, plan_query
from tests.benchmarks.harness import local_cluster, machine
from tests.engine.shard_vcursor import ShardVCursor
from vschema.loader import build_vschema

DDL = [
    "CREATE TABLE IF NOT EXISTS orders (id BIGINT PRIMARY KEY, buyer_id BIGINT, region VARCHAR(16), "
    "amount DECIMAL(10,2)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
    "CREATE TABLE IF NOT EXISTS buyers (id BIGINT PRIMARY KEY, name VARCHAR(32), region VARCHAR(16)) "
    "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
]
QUERIES = {
    "by vindex, every row": "select o.id, b.name from orders o join buyers b on b.id = o.buyer_id",
    "by vindex, 1% of rows": "select o.id, b.name from orders o join buyers b on b.id = o.buyer_id "
                             "where o.amount < 10",
    "by non-vindex text": "select o.id, b.id from regions_small o join buyers b on b.region = o.region",
}


async def _load(vc: ShardVCursor, direct: aiomysql.Connection, n: int) -> None:
    orders = [f"({i}, {i * 7 % (n // 4) + 1}, 'r{i % 50}', {i % 1000}.25)" for i in range(1, n + 1)]
    buyers = [f"({i}, 'buyer {i}', 'R{i % 50}')" for i in range(1, n // 4 + 1)]
    regions = [f"({i}, 0, 'r{i}', 0)" for i in range(40)]
    async with direct.cursor() as cur:
        for sql in DDL + [d.replace("orders", "regions_small") for d in DDL[:1]]:
            await cur.execute(sql)
    for shard in vc.vschema.shards("commerce"):
        for sql in DDL + [d.replace("orders", "regions_small") for d in DDL[:1]]:
            await vc.execute_shard("commerce", shard, sql)
    columns = {"orders": "(id, buyer_id, region, amount)", "buyers": "(id, name, region)"}
    for table, rows in (("orders", orders), ("buyers", buyers), ("regions_small", regions)):
        for start in range(0, len(rows), 2000):
            cols = columns.get(table, columns["orders"])
            sql = f"insert into {table} {cols} values " + ", ".join(rows[start:start + 2000])
            plan, bv = plan_query(sql, vc.vschema, "commerce")
            await engine.execute(plan, vc, bv)
            async with direct.cursor() as cur:
                await cur.execute(sql)
    for shard in vc.vschema.shards("commerce"):
        for t in ("orders", "buyers", "regions_small"):
            await vc.execute_shard("commerce", shard, f"ANALYZE TABLE {t}")


def _variant(vc: ShardVCursor, sql: str, schema: object) -> str:
    node, _ = plan_query("vexplain plan " + sql, vc.vschema, "commerce", PlanCache(), schema=schema)  # type: ignore[arg-type]
    d = json.loads(node.json)
    while d.get("OperatorType") != "Join" and d.get("Inputs"):
        d = d["Inputs"][0]
    return d.get("Variant", d.get("OperatorType", "?"))


async def _time_engine(vc: ShardVCursor, sql: str, schema: object, rounds: int) -> tuple[float, int]:
    times = []
    rows = 0
    for _ in range(rounds):
        plan, bv = plan_query(sql, vc.vschema, "commerce", PlanCache(), schema=schema)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        res = await engine.execute(plan, vc, bv)
        times.append(time.perf_counter() - t0)
        rows = len(res.rows)
    return statistics.median(times), rows


async def _time_direct(direct: aiomysql.Connection, sql: str, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        async with direct.cursor() as cur:
            await cur.execute(sql)
            await cur.fetchall()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def _constants(vc: ShardVCursor) -> None:
    shard = vc.vschema.shards("commerce")[0]
    t0 = time.perf_counter()
    for i in range(300):
        await vc.execute_shard("commerce", shard, f"select name from buyers where id = {i}")
    per_query = (time.perf_counter() - t0) / 300
    t0 = time.perf_counter()
    res = await vc.execute_shard("commerce", shard, "select id, name from buyers")
    per_row = (time.perf_counter() - t0) / max(1, len(res.rows))
    print(f"measured: {per_query * 1e6:.0f} µs per shard query, {per_row * 1e6:.1f} µs per row fetched "
          f"(cost model: {join_strategy.QUERY_COST:.0f} µs, {join_strategy.ROW_COST:.0f} µs incl. matching)")


async def _run(cluster: LocalCluster, n: int, rounds: int) -> None:
    docs = {}
    for name, kc in cluster.config.keyspaces.items():
        doc = copy.deepcopy(kc.vschema)
        if name == "commerce":
            for t in ("orders", "buyers", "regions_small"):
                doc["tables"][t] = {"column_vindexes": [{"column": "id", "name": "hash"}]}
        docs[name] = (doc, list(kc.shards))
    vc = ShardVCursor(build_vschema(docs, cluster.config.routing_rules or None), cluster.endpoints)
    ep = cluster.endpoints[("lookup", vc.vschema.shards("lookup")[0])]
    boot = await aiomysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password, autocommit=True)
    async with boot.cursor() as cur:
        await cur.execute("CREATE DATABASE IF NOT EXISTS join_direct")
    boot.close()
    direct = await aiomysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password,
                                    db="join_direct", autocommit=True)
    try:
        await _load(vc, direct, n)
        schema = await vc.tracked_schema(("commerce",))
        await _constants(vc)
        print(f"{'query':<24} {'plan':<18} {'rows':>7} {'direct':>9} {'per-row':>9} {'batched/chosen':>15} "
              f"{'hash':>9}  ratios to direct")
        for name, sql in QUERIES.items():
            d = await _time_direct(direct, sql, rounds)
            chosen = _variant(vc, sql, schema)
            nl, rows = await _time_engine(vc, sql, None, 1 if n > 5000 else rounds)
            ch, _ = await _time_engine(vc, sql, schema, rounds)
            saved = join_strategy.ROW_COST
            join_strategy.ROW_COST = 0.0
            try:
                hj, _ = await _time_engine(vc, sql, schema, rounds)
            finally:
                join_strategy.ROW_COST = saved
            print(f"{name:<24} {chosen:<18} {rows:>7} {d * 1e3:>7.1f}ms {nl * 1e3:>7.0f}ms {ch * 1e3:>13.1f}ms "
                  f"{hj * 1e3:>7.1f}ms  per-row {nl / d:.1f}x, chosen {ch / d:.1f}x, hash {hj / d:.1f}x",
                  flush=True)
    finally:
        direct.close()
        await vc.close()


def main() -> None:
    n = int(os.environ.get("BENCH_JOIN_ROWS", "20000"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    print(f"machine: {machine()}")
    print(f"orders {n:,} rows, buyers {n // 4:,} rows, 2 shards; median of {rounds} rounds")
    with local_cluster() as cluster:
        asyncio.run(_run(cluster, n, rounds))


if __name__ == "__main__":
    main()
