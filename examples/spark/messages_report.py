"""Batch report over a message table's whole history, every shard read in parallel.

    make run                                        # in another terminal
    .venv/bin/python examples/spark/messages_report.py --seed 2000

Reads `commerce.customer_events` (acked and pending rows) with the `shardgate` data source, one
Spark partition per shard, and reports per tenant and per hour of creation:
  enqueued, delivered (acked), mean and p95 delivery delay (`time_acked` minus creation, in ms),
  retries (sum of `epoch`, the send attempts after the first) and parked messages (given up on:
  `time_next` NULL, never acked).
Writes the report as Parquet (`--out`/report.parquet) and a PNG chart (`--out`/report.png).

Creation time: the message JSON's `created_ns` when present, else the row id read as Unix
microseconds (the id scheme of examples/messaging/producer.py).
`--seed N` first enqueues N demo messages through the proxy: spread over the last 6 hours, most
acked after a random delay, some retried, some parked, some still pending.

Needs `pip install shardgate[spark]` and matplotlib; Spark's Python workers use this interpreter
(PYSPARK_PYTHON is set to it below).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import pymysql

REPO = Path(__file__).resolve().parents[2]


def seed(host: str, port: int, table: str, count: int) -> None:
    """Enqueue `count` demo messages whose ids encode their creation time (µs)."""
    rng = random.Random(42)
    now_us = time.time_ns() // 1000
    rows = []
    for i in range(count):
        created_us = now_us - rng.randrange(6 * 3600 * 1_000_000) + i  # + i keeps ids unique
        kind = rng.random()
        epoch = 0 if kind < 0.7 else rng.randint(1, 4)
        acked = None
        time_next: int | None = 0
        if kind < 0.85:  # delivered after a delay that grows with the retries
            acked = (created_us + rng.randint(5, 400) * 1000 * (1 + epoch)) * 1000
            time_next = None
        elif kind < 0.92:  # parked: retries exhausted
            epoch, time_next = 5, None
        message = json.dumps({"n": i, "created_ns": created_us * 1000})
        rows.append((created_us, epoch, time_next, acked, i % 5, message))
    keyspace, _, name = table.partition(".")
    conn = pymysql.connect(host=host, port=port, user="root", database=keyspace, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO `{name}` (id, epoch, time_next, time_acked, tenant_id, message)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                rows,
            )
    finally:
        conn.close()
    print(f"seeded {count} messages")


def report(spark, url: str, config: str, table: str):  # noqa: ANN001, ANN201
    from pyspark.sql import functions as F

    events = (
        spark.read.format("shardgate").option("url", url).option("table", table).option("config", config).load()
    )
    created_ns = F.coalesce(
        F.get_json_object("message", "$.created_ns").cast("long"), F.col("id") * F.lit(1000)
    )
    delay_ms = (F.col("time_acked") - F.col("created_ns")) / F.lit(1_000_000)
    return (
        events.withColumn("created_ns", created_ns)
        .withColumn("hour", F.date_trunc("hour", F.timestamp_micros((F.col("created_ns") / 1000).cast("long"))))
        .withColumn("delay_ms", F.when(F.col("time_acked").isNotNull(), delay_ms))
        .groupBy("tenant_id", "hour")
        .agg(
            F.count("*").alias("enqueued"),
            F.count("time_acked").alias("delivered"),
            F.avg("delay_ms").alias("mean_delay_ms"),
            F.percentile_approx("delay_ms", 0.95).alias("p95_delay_ms"),
            F.sum("epoch").alias("retries"),
            F.sum(F.when(F.col("time_acked").isNull() & F.col("time_next").isNull(), 1).otherwise(0)).alias("parked"),
        )
        .orderBy("tenant_id", "hour")
    )


def chart(rows: list, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for tenant in sorted({r["tenant_id"] for r in rows}, key=lambda t: (t is None, t)):
        mine = [r for r in rows if r["tenant_id"] == tenant]
        hours = [r["hour"] for r in mine]
        top.plot(hours, [r["enqueued"] for r in mine], marker="o", label=f"tenant {tenant} enqueued")
        bottom.plot(hours, [r["p95_delay_ms"] for r in mine], marker=".", label=f"tenant {tenant} p95")
    top.set_ylabel("messages enqueued per hour")
    bottom.set_ylabel("p95 delivery delay (ms)")
    top.legend(fontsize="small")
    bottom.legend(fontsize="small")
    fig.suptitle("customer_events per tenant and hour")
    fig.autofmt_xdate()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=15306)
    parser.add_argument("--config", default=str(REPO / "examples" / "local" / "cluster.yaml"))
    parser.add_argument("--table", default="commerce.customer_events")
    parser.add_argument("--out", default="messages_report")
    parser.add_argument("--seed", type=int, default=0, help="enqueue this many demo messages first")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from proxy.spark import register

    if args.seed:
        seed(args.host, args.port, args.table, args.seed)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("messages-report")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        result = report(spark, f"mysql://root@{args.host}:{args.port}", args.config, args.table)
        result.write.mode("overwrite").parquet(str(out / "report.parquet"))
        rows = spark.read.parquet(str(out / "report.parquet")).orderBy("tenant_id", "hour").collect()
        chart(rows, out / "report.png")
        for r in rows:
            print(
                f"tenant={r['tenant_id']} hour={r['hour']:%Y-%m-%d %H:00} enqueued={r['enqueued']}"
                f" delivered={r['delivered']} mean_ms={r['mean_delay_ms'] or 0:.1f}"
                f" p95_ms={r['p95_delay_ms'] or 0:.1f} retries={r['retries']} parked={r['parked']}"
            )
        print(f"wrote {out / 'report.parquet'} and {out / 'report.png'} ({len(rows)} tenant-hours)")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
