"""Messaging's ack and claim UPDATEs, alone: what one costs the proxy and the shards.

    python -m tests.benchmarks message_acks     # BENCH_ACKS=2000 BENCH_ROUNDS=3

1. An autocommit ack of 50 message ids on both shards (``UPDATE t SET time_acked = ...,
   time_next = NULL WHERE id IN (...)``) through the proxy: its CPU and the two shards' mariadbd
   CPU per ack (from /proc), and the wall time per ack. Acks are sent one after another on one
   connection; rounds after a warm-up one, the median printed.
2. The claim (``epoch = epoch + 1, time_next = ...``) and ack UPDATEs of 50 rows straight on one
   shard, logged with ``binlog_row_image`` FULL (the shards' setting) and MINIMAL (``SET
   STATEMENT ... FOR``), rounds alternating, with a 2-byte payload (``bench_messaging``'s) and a
   1 KB one: shard CPU and binlog bytes per row.
"""

from __future__ import annotations

import asyncio
import os
import time

import aiomysql
import MySQLdb

from tests.benchmarks.bench_messaging import SHARDS, TABLE, _connect_proxy, _prepare
from tests.benchmarks.harness import cpu_seconds, local_cluster, machine, proxies

ROWS = 20000
BATCH = 50
ER_LOCK_DEADLOCK = 1213


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


async def _acks(proxy, pids: list[int], acks: int, rounds: int) -> None:
    conn = await _connect_proxy(proxy)
    try:
        async with conn.cursor() as cur:
            for base in range(0, ROWS, 500):
                values = ", ".join(f"({i}, {i % 10}, '{{}}')" for i in range(base, base + 500))
                await cur.execute(f"INSERT INTO {TABLE} (id, tenant_id, message) VALUES {values}")
            proxy_us: list[float] = []
            shard_us: list[float] = []
            wall_us: list[float] = []
            retried = 0
            for r in range(rounds + 1):  # the first round warms up
                before = cpu_seconds(proxy.proc.pid), cpu_seconds(*pids)
                start = time.perf_counter()
                for n in range(acks):
                    base = (n * BATCH) % ROWS
                    ids = ", ".join(str(i) for i in range(base, base + BATCH))
                    sql = f"UPDATE {TABLE} SET time_acked = {time.time_ns()}, time_next = NULL WHERE id IN ({ids})"
                    for _ in range(5):
                        try:
                            await cur.execute(sql)
                            break
                        except aiomysql.OperationalError as e:
                            if e.args[0] != ER_LOCK_DEADLOCK:  # against the table's poller, rarely
                                raise
                            retried += 1
                if r:
                    wall_us.append(1e6 * (time.perf_counter() - start) / acks)
                    proxy_us.append(1e6 * (cpu_seconds(proxy.proc.pid) - before[0]) / acks)
                    shard_us.append(1e6 * (cpu_seconds(*pids) - before[1]) / acks)
    finally:
        conn.close()
    print(f"ack of {BATCH} ids on 2 shards via the proxy ({acks} x {rounds} rounds, median):"
          f" proxy {_median(proxy_us):.0f} us, shards {_median(shard_us):.0f} us, wall {_median(wall_us):.0f} us"
          f" per ack (rounds: proxy {', '.join(f'{x:.0f}' for x in proxy_us)}; deadlocks retried {retried})")  # fmt: skip


def _row_images(cluster, payload: str, statements: int, rounds: int) -> None:
    e = cluster.endpoint("commerce", SHARDS[0])
    pid = cluster.pid("commerce", SHARDS[0])
    conn = MySQLdb.connect(host=e.host, port=e.port, user=e.user, password=e.password, database=e.database,
                           autocommit=True)  # fmt: skip
    cur = conn.cursor()
    cur.execute(f"DELETE FROM {TABLE}")
    for base in range(0, ROWS, 500):
        values = ", ".join(f"({i}, {i % 10}, '{payload}')" for i in range(base, base + 500))
        cur.execute(f"INSERT INTO {TABLE} (id, tenant_id, message) VALUES {values}")

    def binlog_position() -> int:
        cur.execute("SHOW MASTER STATUS")
        return int(cur.fetchone()[1])

    found: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for kind in ("claim", "ack"):
            for image in ("FULL", "MINIMAL"):
                if kind == "claim":
                    cur.execute(f"UPDATE {TABLE} SET time_acked = NULL")  # claimable again
                prefix = "" if image == "FULL" else "SET STATEMENT binlog_row_image=MINIMAL FOR "
                before, position = cpu_seconds(pid), binlog_position()
                for n in range(statements):
                    base = (n * BATCH) % ROWS
                    ids = ", ".join(str(i) for i in range(base, base + BATCH))
                    now = time.time_ns()
                    if kind == "claim":
                        sql = (f"UPDATE {TABLE} SET epoch = epoch + 1, time_next = {now + 60 * 10**9}"
                               f" WHERE id IN ({ids}) AND time_acked IS NULL")  # fmt: skip
                    else:
                        sql = f"UPDATE {TABLE} SET time_acked = {now}, time_next = NULL WHERE id IN ({ids})"
                    cur.execute(prefix + sql)
                rows = statements * BATCH
                found.setdefault((kind, image), []).append(
                    (1e6 * (cpu_seconds(pid) - before) / rows, (binlog_position() - position) / rows))
    conn.close()
    for (kind, image), values in found.items():
        print(f"  {kind:5} {image:7}: shard CPU {_median([v[0] for v in values]):5.1f} us/row"
              f" (rounds {', '.join(f'{v[0]:.1f}' for v in values)}), binlog {values[0][1]:.0f} B/row")  # fmt: skip


def main() -> None:
    acks = int(os.environ.get("BENCH_ACKS", "2000"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    print(f"machine: {machine()}")
    with local_cluster() as cluster:
        endpoints = {s: cluster.endpoint("commerce", s) for s in SHARDS}
        asyncio.run(_prepare(endpoints))  # a message table before the proxy starts
        with proxies(cluster, workers=1) as proxy:
            pids = [p for s in SHARDS if (p := cluster.pid("commerce", s)) is not None]
            asyncio.run(_acks(proxy, pids, acks, rounds))
        for name, payload in (("2-byte", "{}"), ("1 KB", '{"p": "' + "x" * 1000 + '"}')):
            print(f"claim / ack UPDATEs of {BATCH} rows on one shard, {name} payload, row image FULL vs MINIMAL:")
            _row_images(cluster, payload, acks, 2 * rounds)


if __name__ == "__main__":
    main()
