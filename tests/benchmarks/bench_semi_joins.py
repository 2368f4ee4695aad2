"""Correlated [NOT] EXISTS / [NOT] IN across shards: the proxy's SemiJoin (the subquery
read whole, or per batch of outer keys) vs the plan without it (Compute for EXISTS, the
pulled-out IN list for IN), next to one MariaDB holding all the rows, in one run.

    python -m tests.benchmarks semi_joins    # BENCH_SEMI_ROWS=100000 BENCH_ROUNDS=5

Two tables of the example cluster's ``commerce`` keyspace (2 shards), both sharded by
``id``: ``sj_orders`` (N rows) and ``sj_customers`` (N/10 rows, 100 regions; half their ``best_order`` values name no order). The
subqueries are keyed on a column that is not the outer table's vindex, so they cannot
merge into its route. Each statement is planned with the tracked schema (the shards'
row estimates after ANALYZE TABLE) and run by the engine in this process on the proxy's
own VCursor and shard pools (``harness.session_vcursor``; no client hop), three ways:
as planned, with the other SemiJoin strategy forced (whole vs batched), and without the
SemiJoin. Reported: median wall time and CPU per query from /proc — this process plus
every mariadbd of the cluster (the shards and the direct server) — and the planned
SemiJoin's ratios to the plan without it and to direct MariaDB.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from unittest import mock

import aiomysql

from proxy import engine
from proxy.cluster import LocalCluster
from rewriter import PlanCache, plan_query
from tests.benchmarks.harness import (
    cpu_seconds,
    local_cluster,
    machine,
    session_vcursor,
    shard_pids,
)
from tests.engine.shard_vcursor import ShardVCursor
from vschema.loader import build_vschema

DDL = [
    "CREATE TABLE IF NOT EXISTS sj_orders (id BIGINT PRIMARY KEY, customer_id BIGINT, qty INT) "
    "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
    "CREATE TABLE IF NOT EXISTS sj_customers (id BIGINT PRIMARY KEY, region INT, name VARCHAR(32), "
    "best_order BIGINT) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
]
QUERIES = {
    # a region's customers (1%) against every order: per batch of outer keys
    "exists, small outer": "select c.id, c.name from sj_customers c where c.region = 7 and exists "
                           "(select 1 from sj_orders o where o.customer_id = c.id and o.qty > 8)",
    "not exists, inner vindex": "select c.id from sj_customers c where c.region = 7 and not exists "
                                "(select 1 from sj_orders o where o.id = c.best_order and o.qty > 2)",
    "not in, small outer": "select c.id from sj_customers c where c.region = 3 and c.best_order not in "
                           "(select o.id from sj_orders o where o.qty > 8)",
    # many outer rows against a small filtered subquery: read whole
    "exists, large outer": "select o.id from sj_orders o where o.qty = 1 and exists "
                           "(select 1 from sj_customers c where c.id = o.customer_id and c.region < 5)",
}


async def _load(vc: ShardVCursor, direct: aiomysql.Connection, n: int) -> None:
    customers = n // 10
    rnd = random.Random(11)  # fixed data; no arithmetic pattern ties a column to another
    rows = {
        "sj_orders": ("(id, customer_id, qty)",
                      [f"({i}, {rnd.randint(1, customers)}, {rnd.randint(0, 9)})" for i in range(1, n + 1)]),
        "sj_customers": ("(id, region, name, best_order)",
                         [f"({i}, {rnd.randint(0, 99)}, 'customer {i}', {rnd.randint(1, 2 * n)})"
                          for i in range(1, customers + 1)]),
    }
    async with direct.cursor() as cur:
        for sql in DDL:
            await cur.execute(sql)
        for table in rows:
            await cur.execute(f"DELETE FROM {table}")
    for shard in vc.vschema.shards("commerce"):
        for sql in DDL:
            await vc.execute_shard("commerce", shard, sql)
        for table in rows:
            await vc.execute_shard("commerce", shard, f"DELETE FROM {table}")
    for table, (cols, values) in rows.items():
        for start in range(0, len(values), 2000):
            sql = f"insert into {table} {cols} values " + ", ".join(values[start:start + 2000])
            plan, bv = plan_query(sql, vc.vschema, "commerce")
            await engine.execute(plan, vc, bv)
            async with direct.cursor() as cur:
                await cur.execute(sql)
    for shard in vc.vschema.shards("commerce"):
        for table in rows:
            await vc.execute_shard("commerce", shard, f"ANALYZE TABLE {table}")
    async with direct.cursor() as cur:
        for table in rows:
            await cur.execute(f"ANALYZE TABLE {table}")


def _semi_join(vc: ShardVCursor, sql: str, schema: object) -> str:
    """The planned SemiJoin's shape: ``batched`` / ``whole`` (or ``none``)."""
    node, _ = plan_query("vexplain plan " + sql, vc.vschema, "commerce", PlanCache(), schema=schema)  # type: ignore[arg-type]
    todo = [json.loads(node.json)]
    while todo:
        d = todo.pop()
        if d.get("OperatorType") == "SemiJoin":
            return "batched" if "BatchVar" in d else "whole"
        todo.extend(d.get("Inputs", []))
    return "none"


async def _measure(run: Callable[[], Awaitable[int]], rounds: int, pids: list[int]) -> tuple[float, float, int]:
    """Median wall seconds, mean CPU seconds per run (this process + ``pids``), rows."""
    rows = await run()  # warm: buffer pool, pools
    times = []
    cpu0 = cpu_seconds(os.getpid(), *pids)
    for _ in range(rounds):
        t0 = time.perf_counter()
        await run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), (cpu_seconds(os.getpid(), *pids) - cpu0) / rounds, rows


async def _run(cluster: LocalCluster, n: int, rounds: int) -> None:
    docs = {}
    for name, kc in cluster.config.keyspaces.items():
        doc = copy.deepcopy(kc.vschema)
        if name == "commerce":
            for t in ("sj_orders", "sj_customers"):
                doc["tables"][t] = {"column_vindexes": [{"column": "id", "name": "hash"}]}
        docs[name] = (doc, list(kc.shards))
    vc = ShardVCursor(build_vschema(docs, cluster.config.routing_rules or None), cluster.endpoints)
    ep = cluster.endpoints[("lookup", vc.vschema.shards("lookup")[0])]
    boot = await aiomysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password, autocommit=True)
    async with boot.cursor() as cur:
        await cur.execute("CREATE DATABASE IF NOT EXISTS semi_join_direct")
    boot.close()
    direct = await aiomysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password,
                                    db="semi_join_direct", autocommit=True)
    pids = shard_pids(cluster)
    proxy_vc = session_vcursor(cluster, vc.vschema)
    try:
        await _load(vc, direct, n)
        schema = await vc.tracked_schema(("commerce",))
        print(f"{'query':<26} {'planned':<8} {'rows':>6} {'direct':>15} {'SemiJoin':>15} {'other way':>15} "
              f"{'without':>15}   wall ms / CPU ms per query; ratios (wall, CPU)")
        for name, sql in QUERIES.items():

            async def direct_run(sql: str = sql) -> int:
                async with direct.cursor() as cur:
                    await cur.execute(sql)
                    return len(await cur.fetchall())

            async def engine_run(sql: str = sql) -> int:
                plan, bv = plan_query(sql, vc.vschema, "commerce", PlanCache(), schema=schema)
                return len((await engine.execute(plan, proxy_vc, bv)).rows)

            planned = _semi_join(vc, sql, schema)
            d = await _measure(direct_run, rounds, pids)
            s = await _measure(engine_run, rounds, pids)
            # the other strategy, and the plan without a SemiJoin (Compute / the pulled-out IN list)
            with mock.patch("rewriter.semijoin_planner._batched", return_value=planned != "batched"):
                o = await _measure(engine_run, rounds, pids)
            with mock.patch("rewriter.to_primitives.plan_semi_join", return_value=None):
                w = await _measure(engine_run, rounds, pids)
            assert d[2] == s[2] == o[2] == w[2], (name, d[2], s[2], o[2], w[2])
            print(f"{name:<26} {planned:<8} {s[2]:>6} "
                  + " ".join(f"{m[0] * 1e3:>7.1f} / {m[1] * 1e3:>5.0f}" for m in (d, s, o, w))
                  + f"   vs without {s[0] / w[0]:.2f}x, {s[1] / max(w[1], 1e-3):.2f}x;"
                  f" vs direct {s[0] / d[0]:.1f}x, {s[1] / max(d[1], 1e-3):.1f}x", flush=True)
    finally:
        direct.close()
        await proxy_vc.pools.close()
        await vc.close()


def main() -> None:
    n = int(os.environ.get("BENCH_SEMI_ROWS", "100000"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "5"))
    print(f"machine: {machine()}")
    print(f"sj_orders {n:,} rows, sj_customers {n // 10:,} rows, 2 shards; median wall / mean CPU (this process "
          f"+ every mariadbd) of {rounds} rounds")
    with local_cluster() as cluster:
        asyncio.run(_run(cluster, n, rounds))


if __name__ == "__main__":
    main()
