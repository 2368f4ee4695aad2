"""The normal (non-fast) statement path's CPU per statement: statements inside ``BEGIN ... COMMIT``
and point selects with ``SHARDGATE_FAST_PATH=0``, 8 clients, proxy CPU from /proc/<pid>/stat.

With ``BENCH_BASE=<dir>`` (a checkout of an older commit, e.g. ``git archive <commit> | tar -x -C
<dir>``) a second proxy process runs that code on the same cluster and the two are measured in
alternating rounds, so both see the same load on a shared machine: the before/after of a change.

Kinds: ``transaction`` (``BEGIN; SELECT by id; UPDATE by id; COMMIT``, CPU divided by the 4
statements) and ``point select`` (autocommit, fast path off).

    BENCH_BASE=/tmp/base python -m tests.benchmarks normal_path   # BENCH_SECONDS=3 BENCH_ROUNDS=3

``BENCH_FAST_PATH=1``: both proxies with the fast path on (the transactions' statements, BEGIN and
COMMIT on the fast path since branch ``txfast``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import MySQLdb

import tests.proxy_process as proxy_process
from tests.benchmarks.harness import (
    ProxyGroup,
    closed_loop,
    cpu_times,
    local_cluster,
    machine,
    proxies,
)

ROWS = 5_000
KINDS = ("transaction", "point select")
STATEMENTS = {"transaction": 4, "point select": 1}


def main() -> None:
    seconds = float(os.environ.get("BENCH_SECONDS", "3"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    clients = int(os.environ.get("BENCH_CLIENTS", "8"))
    base = os.environ.get("BENCH_BASE")
    fast = os.environ.get("BENCH_FAST_PATH") == "1"
    env = {} if fast else {"SHARDGATE_FAST_PATH": "0"}
    print(f"machine: {machine()}")
    print(f"{clients} clients; {rounds} x {seconds:.0f} s per proxy and kind; fast path {'on' if fast else 'off'}")
    with local_cluster() as cluster, ExitStack() as stack:
        paths: dict[str, ProxyGroup] = {}
        if base:
            # start_proxy runs ``python -m proxy.cli`` in REPO: point it at the old checkout.
            here = proxy_process.REPO
            proxy_process.REPO = Path(base)
            try:
                paths["base"] = stack.enter_context(proxies(cluster, env={**env, "PYTHONPATH": base}))
            finally:
                proxy_process.REPO = here
        paths["this"] = stack.enter_context(proxies(cluster, env={**env, "PYTHONPATH": str(proxy_process.REPO)}))
        for name, p in paths.items():
            print(f"proxy {name}: pid {p.proc.pid}", flush=True)

        def connector(proxy: ProxyGroup) -> Callable[[], MySQLdb.Connection]:
            return lambda: MySQLdb.connect(host=proxy.host, port=proxy.port, user="root", passwd="", db="commerce",
                                           autocommit=True)

        conn = connector(paths["this"])()
        cur = conn.cursor()
        for start in range(1, ROWS + 1, 500):
            values = ",".join(f"({i}, 'user{i}@example.com', {i % 17})" for i in range(start, start + 500))
            cur.execute(f"insert into customer(customer_id, email, tenant_id) values {values}")
        conn.close()

        def transaction(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            i = n % ROWS + 1
            cur.execute("begin")
            cur.execute("select customer_id, email, tenant_id from customer where customer_id = %s", (i,))
            cur.fetchall()
            cur.execute("update customer set tenant_id = %s where customer_id = %s", (n % 17, i))
            cur.execute("commit")

        def point_select(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            cur.execute("select customer_id, email, tenant_id from customer where customer_id = %s", (n % ROWS + 1,))
            cur.fetchall()

        ops: dict[str, Callable[[Any, int], None]] = {"transaction": transaction, "point select": point_select}
        chosen = [k.strip() for k in os.environ.get("BENCH_KINDS", ",".join(KINDS)).split(",")]
        for name in chosen:
            op = ops[name]
            for proxy in paths.values():
                closed_loop(connector(proxy), op, 2, 0.5)  # plans cached, pools open
            for _ in range(rounds):
                for path, proxy in paths.items():
                    pid = proxy.proc.pid
                    user0, system0 = cpu_times(pid)
                    r = closed_loop(connector(proxy), op, clients, seconds)
                    user1, system1 = cpu_times(pid)
                    n = max(r.count, 1) * STATEMENTS[name]
                    print(f"{name:<14}{path:<6} {r.qps * STATEMENTS[name]:7.0f} stmt/s  proxy CPU "
                          f"{(user1 - user0 + system1 - system0) * 1e6 / n:6.1f} µs/statement (user "
                          f"{(user1 - user0) * 1e6 / n:6.1f}, system {(system1 - system0) * 1e6 / n:5.1f})"
                          + (f"  errors {r.errors}" if r.errors else "") + f"  load {os.getloadavg()[0]:.1f}",
                          flush=True)
        if os.environ.get("BENCH_HOLD"):
            # Keep a proxy under load for a profiler: BENCH_HOLD=<seconds> of the first kind, on
            # BENCH_HOLD_PATH (this, or base).
            held = paths[os.environ.get("BENCH_HOLD_PATH", "this")]
            closed_loop(connector(held), ops[chosen[0]], clients, float(os.environ["BENCH_HOLD"]))


if __name__ == "__main__":
    main()
