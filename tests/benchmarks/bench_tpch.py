"""TPC-H through the proxy vs one MariaDB holding the same rows, same run.

    python -m tests.benchmarks tpch      # BENCH_TPCH_SF=0.1 BENCH_ROUNDS=3 BENCH_TPCH_QUERIES=1,6,...

Keyspace `tpch` on 2 shards (tables sharded by the hash vindex on their keys, nation/region
reference tables) and one plain MariaDB (`tpch_oracle`) with every row, all loaded from dbgen
data cached under .shardgate/tpch (see tests/tpch/). Every server gets a buffer pool that holds
its data, so both sides answer from memory.

A first round runs each query directly, then through the proxy (PyMySQL, values as text), and
compares the answers exactly as tests/tpch does: an error, a timeout (20x the direct time,
at least BENCH_TPCH_MIN_TIMEOUT s) or a wrong answer is a failure, printed, and that query is
not timed. Then BENCH_ROUNDS timed rounds (mysqlclient), the two sides interleaved query by
query, alternating which goes first; the median per query and side is reported, with the
ratio proxy/direct, the geometric mean of the ratios and the worst one.
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import MySQLdb

from tests.benchmarks.harness import machine
from tests.proxy_process import ProxyProcess
from tests.tpch.cluster import TpchCluster, connect, load, make_cluster
from tests.tpch.compare import differences, raw_connect, run
from tests.tpch.datagen import generate
from tests.tpch.queries import ORDER_KEYS, query

TARGET_GEOMEAN = 2.0
TARGET_WORST = 10.0
BUFFER_POOL = "512M"


def _mysqldb(host: str, port: int, user: str, password: str, db: str, timeout: float) -> MySQLdb.Connection:
    return MySQLdb.connect(host=host, port=port, user=user, passwd=password, db=db, autocommit=True,
                           read_timeout=max(1, math.ceil(timeout)))


def _timed(conn: MySQLdb.Connection, sql: str) -> float:
    cur = conn.cursor()
    t0 = time.perf_counter()
    cur.execute(sql)
    cur.fetchall()
    elapsed = time.perf_counter() - t0
    cur.close()
    return elapsed


def _kill_running(tc: TpchCluster) -> None:
    """After a client timeout: end the statements the proxy left running on the shards."""
    for ep in tc.shards.values():
        conn = connect(ep)
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM information_schema.processlist WHERE db = %s AND command = 'Query' "
                        "AND id <> CONNECTION_ID()", (ep.database,))
            for (pid,) in cur.fetchall():
                try:
                    cur.execute(f"KILL QUERY {int(pid)}")
                except Exception:  # noqa: BLE001 - it may have ended meanwhile
                    pass
        conn.close()


class Runner:
    def __init__(self, tc: TpchCluster, sf: float) -> None:
        self.tc = tc
        self.sf = sf
        self.proxy: ProxyProcess = tc.start_proxy({"SHARDGATE_LOG_LEVEL": "WARNING"})

    def restart_proxy(self) -> None:
        self.tc.stop_proxy(self.proxy)
        _kill_running(self.tc)
        self.proxy = self.tc.start_proxy({"SHARDGATE_LOG_LEVEL": "WARNING"})

    def check(self, n: int, min_timeout: float) -> tuple[float, str | None]:
        """Run query n on both sides once (warm-up); returns (direct seconds, failure or None)."""
        sql = query(n, self.sf)
        o = self.tc.oracle
        t0 = time.perf_counter()
        with raw_connect(host=o.host, port=o.port, user=o.user, password=o.password, database=o.database) as c:
            theirs = run(c, sql)
        direct = time.perf_counter() - t0
        timeout = max(min_timeout, 20 * direct)
        p = self.proxy
        t1 = time.perf_counter()
        try:
            with raw_connect(host=p.host, port=p.port, user="root", password="", database="tpch",
                             read_timeout=timeout) as c:
                ours = run(c, sql)
        except Exception as e:  # noqa: BLE001 - every failure is reported, none ends the run
            if time.perf_counter() - t1 >= timeout * 0.99:
                self.restart_proxy()
                return direct, f"timeout after {timeout:.0f} s"
            return direct, f"{type(e).__name__}: {e}"
        problems = differences(ours, theirs, ORDER_KEYS[n])
        return direct, ("wrong answer: " + "; ".join(problems)) if problems else None


def main() -> None:
    sf = float(os.environ.get("BENCH_TPCH_SF", "0.1"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    min_timeout = float(os.environ.get("BENCH_TPCH_MIN_TIMEOUT", "60"))
    wanted = os.environ.get("BENCH_TPCH_QUERIES")
    numbers = [int(x) for x in wanted.split(",")] if wanted else list(range(1, 23))
    print(f"machine: {machine()}")
    t0 = time.monotonic()
    data = generate(sf)
    print(f"TPC-H SF {sf:g}: {sum(data.row_counts.values()):,} rows, data ready in {time.monotonic() - t0:.1f} s "
          f"({data.path})", flush=True)
    with tempfile.TemporaryDirectory(prefix="shardgate-bench-tpch-") as tmp:
        tc = make_cluster(Path(tmp))
        asyncio.run(tc.cluster.start())
        runner = None
        try:
            for ep in tc.servers():
                conn = connect(ep)
                with conn.cursor() as cur:
                    cur.execute(f"SET GLOBAL innodb_buffer_pool_size = {int(BUFFER_POOL[:-1]) << 20}")
                conn.close()
            seconds = load(tc, data)
            print(f"loaded 2 shards + 1 oracle server in {seconds:.1f} s; buffer pool {BUFFER_POOL} each; "
                  f"{rounds} timed rounds", flush=True)
            runner = Runner(tc, sf)
            _bench(runner, numbers, rounds, min_timeout)
        finally:
            if runner is not None:
                tc.stop_proxy(runner.proxy)
            asyncio.run(tc.cluster.stop())


def _bench(runner: Runner, numbers: list[int], rounds: int, min_timeout: float) -> None:
    failures: dict[int, str] = {}
    direct_first: dict[int, float] = {}
    for n in numbers:
        direct_first[n], failure = runner.check(n, min_timeout)
        if failure:
            failures[n] = failure
            print(f"q{n}: FAILED {failure[:300]}", flush=True)
    timed = [n for n in numbers if n not in failures]
    o, p = runner.tc.oracle, runner.proxy
    proxy_times: dict[int, list[float]] = {n: [] for n in timed}
    direct_times: dict[int, list[float]] = {n: [] for n in timed}
    for r in range(rounds):
        dconn = _mysqldb(o.host, o.port, o.user, o.password, o.database, 3600)
        for n in timed:
            if n in failures:
                continue
            sql = query(n, runner.sf)
            pconn = None
            try:
                pconn = _mysqldb(p.host, p.port, "root", "", "tpch", max(min_timeout, 20 * direct_first[n]))
                sides = [("proxy", pconn, proxy_times), ("direct", dconn, direct_times)]
                for _side, conn, out in sides if r % 2 == 0 else sides[::-1]:
                    out[n].append(_timed(conn, sql))
            except MySQLdb.Error as e:
                failures[n] = f"round {r + 1}: {type(e).__name__}: {e}"
                print(f"q{n}: FAILED {failures[n][:300]}", flush=True)
                runner.restart_proxy()
                p = runner.proxy
            finally:
                if pconn is not None:
                    pconn.close()
        dconn.close()
    _report(numbers, failures, proxy_times, direct_times)


def _report(numbers: list[int], failures: dict[int, str], proxy_times: dict[int, list[float]],
            direct_times: dict[int, list[float]]) -> None:
    print()
    print(f"{'query':<7}{'proxy s':>10}{'direct s':>10}{'ratio':>8}")
    ratios: dict[int, float] = {}
    for n in numbers:
        if n in failures:
            print(f"q{n:<6}{'-':>10}{'-':>10}{'-':>8}  FAILED: {failures[n][:200]}")
            continue
        pm, dm = statistics.median(proxy_times[n]), statistics.median(direct_times[n])
        ratios[n] = pm / dm if dm > 0 else float("inf")
        print(f"q{n:<6}{pm:10.3f}{dm:10.3f}{ratios[n]:8.2f}")
    print()
    if ratios:
        geomean = math.exp(statistics.fmean(math.log(r) for r in ratios.values()))
        worst = max(ratios, key=lambda n: ratios[n])
        total_p = sum(statistics.median(proxy_times[n]) for n in ratios)
        total_d = sum(statistics.median(direct_times[n]) for n in ratios)
        print(f"{len(ratios)} timed, {len(failures)} failed; total {total_p:.2f} s proxy vs {total_d:.2f} s direct")
        print(f"geometric mean of ratios: {geomean:.2f} (target <= {TARGET_GEOMEAN}); "
              f"worst: q{worst} {ratios[worst]:.2f} (target <= {TARGET_WORST})")
        met = not failures and geomean <= TARGET_GEOMEAN and ratios[worst] <= TARGET_WORST
    else:
        print(f"0 timed, {len(failures)} failed")
        met = False
    print(f"targets {'met' if met else 'NOT met'}" + (f" ({len(failures)} queries failed)" if failures else ""))


if __name__ == "__main__":
    main()
