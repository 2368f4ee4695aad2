"""The long run of the random differential tester (tests/engine/test_differential.py).

    python -m tests.benchmarks differential                  # BENCH_DIFF_SEED=1 BENCH_DIFF_COUNT=5000 BENCH_DIFF_TLP=1000
    python -m tests.benchmarks.bench_differential --seed 7 --count 5000 --tlp 1000
    python -m tests.benchmarks.bench_differential --query "select ..."   # one statement: plan + both results

Starts a local cluster (commerce -80/80-, lookup 0) in a temporary directory, loads the
engine test data set into the shards (through the Insert primitive) and into one plain
MariaDB database (the oracle), then runs ``count`` random statements through the planner
+ engine and on the oracle, and ``tlp`` TLP checks through the engine alone. Prints every
difference (seed, case index, query, both results) as it is found, and a summary: counts
per kind, refusals (1235) by message, statements both sides reject, time per statement.
Exit status 1 when anything differed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiomysql

from proxy import engine
from proxy.cluster import LocalCluster
from proxy.engine.result import Result
from rewriter import PlanCache, plan_query
from tests.benchmarks.harness import machine
from tests.conftest import example_cluster_config
from tests.engine.conftest import ITEMS_DDL, ORACLE_DB, engine_vschema
from tests.engine.dataset import generated_rows
from tests.engine.shard_vcursor import ShardVCursor, fields_of
from tests.engine.test_differential import (
    Case,
    check_case,
    oracle_sql,
    proxy_runner,
    run_differential,
)
from tests.engine.wide_dataset import load_wide

STATEMENT_SECONDS = 20


async def _environment(cluster: LocalCluster) -> tuple[ShardVCursor, Any, Any]:
    """What tests/engine/conftest.py's vcursor / oracle / loaded fixtures set up."""
    vs = engine_vschema(cluster.config)
    for ep in cluster.endpoints.values():  # a runaway statement fails (1969) instead of hanging the run
        conn = await aiomysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password)
        async with conn.cursor() as cur:
            await cur.execute(f"SET GLOBAL max_statement_time = {STATEMENT_SECONDS}")
        conn.close()
    vc = ShardVCursor(vs, cluster.endpoints)
    for shard in vs.shards("commerce"):
        await vc.execute_shard("commerce", shard, ITEMS_DDL)
        await vc.execute_shard("commerce", shard, "DELETE FROM items")
    shard = vs.shards("lookup")[0]
    ep = cluster.endpoints[("lookup", shard)]
    await vc.execute_shard("lookup", shard, f"CREATE DATABASE IF NOT EXISTS {ORACLE_DB}")
    conn = await aiomysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password, db=ORACLE_DB,
                                  autocommit=True, conv={}, use_unicode=False, charset="utf8mb4")

    async def oracle(sql: str) -> Result:
        async with conn.cursor() as cur:
            await cur.execute(sql)
            rows = [tuple(r) for r in await cur.fetchall()] if cur.description else []
            return Result(fields=fields_of(cur), rows=rows)

    await oracle(ITEMS_DDL)
    await oracle("DELETE FROM items")
    rows = generated_rows()
    cols = "id, customer_id, grp, name, qty, price, score"
    for start in range(0, len(rows), 250):
        sql = f"insert into items ({cols}) values " + ", ".join(rows[start:start + 250])
        plan, bindvars = plan_query(sql, vs, "commerce")
        await engine.execute(plan, vc, bindvars)
        await oracle(sql)
    for run in (lambda s: vc.execute_shard("lookup", shard, s), oracle):
        await run("CREATE TABLE IF NOT EXISTS qty_labels (qty INT PRIMARY KEY, label VARCHAR(20))")
        await run("DELETE FROM qty_labels")
        await run("INSERT INTO qty_labels VALUES " + ", ".join(f"({q}, 'q{q % 4}')" for q in range(0, 25, 2)))
    grp_rows = ", ".join(f"({g!r}, 'label {k}')" for k, g in enumerate(["a", "c", "no items here"]))
    for run in [*(lambda q, s=s: vc.execute_shard("commerce", s, q) for s in vs.shards("commerce")), oracle]:
        await run("CREATE TABLE IF NOT EXISTS grp_labels (grp VARCHAR(20) PRIMARY KEY, label VARCHAR(20))")
        await run("DELETE FROM grp_labels")
        await run("INSERT INTO grp_labels VALUES " + grp_rows)

    async def through_engine(sql: str) -> None:
        plan, bindvars = plan_query(sql, vs, "commerce")
        await engine.execute(plan, vc, bindvars)

    await load_wide(vc.execute_shard, vs.shards("commerce"), shard, through_engine, oracle)
    return vc, oracle, conn


async def _run(cluster: LocalCluster, args: argparse.Namespace, state: dict[str, Any]) -> int:
    vc, oracle, conn = await _environment(cluster)
    try:
        schema = await vc.tracked_schema()
        cache = PlanCache()
        proxy = proxy_runner(vc, schema, cache, random.Random(args.seed))
        if args.query:
            failed = 0
            for sql in args.query:
                try:
                    node, _ = plan_query("vexplain plan " + sql, vc.vschema, "commerce", PlanCache(), schema=schema)
                    print(json.dumps(json.loads(node.json), indent=1))
                except Exception as e:  # noqa: BLE001 - shown, the run goes on
                    print(f"plan: {e!r}")
                out = await check_case(Case(sql, args.ordered, "query"), proxy, oracle)
                print(f"{out.status}: {out.detail or out.refusal}")
                for name, run, text in (("proxy", proxy, sql), ("oracle", oracle, oracle_sql(sql))):
                    try:
                        res = await run(text)
                        print(f"{name}: {len(res.rows)} rows {res.rows[:args.rows]}")
                    except Exception as e:  # noqa: BLE001
                        print(f"{name}: {e!r}")
                failed += out.status == "fail"
            state["kill"] = False
            return 1 if failed else 0
        t0 = time.monotonic()
        seen = 0

        def progress(i: int, summary: Any) -> None:
            nonlocal seen
            while seen < len(summary.failures):
                print("\n" + summary.failures[seen] + "\n", flush=True)
                seen += 1
            if (i + 1) % 250 == 0:
                print(f"... {i + 1} cases, {len(summary.failures)} failures, "
                      f"{time.monotonic() - t0:.0f} s", flush=True)

        summary = await run_differential(args.seed, args.count, args.tlp, proxy, oracle, progress)
        elapsed = time.monotonic() - t0
        print("\n" + summary.report())
        print(f"{summary.total} cases in {elapsed:.1f} s ({1000 * elapsed / max(summary.total, 1):.0f} ms each)")
        state["kill"] = bool(summary.aborted)
        return 1 if summary.failures else 0
    finally:
        conn.close()
        await vc.close()


def main(argv: list[str] | None = None) -> int:
    """``argv`` None (``python -m tests.benchmarks``): settings from BENCH_DIFF_* variables."""
    p = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_differential", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=int(os.environ.get("BENCH_DIFF_SEED", "1")))
    p.add_argument("--count", type=int, default=int(os.environ.get("BENCH_DIFF_COUNT", "5000")))
    p.add_argument("--tlp", type=int, default=int(os.environ.get("BENCH_DIFF_TLP", "1000")))
    p.add_argument("--query", action="append", help="run only this statement (repeatable)")
    p.add_argument("--ordered", action="store_true", help="--query: compare row order too")
    p.add_argument("--rows", type=int, default=10, help="--query: rows shown per side")
    args = p.parse_args([] if argv is None else argv)
    print(f"machine: {machine()}")
    print(f"seed {args.seed}: {args.count} random statements, {args.tlp} TLP checks", flush=True)
    return asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    """The cluster of tests.benchmarks.harness.local_cluster, stopped with SIGKILL when a
    statement had to be abandoned (a server busy with it may never shut down cleanly)."""
    with tempfile.TemporaryDirectory(prefix="shardgate-bench-") as tmp:
        cluster = LocalCluster(example_cluster_config(Path(tmp) / "data"))
        await cluster.start()
        state: dict[str, Any] = {"kill": True}
        try:
            return await _run(cluster, args, state)
        finally:
            if state["kill"]:
                for ks, shard in cluster.endpoints:
                    await cluster.stop_shard(ks, shard, kill=True)
            else:
                await cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
