"""SemiJoin vs the plan without it (Compute for EXISTS, the pulled-out IN list for IN), in one run.

    .venv/bin/pytest -q -s tests/engine/bench_semi_joins.py    # not collected by the suite

Over the engine tests' data set (items, 3000 rows, 2 shards), planned with the tracked
schema, executed by the engine in this process (no client protocol hop). Prints qps,
the proxy's CPU per query (process_time) and the MariaDB servers' CPU per query (the
fixtures' child processes, /proc utime+stime, 10 ms ticks: coarse).
"""

import os
import sys
import time

import pytest_asyncio

from proxy import engine
from rewriter import PlanCache, plan_query
from rewriter import to_primitives as tp


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def schema(loaded, vcursor):
    return await vcursor.tracked_schema()


def _children_ticks() -> int:
    """CPU clock ticks used so far by this process's children (the MariaDB servers)."""
    me = os.getpid()
    total = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(st[1]) == me:
            total += int(st[11]) + int(st[12])
    return total


SQLS = {
    "exists": "select a.id, a.name from items a where exists (select 1 from items b where b.customer_id = a.id and b.qty > 2)",
    "not_exists": "select a.id, a.customer_id from items a where not exists (select 1 from items b where b.id = a.customer_id and b.qty = 1)",
    "in_big_inner": "select a.id from items a where a.qty > 1 and a.customer_id in (select b.customer_id from items b)",
}


async def test_semi_join_against_the_plan_without_it(schema, vcursor, monkeypatch):
    hz = os.sysconf("SC_CLK_TCK")
    for name, sql in SQLS.items():
        for mode in ("semijoin", "compute"):
            if mode == "compute":
                monkeypatch.setattr(tp, "plan_semi_join", lambda sel, ctx: None)
            plan, bv = plan_query(sql, vcursor.vschema, "commerce", PlanCache(), schema=schema)
            n = 30
            await engine.execute(plan, vcursor, bv)
            t0, c0, k0 = time.perf_counter(), time.process_time(), _children_ticks()
            for _ in range(n):
                res = await engine.execute(plan, vcursor, bv)
            t1, c1, k1 = time.perf_counter(), time.process_time(), _children_ticks()
            sys.stdout.write(f"BENCH {name} {mode} rows={len(res.rows)} qps={n/(t1-t0):.1f} "
                  f"proxy_cpu_ms/op={(c1-c0)*1000/n:.2f} mariadb_cpu_ms/op={(k1-k0)*1000/hz/n:.2f}\n")
            monkeypatch.undo()
