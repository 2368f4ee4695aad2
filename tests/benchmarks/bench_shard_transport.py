"""The proxy's shard connections over the shards' Unix sockets vs over TCP loopback, A/B in one
run: two proxy processes (one worker each, on the same CPU) over the same cluster, one given
the shards' sockets and one not, loaded in turn (alternating order, several rounds) so machine
noise falls on both alike. Reports the proxy's and the shards' CPU per point select / INSERT.

    python -m tests.benchmarks shard_transport   # BENCH_SECONDS=3 BENCH_ROUNDS=6 BENCH_CLIENTS=8
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
from pathlib import Path

import MySQLdb

from proxy.worker_cpus import worker_environments
from tests.benchmarks.harness import closed_loop, cpu_seconds, local_cluster, machine, shard_pids
from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy

ROWS = 20_000


def main() -> None:
    seconds = float(os.environ.get("BENCH_SECONDS", "3"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "6"))
    clients = int(os.environ.get("BENCH_CLIENTS", "8"))
    print(f"machine: {machine()}")
    print(
        f"{clients} clients, {rounds} rounds of {seconds:.0f} s per transport and statement; load {os.getloadavg()}"
    )
    with local_cluster() as cluster:
        log_dir = Path(tempfile.mkdtemp(prefix="shardgate-bench-transport-"))
        env = {"SHARDGATE_LOG_LEVEL": "WARNING", **worker_environments(1)[0]}
        tcp_endpoints = {
            k: dataclasses.replace(e, socket=None) for k, e in cluster.endpoints.items()
        }
        assert all(e.socket for e in cluster.endpoints.values()), (
            "the local cluster gives every shard its socket"
        )
        procs: dict[str, ProxyProcess] = {
            "unix": start_proxy(
                cluster.config.path, cluster.endpoints, log_dir / "unix.log", extra_env=env
            ),
            "tcp": start_proxy(
                cluster.config.path, tcp_endpoints, log_dir / "tcp.log", extra_env=env
            ),
        }
        mariadbd = shard_pids(cluster)
        try:
            _run(procs, mariadbd, seconds, rounds, clients)
        finally:
            for p in procs.values():
                stop_proxy(p)


def _run(
    procs: dict[str, ProxyProcess], mariadbd: list[int], seconds: float, rounds: int, clients: int
) -> None:
    def connect(p: ProxyProcess):  # noqa: ANN202 -- MySQLdb is untyped
        return lambda: MySQLdb.connect(
            host=p.host, port=p.port, user="root", passwd="", db="commerce", autocommit=True
        )

    conn = connect(procs["unix"])()
    cur = conn.cursor()
    for start in range(1, ROWS + 1, 500):
        values = ",".join(
            f"({i}, 'user{i}@example.com', {i % 17})"
            for i in range(start, min(start + 500, ROWS + 1))
        )
        cur.execute(f"insert into customer(customer_id, email, tenant_id) values {values}")
    conn.close()

    def select(cur: MySQLdb.cursors.Cursor, n: int) -> None:
        cur.execute(
            "select customer_id, email, tenant_id from customer where customer_id = %s",
            (n % ROWS + 1,),
        )
        cur.fetchall()

    insert_base = [10_000_000]

    def insert(cur: MySQLdb.cursors.Cursor, n: int) -> None:
        cur.execute(
            "insert into customer(customer_id, email, tenant_id) values (%s, 'new@example.com', 1)",
            (insert_base[0] + n,),
        )

    for p in procs.values():
        # warm the plan cache, the pools and the fast path's links
        closed_loop(connect(p), select, 2, 1)
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    print(
        f"{'round':<6}{'statement':<14}{'transport':<10}{'qps':>8}{'proxy µs':>10}{'shards µs':>11}"
    )
    for r in range(rounds):
        order = ("unix", "tcp") if r % 2 == 0 else ("tcp", "unix")
        for name, op in (("point select", select), ("insert", insert)):
            for transport in order:
                p = procs[transport]
                insert_base[0] += 100_000_000
                before = cpu_seconds(p.proc.pid), cpu_seconds(*mariadbd)
                res = closed_loop(connect(p), op, clients, seconds)
                proxy_cpu, db_cpu = (
                    cpu_seconds(p.proc.pid) - before[0],
                    cpu_seconds(*mariadbd) - before[1],
                )
                n = max(res.count, 1)
                row = (res.qps, proxy_cpu * 1e6 / n, db_cpu * 1e6 / n)
                results.setdefault((name, transport), []).append(row)
                print(
                    f"{r:<6}{name:<14}{transport:<10}{row[0]:>8.0f}{row[1]:>10.1f}{row[2]:>11.1f}",
                    flush=True,
                )
    print("\nmedians over the rounds (unix vs tcp):")
    for name in ("point select", "insert"):
        med = {
            t: [statistics.median(v[i] for v in results[(name, t)]) for i in range(3)]
            for t in ("unix", "tcp")
        }
        u, t = med["unix"], med["tcp"]
        print(
            f"{name:<14} qps {u[0]:7.0f} vs {t[0]:7.0f} ({u[0] / t[0] - 1:+.0%})   proxy {u[1]:5.1f} vs {t[1]:5.1f} µs "
            f"({u[1] / t[1] - 1:+.0%})   shards {u[2]:5.1f} vs {t[2]:5.1f} µs ({u[2] / t[2] - 1:+.0%})"
        )
