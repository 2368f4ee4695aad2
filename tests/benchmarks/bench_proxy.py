"""Point-select and single-row-insert QPS and latency: through the proxy (routed by
the hash vindex) vs directly against one shard, same run, 1/8/32 clients.

Next to QPS, the CPU time per query (user + system from /proc/<pid>/stat over the
cell's run, divided by the queries it answered) of the proxy process(es) together and
of the shards' mariadbd processes: the figure a shared machine does not distort.

    python -m tests.benchmarks proxy     # BENCH_SECONDS=5 BENCH_WORKERS=2 BENCH_CLIENTS=1,8,32 to change
"""

from __future__ import annotations

import os

import MySQLdb

from tests.benchmarks.harness import (
    LoadResult,
    closed_loop,
    cpu_seconds,
    local_cluster,
    machine,
    proxies,
    shard_pids,
)

ROWS = 20_000
CLIENTS = (1, 8, 32)


def _fmt(r: LoadResult) -> str:
    return f"{r.qps:7.0f} qps  p50 {r.p50_ms:5.2f} ms  p99 {r.p99_ms:5.2f} ms" + (f"  errors {r.errors}" if r.errors else "")


def _us(cpu_s: float, r: LoadResult) -> str:
    return f"{cpu_s * 1e6 / r.count:6.1f}" if r.count else "     -"


def main() -> None:
    seconds = float(os.environ.get("BENCH_SECONDS", "5"))
    workers = int(os.environ.get("BENCH_WORKERS", "2"))
    clients_list = tuple(int(c) for c in os.environ.get("BENCH_CLIENTS", ",".join(map(str, CLIENTS))).split(","))
    print(f"machine: {machine()}")
    print(f"proxy workers: {workers}; {seconds:.0f} s per measurement; {ROWS} rows in commerce.customer")
    with local_cluster() as cluster, proxies(cluster, workers=workers) as proxy:
        shard = cluster.endpoint("commerce", "-80")
        mariadbd = shard_pids(cluster)

        def via_proxy() -> MySQLdb.Connection:
            return MySQLdb.connect(host=proxy.host, port=proxy.port, user="root", passwd="", db="commerce", autocommit=True)

        def direct() -> MySQLdb.Connection:
            return MySQLdb.connect(host=shard.host, port=shard.port, user=shard.user, passwd=shard.password,
                                   db=shard.database, autocommit=True)

        # Load through the proxy so every row sits on the shard its vindex picks.
        conn = via_proxy()
        cur = conn.cursor()
        for start in range(1, ROWS + 1, 500):
            values = ",".join(f"({i}, 'user{i}@example.com', {i % 17})" for i in range(start, min(start + 500, ROWS + 1)))
            cur.execute(f"insert into customer(customer_id, email, tenant_id) values {values}")
        conn.close()
        # The direct baseline reads the same table on one shard: ids that live there.
        d = direct()
        dc = d.cursor()
        dc.execute("select customer_id from customer")
        local_ids = [int(r[0]) for r in dc.fetchall()]
        d.close()

        def select_any(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            cur.execute("select customer_id, email, tenant_id from customer where customer_id = %s", (n % ROWS + 1,))
            cur.fetchall()

        def select_local(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            cur.execute("select customer_id, email, tenant_id from customer where customer_id = %s",
                        (local_ids[n % len(local_ids)],))
            cur.fetchall()

        insert_base = [10_000_000]

        def insert(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            cur.execute("insert into customer(customer_id, email, tenant_id) values (%s, 'new@example.com', 1)",
                        (insert_base[0] + n,))

        closed_loop(via_proxy, select_any, 2, 1)  # warm the plan cache and the pools
        print()
        print("CPU columns: µs of CPU per query, of the proxy process(es) together / of the shards' mariadbd")
        print(f"{'test':<13}{'clients':>7}  {'proxy':<38}{'proxy/db µs':<15}{'direct (one shard)':<38}"
              f"{'db µs':<8}{'ratio':>6}")
        for name, prox_op, direct_op in (("point select", select_any, select_local), ("insert", insert, insert)):
            for clients in clients_list:
                insert_base[0] += 100_000_000
                before = cpu_seconds(*proxy.pids), cpu_seconds(*mariadbd)
                p = closed_loop(via_proxy, prox_op, clients, seconds)
                proxy_cpu, db_cpu = cpu_seconds(*proxy.pids) - before[0], cpu_seconds(*mariadbd) - before[1]
                insert_base[0] += 100_000_000
                before_direct = cpu_seconds(*mariadbd)
                dr = closed_loop(direct, direct_op, clients, seconds)
                direct_db_cpu = cpu_seconds(*mariadbd) - before_direct
                ratio = p.qps / dr.qps if dr.qps else 0.0
                print(f"{name:<13}{clients:>7}  {_fmt(p):<38}{_us(proxy_cpu, p)} /{_us(db_cpu, p):<7}"
                      f"{_fmt(dr):<38}{_us(direct_db_cpu, dr):<8}{ratio:6.2f}", flush=True)


if __name__ == "__main__":
    main()
