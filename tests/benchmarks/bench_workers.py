"""One proxy worker against ``--workers 2``, on each event loop, in the same run (issue 15:
two workers must not cost more CPU per query than one).

Groups of proxy processes over one cluster, started afresh for each measurement and
measured by turns (round 1: every group, round 2: every group, ...), so that a shared
machine's load falls on all of them alike. Per group and statement: proxy CPU per
statement (user + system from /proc/<pid>/stat, every process of the group summed),
context switches per statement (voluntary + involuntary, /proc/<pid>/status), QPS, and
how the CPU split between the workers.

    python -m tests.benchmarks workers
    # BENCH_GROUPS=1:asyncio,2:asyncio,1:uvloop,2:uvloop BENCH_ROUNDS=3 BENCH_SECONDS=3 BENCH_CLIENTS=8
    # BENCH_STATEMENTS=select,insert; a group "2:asyncio+SHARDGATE_PIN_WORKERS=0" adds environment entries
"""

from __future__ import annotations

import os
from pathlib import Path

import MySQLdb

from tests.benchmarks.harness import closed_loop, cpu_times, local_cluster, machine, proxies

ROWS = 20_000


def context_switches(*pids: int) -> tuple[int, int]:
    """Voluntary and involuntary context switches of ``pids`` so far (/proc/<pid>/status)."""
    voluntary = involuntary = 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("voluntary_ctxt_switches:"):
                voluntary += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                involuntary += int(line.split()[1])
    return voluntary, involuntary


def main() -> None:
    seconds = float(os.environ.get("BENCH_SECONDS", "3"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    clients = int(os.environ.get("BENCH_CLIENTS", "8"))
    groups = [(int(w), loop) for w, loop in (g.split(":", 1) for g in
              os.environ.get("BENCH_GROUPS", "1:asyncio,2:asyncio,1:uvloop,2:uvloop").split(","))]
    statements = os.environ.get("BENCH_STATEMENTS", "select,insert").split(",")
    print(f"machine: {machine()}")
    print(f"{clients} clients, {seconds:.0f} s per measurement, {rounds} rounds of {groups}")
    results: dict[tuple[int, str, str], list[str]] = {}
    with local_cluster() as cluster:
        with proxies(cluster, workers=1) as loader:
            conn = loader.connect("commerce", autocommit=True)
            with conn.cursor() as cur:
                for start in range(1, ROWS + 1, 500):
                    values = ",".join(f"({i}, 'user{i}@example.com', {i % 17})"
                                      for i in range(start, min(start + 500, ROWS + 1)))
                    cur.execute(f"insert into customer(customer_id, email, tenant_id) values {values}")
            conn.close()

        def select(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            cur.execute("select customer_id, email, tenant_id from customer where customer_id = %s", (n % ROWS + 1,))
            cur.fetchall()

        insert_base = [10_000_000]

        def insert(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            cur.execute("insert into customer(customer_id, email, tenant_id) values (%s, 'new@example.com', 1)",
                        (insert_base[0] + n,))

        ops = [(n, o) for n, o in (("point select", select), ("insert", insert)) if n.split()[-1] in statements]
        for r in range(rounds):
            for workers, loop in groups:
                # "loop+NAME=VALUE+...": extra environment entries of the group's processes
                loop_name, *extra = loop.split("+")
                env = {"SHARDGATE_EVENT_LOOP": loop_name, **dict(e.split("=", 1) for e in extra)}
                with proxies(cluster, workers=workers, env=env) as group:
                    def connect() -> MySQLdb.Connection:
                        return MySQLdb.connect(host=group.host, port=group.port, user="root", passwd="",  # noqa: B023
                                               db="commerce", autocommit=True)

                    closed_loop(connect, select, clients, 1)  # warm the plan cache and the links
                    for name, op in ops:
                        insert_base[0] += 100_000_000
                        pids = group.pids
                        cpu0 = [cpu_times(p) for p in pids]
                        cs0 = context_switches(*pids)
                        res = closed_loop(connect, op, clients, seconds)
                        times = [cpu_times(p) for p in pids]
                        user = sum(t[0] - t0[0] for t, t0 in zip(times, cpu0, strict=True))
                        cpu = [t[0] + t[1] - t0[0] - t0[1] for t, t0 in zip(times, cpu0, strict=True)]
                        cs1 = context_switches(*pids)
                        cs, inv = cs1[0] - cs0[0], cs1[1] - cs0[1]
                        n = max(res.count, 1)
                        split = "/".join(f"{c / max(sum(cpu), 1e-9):.2f}" for c in cpu)
                        line = (f"{sum(cpu) * 1e6 / n:6.1f} µs (user {user * 1e6 / n:5.1f})  {cs / n:4.2f}+{inv / n:4.2f} cs  {res.qps:6.0f} qps  split {split}"
                                + (f"  errors {res.errors}" if res.errors else ""))
                        results.setdefault((workers, loop, name), []).append(line)
                        print(f"round {r + 1}  {workers} worker(s) {loop:<8} {name:<13} {line}", flush=True)
    print("\nsummary: proxy CPU per statement, context switches per statement, QPS, CPU split between workers")
    for (workers, loop, name), lines in sorted(results.items(), key=lambda kv: (kv[0][2], kv[0][1], kv[0][0])):
        for line in lines:
            print(f"{name:<13} {workers} worker(s) {loop:<8} {line}")


if __name__ == "__main__":
    main()
