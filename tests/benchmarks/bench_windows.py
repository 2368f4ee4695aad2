"""Cross-shard window functions: computed at the proxy (``Window`` over the merged,
sorted scatter) vs ``Compute`` (rows copied into a temporary table on one shard, which
runs the statement), next to one MariaDB holding all the rows, in one run.

    python -m tests.benchmarks windows    # BENCH_WINDOW_ROWS=20000 BENCH_ROUNDS=5

One table of the example cluster's ``commerce`` keyspace (2 shards), sharded by ``id``;
the windows partition by a non-vindex column, so the shards cannot compute them. Each
query runs through the engine in this process (no client hop) on the proxy's own
VCursor and shard pools (``harness.session_vcursor``). Reported: median wall
time, and CPU per query from /proc — this process (the proxy's primitives) plus every
mariadbd of the cluster (the shards, and the direct server) — which a shared machine
distorts less than wall time.
"""

from __future__ import annotations

import asyncio
import copy
import os
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

DDL = ("CREATE TABLE IF NOT EXISTS wrows (id BIGINT PRIMARY KEY, grp INT, name VARCHAR(16), v DECIMAL(10,2)) "
       "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci")
QUERIES = {
    "row_number by grp": "select id, row_number() over (partition by grp order by id) from wrows",
    "rank + running sum": "select id, rank() over (order by grp), sum(v) over (partition by grp order by id "
                          "rows between 2 preceding and current row) from wrows",
    "lag, top 10": "select id, lag(v) over (partition by name order by id) l from wrows order by l desc, id limit 10",
}


async def _load(vc: ShardVCursor, direct: aiomysql.Connection, n: int) -> None:
    rows = [f"({i}, {i * 7919 % 97}, 'n{i % 300}', {i * 31 % 10000}.5)" for i in range(1, n + 1)]
    async with direct.cursor() as cur:
        await cur.execute(DDL)
        await cur.execute("DELETE FROM wrows")
    for shard in vc.vschema.shards("commerce"):
        await vc.execute_shard("commerce", shard, DDL)
        await vc.execute_shard("commerce", shard, "DELETE FROM wrows")
    for start in range(0, n, 2000):
        sql = "insert into wrows (id, grp, name, v) values " + ", ".join(rows[start:start + 2000])
        plan, bv = plan_query(sql, vc.vschema, "commerce")
        await engine.execute(plan, vc, bv)
        async with direct.cursor() as cur:
            await cur.execute(sql)


async def _measure(run: Callable[[], Awaitable[object]], rounds: int, pids: list[int]) -> tuple[float, float]:
    """Median wall seconds and mean CPU seconds per run (this process + ``pids``)."""
    await run()  # warm: plan cache, buffer pool
    times = []
    cpu0 = cpu_seconds(os.getpid(), *pids)
    for _ in range(rounds):
        t0 = time.perf_counter()
        await run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), (cpu_seconds(os.getpid(), *pids) - cpu0) / rounds


async def _run(cluster: LocalCluster, n: int, rounds: int) -> None:
    docs = {}
    for name, kc in cluster.config.keyspaces.items():
        doc = copy.deepcopy(kc.vschema)
        if name == "commerce":
            doc["tables"]["wrows"] = {"column_vindexes": [{"column": "id", "name": "hash"}]}
        docs[name] = (doc, list(kc.shards))
    vc = ShardVCursor(build_vschema(docs, cluster.config.routing_rules or None), cluster.endpoints)
    ep = cluster.endpoints[("lookup", vc.vschema.shards("lookup")[0])]
    boot = await aiomysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password, autocommit=True)
    async with boot.cursor() as cur:
        await cur.execute("CREATE DATABASE IF NOT EXISTS window_direct")
    boot.close()
    direct = await aiomysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password,
                                    db="window_direct", autocommit=True)
    pids = shard_pids(cluster)
    proxy_vc = session_vcursor(cluster, vc.vschema)
    try:
        await _load(vc, direct, n)
        print(f"{'query':<20} {'direct':>16} {'Window (proxy)':>18} {'Compute':>18}   wall ms / CPU ms per query")
        for name, sql in QUERIES.items():

            async def direct_run(sql: str = sql) -> None:
                async with direct.cursor() as cur:
                    await cur.execute(sql)
                    await cur.fetchall()

            async def engine_run(sql: str = sql) -> None:
                plan, bv = plan_query(sql, vc.vschema, "commerce", PlanCache())
                await engine.execute(plan, proxy_vc, bv)

            d = await _measure(direct_run, rounds, pids)
            w = await _measure(engine_run, rounds, pids)
            # the same statement with the Window primitive unplanned: Compute
            with mock.patch("rewriter.to_primitives.plan_window_select", return_value=None):
                c = await _measure(engine_run, rounds, pids)
            print(f"{name:<20} {d[0] * 1e3:>7.1f} / {d[1] * 1e3:>6.1f} {w[0] * 1e3:>9.1f} / {w[1] * 1e3:>6.1f} "
                  f"{c[0] * 1e3:>9.1f} / {c[1] * 1e3:>6.1f}", flush=True)
    finally:
        direct.close()
        await proxy_vc.pools.close()
        await vc.close()


def main() -> None:
    n = int(os.environ.get("BENCH_WINDOW_ROWS", "20000"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "5"))
    print(f"machine: {machine()}")
    print(f"wrows {n:,} rows, 2 shards; median wall / mean CPU (this process + every mariadbd) of {rounds} rounds")
    with local_cluster() as cluster:
        asyncio.run(_run(cluster, n, rounds))


if __name__ == "__main__":
    main()
