"""The fast path (proxy.fast_path) against the normal path, in one run: two proxy processes on one
cluster, one with ``SHARDGATE_FAST_PATH=0``, measured in alternating rounds so both see the same
load on a shared machine. Per statement kind: QPS and the proxy's CPU per query, user and system
(from /proc/<pid>/stat), 8 clients.

Statement kinds: a point select, a single-row INSERT and a scatter select of a plain session; a
point select of a session that SET sql_mode and time_zone at connect (as JDBC drivers and ORMs
do); a point select as a server-side prepared statement (mysql-connector, pure Python:
COM_STMT_EXECUTE); a select in the unsharded keyspace and a point select of a shard-targeted
session (``USE commerce:-80``); autocommit writes reaching both shards: a 100-row INSERT (the messaging
producers' statement) and an UPDATE of 50 ids by an IN-list (the shape of a message ack).

    python -m tests.benchmarks fast_path     # BENCH_SECONDS=3 BENCH_ROUNDS=3 BENCH_CLIENTS=8
    BENCH_KINDS="point select,prepared point select" python -m tests.benchmarks fast_path
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import mysql.connector
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
KINDS = (
    "point select", "insert", "scatter select", "SET session point select", "prepared point select",
    "unsharded select", "targeted point select", "two-shard insert", "two-shard update",
)


class _PreparedClient:
    """A mysql-connector connection whose cursors are server-side prepared statements (the
    shape ``closed_loop`` expects of a connection)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def cursor(self) -> Any:
        return self.conn.cursor(prepared=True)

    def close(self) -> None:
        self.conn.close()


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

        def connector(proxy: ProxyGroup, db: str = "commerce", **kw: Any) -> Callable[[], MySQLdb.Connection]:
            return lambda: MySQLdb.connect(host=proxy.host, port=proxy.port, user="root", passwd="", db=db,
                                           autocommit=True, **kw)

        def prepared_connector(proxy: ProxyGroup) -> Callable[[], Any]:
            return lambda: _PreparedClient(mysql.connector.connect(
                host=proxy.host, port=proxy.port, user="root", password="", database="commerce", autocommit=True))

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

        def two_shard_insert(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            first = next_id[0] = next_id[0] + 100
            cur.execute("insert into customer(customer_id, email, tenant_id) values "
                        + ", ".join(f"({i}, 'new@example.com', {i % 10})" for i in range(first, first + 100)))

        def two_shard_update(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            # Each client its own 600 rows (closed_loop's n starts at client * 1_000_003): two
            # clients locking the same rows on both shards in opposite orders would wait for
            # each other until the lock wait timeout (no shard sees the cycle).
            client, k = divmod(n, 1_000_003)
            first = client * 600 + k * 50 % 550 + 1
            cur.execute(f"update customer set tenant_id = {n % 17} where customer_id in ("
                        + ", ".join(str(i) for i in range(first, first + 50)) + ")")

        def scatter(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            # ~300 rows from each shard (tenant 1 is the one the inserts grow: left out)
            cur.execute("select customer_id, email from customer where tenant_id = %s", (n % 16 + 2,))
            cur.fetchall()

        def prepared_point_select(cur: Any, n: int) -> None:
            cur.execute("select customer_id, email, tenant_id from customer where customer_id = ?", (n % ROWS + 1,))
            cur.fetchall()

        def unsharded_select(cur: MySQLdb.cursors.Cursor, n: int) -> None:
            cur.execute("select sku, description, price from product where sku = %s", (f"SKU-100{n % 4 + 1}",))
            cur.fetchall()

        settings = "SET sql_mode = 'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION', time_zone = '+00:00'"
        kinds: dict[str, tuple[Callable[[ProxyGroup], Callable[[], Any]], Callable[[Any, int], None]]] = {
            "point select": (connector, point_select),
            "insert": (connector, insert),
            "scatter select": (connector, scatter),
            "SET session point select": (lambda p: connector(p, init_command=settings), point_select),
            "prepared point select": (prepared_connector, prepared_point_select),
            "unsharded select": (lambda p: connector(p, db="lookup"), unsharded_select),
            # Every id asked for: the rows on -80 are found, the others not (each a one-shard answer).
            "targeted point select": (lambda p: connector(p, db="commerce:-80"), point_select),
            "two-shard insert": (connector, two_shard_insert),
            "two-shard update": (connector, two_shard_update),
        }
        chosen = [k.strip() for k in os.environ.get("BENCH_KINDS", ",".join(KINDS)).split(",")]
        for name in chosen:
            connect, op = kinds[name]
            for proxy in paths.values():
                closed_loop(connect(proxy), op, 2, 0.5)  # plans cached, pools and links open
            for _ in range(rounds):
                for path, proxy in paths.items():
                    pid = proxy.proc.pid
                    user0, system0 = cpu_times(pid)
                    r = closed_loop(connect(proxy), op, clients, seconds)
                    user1, system1 = cpu_times(pid)
                    n = max(r.count, 1)
                    print(f"{name:<26}{path:<12} {r.qps:7.0f} qps  proxy CPU {(user1 - user0 + system1 - system0) * 1e6 / n:7.1f}"
                          f" µs/query (user {(user1 - user0) * 1e6 / n:6.1f}, system {(system1 - system0) * 1e6 / n:5.1f})"
                          + (f"  errors {r.errors}" if r.errors else "") + f"  load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
