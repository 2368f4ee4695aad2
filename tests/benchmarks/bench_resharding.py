"""Reshard workflow: copy rate, catch-up lag under load, write stall at the switch (issue 16).

`python -m tests.benchmarks resharding` (`BENCH_RESHARD_ROWS`, default 60000 customers over the two
commerce shards, about half on `-80`). One `shardgate up` process (proxy + workflow host + its local
shards, tests/resharding/workflow_cluster.py) splits `commerce/-80` into `-40,40-80`:

- **ceiling**: `INSERT INTO copy SELECT * FROM customer` on the source shard itself (no network, no
  Python: what the server does at best), rows/s;
- **copy**: from `create` to state Running, rows/s (the `-80` rows), with the CPU seconds of the
  `up` process (the copy runs there) and of all mariadbd processes per 1000 rows (/proc, robust when
  the machine is shared);
- **catch-up lag**: under a steady write load through the proxy (`BENCH_RESHARD_RATE` rows/s), the
  time from a row's commit (the proxy's OK) to its appearance on its target shard, sampled;
- **write stall**: the writer's write latencies while `switch-traffic` runs (held writes), p99 and
  max, and the switch's own writes-stopped time.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import pymysql

from tests.benchmarks.harness import machine
from tests.conftest import mariadb_template_dir
from tests.resharding.split import run_sql
from tests.resharding.workflow_cluster import (
    UpProcess,
    Writer,
    reshard,
    shard_endpoints,
    write_cluster_file,
)
from vschema.keyrange import KeyRange
from vschema.vindexes.hash import HashVindex

ROWS = int(os.environ.get("BENCH_RESHARD_ROWS", "60000"))
RATE = float(os.environ.get("BENCH_RESHARD_RATE", "200"))
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def mariadbd_pids(data_dir: Path) -> list[int]:
    pids = []
    for pid_file in data_dir.glob("*/*/mariadbd.pid"):
        try:
            pids.append(int(pid_file.read_text().strip()))
        except (OSError, ValueError):
            pass
    return pids


def mariadbd_cpu(data_dir: Path) -> float:
    total = 0.0
    for pid in mariadbd_pids(data_dir):
        try:
            total += cpu_seconds(pid)
        except OSError:
            pass
    return total


def seed(up: UpProcess, count: int) -> None:
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            for start in range(1, count + 1, 1000):
                ids = range(start, min(start + 1000, count + 1))
                cur.execute(
                    "insert into customer (customer_id, email, tenant_id, created_at) values "
                    + ", ".join(f"({i}, 'customer{i}@example.com', {i % 97}, now(6))" for i in ids)
                )
    finally:
        conn.close()


def insert_select_ceiling(up: UpProcess) -> tuple[int, float]:
    source = shard_endpoints(up.config_path)["-80"]
    run_sql(source, "drop table if exists bench_copy", "create table bench_copy like customer")
    started = time.perf_counter()
    run_sql(source, "insert into bench_copy select * from customer")
    seconds = time.perf_counter() - started
    rows = int(run_sql(source, "select count(*) from bench_copy")[0][0])
    run_sql(source, "drop table bench_copy")
    return rows, seconds


def workflow_state(up: UpProcess) -> str:
    store = shard_endpoints(up.config_path, "lookup")["0"]
    rows = run_sql(store, "select state from _shardgate.reshard_workflow where workflow = 'split'")
    return rows[0][0].decode() if rows else ""


def copy_rows(up: UpProcess) -> int:
    store = shard_endpoints(up.config_path, "lookup")["0"]
    try:
        return int(run_sql(store, "select coalesce(sum(rows_copied), 0) from _shardgate.reshard_copy_state")[0][0])
    except pymysql.MySQLError:
        return 0


def target_of(customer_id: int) -> str:
    ksid = HashVindex("hash").keyspace_id(customer_id)
    assert ksid is not None
    return "-40" if KeyRange.parse("-40").contains(ksid) else "40-80" if KeyRange.parse("40-80").contains(ksid) else "80-"


def catch_up_lag(up: UpProcess, samples: int = 30) -> list[float]:
    """Commit a row on -80 through the proxy, time until its target shard has it."""
    endpoints = shard_endpoints(up.config_path)
    targets = {s: pymysql.connect(host=e.host, port=e.port, user=e.user, password=e.password, database=e.database,
                                  autocommit=True) for s, e in endpoints.items() if s in ("-40", "40-80")}
    proxy = up.connect()
    lags = []
    next_id = 50_000_000
    try:
        while len(lags) < samples:
            next_id += 1
            target = target_of(next_id)
            if target == "80-":
                continue
            with proxy.cursor() as cur:
                cur.execute("insert into customer (customer_id, email) values (%s, 'probe')", (next_id,))
            committed = time.perf_counter()
            with targets[target].cursor() as cur:
                while True:
                    cur.execute("select 1 from customer where customer_id = %s", (next_id,))
                    if cur.fetchone():
                        break
                    time.sleep(0.001)
            lags.append(time.perf_counter() - committed)
            time.sleep(0.05)
    finally:
        proxy.close()
        for conn in targets.values():
            conn.close()
    return lags


class PacedWriter(Writer):
    """The tests' writer, paced to about ``rate`` rows/s."""

    def __init__(self, up: UpProcess, first_id: int, rate: float) -> None:
        super().__init__(up, first_id)
        self.pause = 1.0 / rate
        self.stamps: list[tuple[float, float]] = []  # (start, seconds) per write

    def _run(self) -> None:  # the tests' loop with a pause and start times kept
        conn = self.up.connect(read_timeout=60)
        try:
            while not self._stop.is_set():
                i = self.next_id
                self.next_id += 1
                started = time.perf_counter()
                try:
                    with conn.cursor() as cur:
                        cur.execute("insert into customer (customer_id, email) values (%s, 'load')", (i,))
                    self.committed.add(i)
                except pymysql.MySQLError as e:
                    self.errors.append(f"{i}: {e}")
                self.stamps.append((started, time.perf_counter() - started))
                time.sleep(self.pause)
        finally:
            conn.close()


def main() -> None:
    print(machine())
    print("(the machine is shared with other sessions: absolute figures move; CPU per row is the steadier one)")
    with tempfile.TemporaryDirectory(prefix="shardgate-bench-reshard-") as tmp:
        work = Path(tmp)
        template = mariadb_template_dir(None, work)  # type: ignore[arg-type]
        path = write_cluster_file(work / "cluster", template)
        up = UpProcess(path, work / "up.log")
        up.start()
        try:
            seed(up, ROWS)
            rows, seconds = insert_select_ceiling(up)
            print(f"ceiling INSERT ... SELECT on the source shard: {rows} rows in {seconds:.2f} s = {rows / seconds:,.0f} rows/s")

            data_dir = up.config.local.data_dir  # type: ignore[attr-defined]
            assert up.proc is not None
            up_cpu, db_cpu = cpu_seconds(up.proc.pid), mariadbd_cpu(data_dir)
            started = time.perf_counter()
            done = reshard(path, "split", "create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--no-wait")
            assert done.returncode == 0, done.stderr
            copy_started = None
            copy_cpu = (up_cpu, db_cpu)
            while workflow_state(up) != "Running":
                if copy_started is None and copy_rows(up) > 0:
                    copy_started = time.perf_counter()
                    copy_cpu = cpu_seconds(up.proc.pid), mariadbd_cpu(data_dir)  # the copy phase's own CPU from here
                time.sleep(0.02)
            ended = time.perf_counter()
            seconds = ended - started
            up_now, db_now = cpu_seconds(up.proc.pid), mariadbd_cpu(data_dir)
            up_cpu, db_cpu = up_now - up_cpu, db_now - db_cpu
            copied = rows  # the first chunk (2000 rows) was written before copy_started: within noise
            copy_seconds = ended - (copy_started or started)
            print(
                f"copy phase (first chunk saved -> Running): {copied} rows in {copy_seconds:.2f} s = "
                f"{copied / copy_seconds:,.0f} rows/s; CPU per 1000 rows: up process "
                f"{1e6 * (up_now - copy_cpu[0]) / copied:.1f} ms, all mariadbd {1e6 * (db_now - copy_cpu[1]) / copied:.1f} ms")
            print(
                f"create -> Running (new target instances started, schema, copy): {rows} rows in {seconds:.2f} s = "
                f"{rows / seconds:,.0f} rows/s; CPU per 1000 rows: up process {1000 * up_cpu / rows * 1000:.1f} ms, "
                f"all mariadbd {1000 * db_cpu / rows * 1000:.1f} ms"
            )

            writer = PacedWriter(up, 10_000_000, RATE)
            writer.start()
            time.sleep(2.0)
            lags = sorted(catch_up_lag(up))
            print(
                f"catch-up lag under ~{RATE:.0f} writes/s: p50 {1000 * statistics.median(lags):.1f} ms, "
                f"p99 {1000 * lags[int(0.99 * (len(lags) - 1))]:.1f} ms, max {1000 * lags[-1]:.1f} ms ({len(lags)} samples)"
            )
            switch_started = time.perf_counter()
            done = reshard(path, "split", "switch-traffic")
            switch_ended = time.perf_counter()
            assert done.returncode == 0, done.stderr
            time.sleep(1.0)
            writer.stop()
            during = sorted(s for start, s in writer.stamps if switch_started <= start + s and start <= switch_ended)
            timings = next((line for line in done.stderr.splitlines() if "switch timings" in line), "")
            print(
                f"switch-traffic: {switch_ended - switch_started:.2f} s command; {timings.split('switch timings ')[-1]}; "
                f"writes overlapping it: {len(during)}, p99 {1000 * during[int(0.99 * (len(during) - 1))]:.1f} ms, "
                f"max {1000 * during[-1]:.1f} ms; write errors: {len(writer.errors)}"
            )
        finally:
            up.stop()


if __name__ == "__main__":
    threading.excepthook = lambda args: print(f"thread failed: {args.exc_value}")
    main()
