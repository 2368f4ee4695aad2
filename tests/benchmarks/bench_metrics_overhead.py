"""What metrics cost on the fast path: the point select of ``bench_proxy`` through one proxy
worker, reported as QPS and as the proxy process's CPU time per query (user + system, from
/proc/<pid>/stat), which is steadier than QPS on a shared machine.

    python -m tests.benchmarks metrics_overhead     # BENCH_SECONDS=10 BENCH_CLIENTS=8 BENCH_ROUNDS=3

Run it on two commits to compare (the figures in BENCHMARKS.md were taken that way).
"""

from __future__ import annotations

import os

import MySQLdb

from tests.benchmarks.harness import closed_loop, cpu_seconds, local_cluster, machine, proxies

ROWS = 20_000


def main() -> None:
    seconds = float(os.environ.get("BENCH_SECONDS", "10"))
    clients = int(os.environ.get("BENCH_CLIENTS", "8"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    print(f"machine: {machine()}")
    print(f"one proxy worker; point select by primary vindex; {clients} clients; {rounds} x {seconds:.0f} s")
    with local_cluster() as cluster, proxies(cluster, workers=1) as proxy:

        def via_proxy() -> MySQLdb.Connection:
            return MySQLdb.connect(host=proxy.host, port=proxy.port, user="root", passwd="", db="commerce", autocommit=True)

        conn = via_proxy()
        cur = conn.cursor()
        for start in range(1, ROWS + 1, 500):
            values = ",".join(f"({i}, 'user{i}@example.com', {i % 17})" for i in range(start, min(start + 500, ROWS + 1)))
            cur.execute(f"insert into customer(customer_id, email, tenant_id) values {values}")
        conn.close()

        def select_any(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            cur.execute("select customer_id, email, tenant_id from customer where customer_id = %s", (n % ROWS + 1,))
            cur.fetchall()

        closed_loop(via_proxy, select_any, clients, 2)  # warm the plan cache and the pools
        for i in range(rounds):
            before = cpu_seconds(proxy.proc.pid)
            r = closed_loop(via_proxy, select_any, clients, seconds)
            used = cpu_seconds(proxy.proc.pid) - before
            queries = r.qps * seconds
            print(f"round {i + 1}: {r.qps:8.0f} qps  p50 {r.p50_ms:5.2f} ms  p99 {r.p99_ms:5.2f} ms  "
                  f"proxy CPU {used * 1e6 / queries:6.1f} us/query", flush=True)


if __name__ == "__main__":
    main()
