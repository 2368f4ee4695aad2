"""Commit cost of ``transaction_mode = twopc`` against ``multi``, same run, then a longer
run of the crash workload (tests/proxy/test_twopc_crash.py).

Transactions through one proxy process over 2 MariaDB shards; every client moves money
between its own two accounts (no lock waits: this measures the commit protocol):

- 2-shard: ``BEGIN; UPDATE a (shard -80); UPDATE b (shard 80-); COMMIT``
- 1-shard: the same with both accounts on one shard

Reported per mode: transactions/s, p50/p99 of the whole transaction, p50/mean of the
COMMIT statement alone; and the ratios twopc/multi. Each cell runs as REPS short runs
alternating multi, twopc, multi, ... (samples pooled), so drift and other load on the
machine hit both modes alike.

    python -m tests.benchmarks twopc     # BENCH_SECONDS=4, BENCH_TWOPC_CRASH_SECONDS=60 (0: skip)
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import MySQLdb

from tests.benchmarks.harness import machine
from tests.proxy.twopc_support import KEYSPACE, bank_cluster, ids_on
from tests.proxy_process import start_proxy, stop_proxy

SHARDS = ["-80", "80-"]
CLIENTS = (1, 8)
REPS = 8


@dataclass
class Cell:
    tps: float
    tx_p50: float
    tx_p99: float
    commit_p50: float
    commit_mean: float
    errors: int


@dataclass
class Samples:
    tx: list[float]
    commits: list[float]
    seconds: float
    errors: int

    def __add__(self, other: Samples) -> Samples:
        return Samples(self.tx + other.tx, self.commits + other.commits, self.seconds + other.seconds,
                       self.errors + other.errors)

    def cell(self) -> Cell:
        tx, commits = sorted(self.tx), sorted(self.commits)
        return Cell(
            tps=len(tx) / self.seconds,
            tx_p50=statistics.median(tx) * 1000,
            tx_p99=tx[min(len(tx) - 1, int(len(tx) * 0.99))] * 1000,
            commit_p50=statistics.median(commits) * 1000,
            commit_mean=statistics.fmean(commits) * 1000,
            errors=self.errors,
        )


def run_cell(port: int, mode: str, pairs: list[tuple[int, int]], clients: int, seconds: float) -> Samples:
    tx_lat: list[list[float]] = [[] for _ in range(clients)]
    commit_lat: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    conns = [MySQLdb.connect(host="127.0.0.1", port=port, user="root", passwd="", db=KEYSPACE, autocommit=True)
             for _ in range(clients)]
    for c in conns:
        c.cursor().execute(f"set transaction_mode = '{mode}'")
    go = threading.Event()
    stop_at = [0.0]

    def worker(i: int) -> None:
        cur = conns[i].cursor()
        a, b = pairs[i]
        go.wait()
        while (t0 := time.perf_counter()) < stop_at[0]:
            try:
                cur.execute("begin")
                cur.execute(f"update account set balance = balance - 1 where id = {a}")
                cur.execute(f"update account set balance = balance + 1 where id = {b}")
                t1 = time.perf_counter()
                cur.execute("commit")
                t2 = time.perf_counter()
            except MySQLdb.Error:
                errors[i] += 1
                continue
            tx_lat[i].append(t2 - t0)
            commit_lat[i].append(t2 - t1)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    begin = time.perf_counter()
    stop_at[0] = begin + seconds
    go.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - begin
    for c in conns:
        c.close()
    return Samples([x for lat in tx_lat for x in lat], [x for lat in commit_lat for x in lat], elapsed, sum(errors))


async def commit_cost(seconds: float) -> None:
    with tempfile.TemporaryDirectory(prefix="shardgate-bench-twopc-") as tmp:
        async with bank_cluster(None, Path(tmp) / "cluster", SHARDS) as cluster:
            log = Path(tmp) / "proxy.log"
            proxy = await asyncio.to_thread(start_proxy, cluster.config.path, cluster.endpoints, log,
                                            None, {"SHARDGATE_LOG_LEVEL": "WARNING"})
            try:
                low, high = ids_on("-80", SHARDS, 2 * max(CLIENTS)), ids_on("80-", SHARDS, max(CLIENTS))
                conn = MySQLdb.connect(host="127.0.0.1", port=proxy.port, user="root", passwd="", db=KEYSPACE,
                                       autocommit=True)
                conn.cursor().execute("insert into account (id, balance) values "
                                      + ", ".join(f"({i}, 1000000)" for i in low + high))
                conn.close()
                shapes = {
                    "2-shard": [(low[i], high[i]) for i in range(max(CLIENTS))],
                    "1-shard": [(low[2 * i], low[2 * i + 1]) for i in range(max(CLIENTS))],
                }
                print("| transaction | clients | mode | tx/s | tx p50 / p99 ms | COMMIT p50 / mean ms |")
                print("|---|---|---|---|---|---|")
                ratios = []
                for shape, pairs in shapes.items():
                    for clients in CLIENTS:
                        runs = {"multi": Samples([], [], 0.0, 0), "twopc": Samples([], [], 0.0, 0)}
                        for _ in range(REPS):
                            for mode in ("multi", "twopc"):
                                runs[mode] += await asyncio.to_thread(
                                    run_cell, proxy.port, mode, pairs, clients, seconds / REPS
                                )
                        m, t = runs["multi"].cell(), runs["twopc"].cell()
                        for mode, c in (("multi", m), ("twopc", t)):
                            print(f"| {shape} | {clients} | {mode} | {c.tps:,.0f} | {c.tx_p50:.2f} / {c.tx_p99:.2f} | "
                                  f"{c.commit_p50:.2f} / {c.commit_mean:.2f} |" + (f" errors {c.errors:.0f}" if c.errors else ""))
                        ratios.append((shape, clients, t.commit_mean / m.commit_mean, t.tx_p50 / m.tx_p50, m.tps / t.tps))
                print()
                print("twopc / multi:")
                for shape, clients, commit, tx, tps in ratios:
                    print(f"  {shape} x{clients}: COMMIT mean {commit:.2f}x  transaction p50 {tx:.2f}x  throughput cost {tps:.2f}x")
            finally:
                await asyncio.to_thread(stop_proxy, proxy)


async def crash_run(seconds: float) -> None:
    from tests.proxy.test_twopc_crash import SHARDS as CRASH_SHARDS
    from tests.proxy.test_twopc_crash import Workload, check, run_workload

    w = Workload(seconds=seconds, fault_kills=max(4, int(seconds / 5)), random_kills=max(2, int(seconds / 10)),
                 shard_kills=max(1, int(seconds / 20)))
    with tempfile.TemporaryDirectory(prefix="shardgate-bench-twopc-crash-") as tmp:
        extra = "transaction_mode: twopc\ntwopc: {resolver_interval_seconds: 0.2}\n"
        async with bank_cluster(None, Path(tmp) / "cluster", CRASH_SHARDS, extra=extra) as cluster:
            out = await run_workload(cluster, Path(tmp) / "proxy.log", w)
            stats = check(cluster, w, out)
    print(f"crash workload {seconds:.0f} s, 3 shards, {w.clients} clients: {stats}, kills {out.kills}: "
          "sum unchanged, no half transfer, every OK transfer present, nothing prepared")


def main() -> None:
    seconds = float(os.environ.get("BENCH_SECONDS", "4"))
    crash_seconds = float(os.environ.get("BENCH_TWOPC_CRASH_SECONDS", "60"))
    print(f"machine: {machine()}")
    print(f"one proxy process, 2 shards, {seconds:.0f} s per mode and cell ({REPS} alternating runs)")
    asyncio.run(commit_cost(seconds))
    if crash_seconds > 0:
        asyncio.run(crash_run(crash_seconds))


if __name__ == "__main__":
    main()
