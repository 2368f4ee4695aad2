"""The fast path (proxy.fast_path) against the normal path, in one run: two proxy processes on one
cluster, one with ``SHARDGATE_FAST_PATH=0``, measured in alternating rounds so both see the same
load on a shared machine. Per statement kind: QPS and the proxy's CPU per query, user and system
(from /proc/<pid>/stat), 8 clients.

    python -m tests.benchmarks fast_path     # BENCH_SECONDS=3 BENCH_ROUNDS=3 BENCH_CLIENTS=8
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import ExitStack

import MySQLdb

from tests.benchmarks.harness import (
    ProxyGroup,
    closed_loop,
    cpu_times,
    local_cluster,
    machine,
    proxies,
)

ROWS = 5_000


def main() -> None:
    seconds = float(os.environ.get("BENCH_SECONDS", "3"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    clients = int(os.environ.get("BENCH_CLIENTS", "8"))
    print(f"machine: {machine()}")
    print(f"one proxy process per path; {clients} clients; {rounds} x {seconds:.0f} s per path and statement")
    with local_cluster() as cluster, ExitStack() as stack:
        paths: dict[str, ProxyGroup] = {
            "fast path": stack.enter_context(proxies(cluster)),
            "normal path": stack.enter_context(proxies(cluster, env={"SHARDGATE_FAST_PATH": "0"})),
        }

        def connector(proxy: ProxyGroup) -> Callable[[], MySQLdb.Connection]:
            return lambda: MySQLdb.connect(host=proxy.host, port=proxy.port, user="root", passwd="", db="commerce",
                                           autocommit=True)

        conn = connector(paths["fast path"])()
        cur = conn.cursor()
        for start in range(1, ROWS + 1, 500):
            values = ",".join(f"({i}, 'user{i}@example.com', {i % 17})" for i in range(start, start + 500))
            cur.execute(f"insert into customer(customer_id, email, tenant_id) values {values}")
        conn.close()
        next_id = [20_000_000]

        def point_select(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            cur.execute("select customer_id, email, tenant_id from customer where customer_id = %s", (n % ROWS + 1,))
            cur.fetchall()

        def insert(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            next_id[0] += 1
            cur.execute("insert into customer(customer_id, email, tenant_id) values (%s, 'new@example.com', 1)",
                        (next_id[0],))

        def scatter(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            # ~300 rows from each shard (tenant 1 is the one the inserts grow: left out)
            cur.execute("select customer_id, email from customer where tenant_id = %s", (n % 16 + 2,))
            cur.fetchall()

        for name, op in (("point select", point_select), ("insert", insert), ("scatter select", scatter)):
            for proxy in paths.values():
                closed_loop(connector(proxy), op, 2, 0.5)  # plans cached, pools and links open
            for _ in range(rounds):
                for path, proxy in paths.items():
                    pid = proxy.proc.pid
                    user0, system0 = cpu_times(pid)
                    r = closed_loop(connector(proxy), op, clients, seconds)
                    user1, system1 = cpu_times(pid)
                    n = max(r.count, 1)
                    print(f"{name:<15}{path:<12} {r.qps:7.0f} qps  proxy CPU {(user1 - user0 + system1 - system0) * 1e6 / n:7.1f}"
                          f" µs/query (user {(user1 - user0) * 1e6 / n:6.1f}, system {(system1 - system0) * 1e6 / n:5.1f})"
                          + (f"  errors {r.errors}" if r.errors else ""), flush=True)


if __name__ == "__main__":
    main()
