"""Spark full-table read of a 1M-row sharded table, three ways, in one run:

  (a) Spark JDBC through the proxy, one partition (the plain `spark.read.jdbc` a user writes)
  (b) the `shardgate` data source: one partition per shard, shard-targeted through the proxy
  (c) Spark JDBC directly against each shard (one partition per shard, no proxy): the ceiling

Each read is materialised with Spark's `noop` sink (every row and column decoded, nothing
written); best of `SHARDGATE_BENCH_SPARK_RUNS` (default 3) rounds after a warm-up; the readers take
turns within each round. The table is
loaded straight into the shards (rows placed by the hash vindex), not through the proxy.

    python -m tests.benchmarks spark          # SHARDGATE_BENCH_SPARK_ROWS=1000000 by default
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import MySQLdb
import MySQLdb.cursors

from proxy.config import load_config
from proxy.spark import register
from tests.benchmarks.harness import local_cluster, machine
from tests.proxy_process import free_port, start_proxy, stop_proxy
from tests.spark.session import spark_session_builder
from tests.spark.spark_cluster import create_spark_tables, write_spark_cluster_yaml
from vschema.loader import build_vschema

ROWS = int(os.environ.get("SHARDGATE_BENCH_SPARK_ROWS", "1000000"))
RUNS = int(os.environ.get("SHARDGATE_BENCH_SPARK_RUNS", "3"))
# Proxy processes sharing the port (SO_REUSEPORT), like `shardgate up --workers N`.
PROXY_WORKERS = int(os.environ.get("SHARDGATE_BENCH_SPARK_PROXY_WORKERS", "1"))
INSERT_BATCH = 5_000
JDBC_DRIVER = "org.mariadb.jdbc.Driver"


def load_rows(config, endpoints: dict, rows: int) -> None:  # noqa: ANN001
    """`rows` rows of spark_bench, each inserted directly on the shard its hash vindex picks."""
    vschema = build_vschema({n: (ks.vschema, list(ks.shards)) for n, ks in config.keyspaces.items()})
    vindex = vschema.find_table("spark_bench", "commerce").primary_vindex.vindex
    conns = {
        shard: MySQLdb.connect(host=e.host, port=e.port, user=e.user, passwd=e.password, db=e.database)
        for (ks, shard), e in endpoints.items()
        if ks == "commerce"
    }
    pending: dict[str, list[str]] = {shard: [] for shard in conns}
    base = datetime(2026, 1, 1)

    def flush(shard: str) -> None:
        if pending[shard]:
            cur = conns[shard].cursor()
            cur.execute("INSERT INTO spark_bench (id, tenant_id, amount, label, created) VALUES " + ",".join(pending[shard]))
            conns[shard].commit()
            pending[shard] = []

    for i in range(1, rows + 1):
        shard = vschema.shard_for("commerce", vindex.keyspace_id(i))
        created = (base + timedelta(seconds=i)).isoformat(sep=" ")
        pending[shard].append(f"({i},{i % 100},{i % 100000}.{i % 100:02d},'label-{i % 1000}','{created}.{i % 1000000:06d}')")
        if len(pending[shard]) >= INSERT_BATCH:
            flush(shard)
    for shard in conns:
        flush(shard)
        conns[shard].close()


def raw_fetch_rate(host: str, port: int, database: str) -> float:
    """Rows/s of a plain mysqlclient full fetch of spark_bench (no Spark): where the time goes."""
    conn = MySQLdb.connect(host=host, port=port, user="root", passwd="", db=database, conv={})
    try:
        started = time.perf_counter()
        cur = conn.cursor(MySQLdb.cursors.SSCursor)
        cur.execute("SELECT id, tenant_id, amount, label, created FROM spark_bench")
        n = 0
        while rows := cur.fetchmany(10_000):
            n += len(rows)
        cur.close()
        return n / (time.perf_counter() - started)
    finally:
        conn.close()


def timed_best(reads: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Seconds of the fastest of `runs` full reads of each reader.

    Every reader is warmed up first (JIT, Python workers), then the readers take turns round
    by round, so a slow spell of the shared machine falls on all of them alike."""
    for read in reads.values():
        read()
    best = dict.fromkeys(reads, float("inf"))
    for _ in range(runs):
        for name, read in reads.items():
            started = time.perf_counter()
            read()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def main() -> None:
    print(machine())
    with local_cluster() as cluster, tempfile.TemporaryDirectory(prefix="shardgate-bench-spark-") as tmp:
        config_path = write_spark_cluster_yaml(cluster.config, Path(tmp))
        commerce = {key: e for key, e in cluster.endpoints.items() if key[0] == "commerce"}
        create_spark_tables(list(commerce.values()), ["spark_bench"])
        started = time.perf_counter()
        load_rows(load_config(config_path), cluster.endpoints, ROWS)
        print(f"loaded {ROWS} rows into {len(commerce)} shards in {time.perf_counter() - started:.1f}s")
        port = free_port()
        workers = [
            start_proxy(config_path, cluster.endpoints, Path(tmp) / "proxy.log", port=port, extra_env={"SHARDGATE_LOG_LEVEL": "WARNING"})
            for _ in range(PROXY_WORKERS)
        ]
        proxy = workers[0]
        spark = spark_session_builder("shardgate-bench").config("spark.driver.memory", "2g").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        try:
            proxy_jdbc = {"url": f"jdbc:mysql://{proxy.host}:{proxy.port}/commerce", "driver": JDBC_DRIVER, "user": "root", "password": ""}

            def jdbc_via_proxy() -> None:
                spark.read.format("jdbc").options(**proxy_jdbc, dbtable="spark_bench").load().write.format("noop").mode("overwrite").save()

            def data_source() -> None:
                (
                    spark.read.format("shardgate")
                    .option("url", f"mysql://root@{proxy.host}:{proxy.port}")
                    .option("table", "commerce.spark_bench")
                    .option("config", str(config_path))
                    .load()
                    .write.format("noop").mode("overwrite").save()
                )

            def jdbc_direct() -> None:
                frames = [
                    spark.read.format("jdbc")
                    .options(url=f"jdbc:mysql://{e.host}:{e.port}/{e.database}", driver=JDBC_DRIVER, user=e.user, password=e.password, dbtable="spark_bench")
                    .load()
                    for e in commerce.values()
                ]
                union = frames[0]
                for f in frames[1:]:
                    union = union.unionAll(f)
                union.write.format("noop").mode("overwrite").save()

            shard, endpoint = next((k[1], e) for k, e in commerce.items())
            fetch_direct = raw_fetch_rate(endpoint.host, endpoint.port, endpoint.database)
            fetch_targeted = raw_fetch_rate(proxy.host, proxy.port, f"commerce:{shard}")
            results = timed_best(
                {
                    "(a) JDBC via proxy, 1 partition": jdbc_via_proxy,
                    "(b) shardgate data source, 1 partition/shard": data_source,
                    "(c) JDBC direct to shards, 1 partition/shard": jdbc_direct,
                },
                RUNS,
            )
        finally:
            spark.stop()
            for worker in workers:
                stop_proxy(worker)
    print(
        f"full read of {ROWS} rows (5 columns: BIGINT x2, DECIMAL, VARCHAR, DATETIME(6)), local[2],"
        f" {PROXY_WORKERS} proxy process(es), best of {RUNS}"
    )
    for name, seconds in results.items():
        print(f"  {name:48s} {seconds:7.2f}s {ROWS / seconds:>12,.0f} rows/s")
    a, b, c = results.values()
    print(f"  ratio (b)/(c) = {c / b:.2f}  (target >= 0.80)")
    print(f"  ratio (a)/(c) = {c / a:.2f}")
    print(f"  ratio (b)/(a) = {a / b:.2f}")
    print("one shard's rows fetched by mysqlclient alone (no Spark, one connection):")
    print(f"  direct to the shard                          {fetch_direct:>12,.0f} rows/s")
    print(f"  shard-targeted session through the proxy     {fetch_targeted:>12,.0f} rows/s")


if __name__ == "__main__":
    main()
