"""Mirror a sharded table into a Parquet table from its change stream, then check the mirror.

    make run                                        # in another terminal
    .venv/bin/python examples/spark/cdc_mirror.py --changes 500

A Structured Streaming query reads `--table`'s CDC events (the `shardgate` stream source,
from the start of the shards' binlogs, so the mirror starts from an empty table) and merges
each micro-batch into `--out`/mirror: the last change of each primary key wins (ordered by its
shard's GTID sequence), deletes remove the key, and every merge writes a new version directory
(`v000042`) named by the batch id, so a batch Spark re-runs after a crash rewrites the same
version. With `--changes N` the job makes N random inserts/updates/deletes through the proxy
while it streams. At the end it drains the stream and compares the newest mirror version with
a batch read of the table (`shardgate` batch source): exit status 0 when they are equal.

Limits: binlogs must still hold the table's history (no purge since it was created), and a row
whose primary vindex value changes moves shards; its order against the other shard is not
known, so such updates are not supported here.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from pathlib import Path

import pymysql

REPO = Path(__file__).resolve().parents[2]


def make_changes(host: str, port: int, count: int) -> None:
    """Random single-row inserts, updates and deletes on commerce.customer."""
    rng = random.Random(7)
    conn = pymysql.connect(host=host, port=port, user="root", database="commerce", autocommit=True)
    try:
        with conn.cursor() as cur:
            for i in range(count):
                cur.execute("SELECT customer_id FROM customer ORDER BY customer_id LIMIT 200")
                ids = [r[0] for r in cur.fetchall()]
                roll = rng.random()
                if roll < 0.5 or not ids:
                    cur.execute(
                        "INSERT INTO customer (email, tenant_id, created_at) VALUES (%s, %s, NOW(6))",
                        (f"user{i}@example.com".encode(), rng.randint(1, 5)),
                    )
                elif roll < 0.8:
                    cur.execute(
                        "UPDATE customer SET tenant_id = %s, email = %s WHERE customer_id = %s",
                        (rng.randint(1, 5), f"changed{i}@example.com".encode(), rng.choice(ids)),
                    )
                else:
                    cur.execute("DELETE FROM customer WHERE customer_id = %s", (rng.choice(ids),))
                time.sleep(0.005)
    finally:
        conn.close()


def json_schema_of(schema):  # noqa: ANN001, ANN201
    """The table schema with the types the change JSON carries as strings (DECIMAL, binary as
    base64, dates and times as ISO-8601) typed as strings, for from_json."""
    from pyspark.sql import types as T

    as_string = (T.DecimalType, T.BinaryType, T.TimestampType, T.TimestampNTZType, T.DateType)
    return T.StructType(
        [T.StructField(f.name, T.StringType() if isinstance(f.dataType, as_string) else f.dataType) for f in schema]
    )


def typed_columns(schema, image: str):  # noqa: ANN001, ANN201
    """Columns of `image` (a parsed JSON struct column) converted back to the table's types."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    out = []
    for f in schema:
        col = F.col(f"{image}.{f.name}")
        if isinstance(f.dataType, T.BinaryType):
            col = F.unbase64(col)
        elif isinstance(f.dataType, T.DecimalType | T.TimestampType | T.TimestampNTZType | T.DateType):
            col = col.cast(f.dataType)
        out.append(col.alias(f.name))
    return out


class Mirror:
    def __init__(self, spark, root: Path, schema, key: str) -> None:  # noqa: ANN001
        self.spark, self.root, self.schema, self.key = spark, root, schema, key

    def versions(self, before: int | None = None) -> list[Path]:
        """Finished versions (Spark wrote _SUCCESS), oldest first; only those of earlier
        batches when `before` is given."""
        done = sorted(p.parent for p in self.root.glob("v*/_SUCCESS"))
        return [v for v in done if before is None or v.name < f"v{before:06d}"]

    def latest_version(self) -> Path | None:
        done = self.versions()
        return done[-1] if done else None

    def read(self, version: Path | None):  # noqa: ANN201
        if version is None:
            return self.spark.createDataFrame([], self.schema)
        return self.spark.read.parquet(str(version))

    def current(self):  # noqa: ANN201
        return self.read(self.latest_version())

    def merge(self, changes, batch_id: int) -> None:  # noqa: ANN001
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        if changes.isEmpty():
            return
        json_schema = json_schema_of(self.schema)
        parsed = (
            changes.withColumn("a", F.from_json("after", json_schema))
            .withColumn("b", F.from_json("before", json_schema))
            .withColumn("k", F.coalesce(F.col(f"a.{self.key}"), F.col(f"b.{self.key}")))
            .withColumn("seq", F.split("gtid", "-").getItem(2).cast("long"))
        )
        newest_first = Window.partitionBy("k").orderBy(F.col("seq").desc(), F.col("row_in_txn").desc())
        last = parsed.withColumn("rank", F.row_number().over(newest_first)).filter("rank = 1")
        upserts = last.filter("op != 'delete'").select(*typed_columns(self.schema, "a"))
        # The state before this batch: a re-run of the batch (after a crash) starts from the
        # same version and rewrites its own, so merging is idempotent.
        earlier = self.versions(before=batch_id)
        current = self.read(earlier[-1] if earlier else None)
        kept = current.join(last.select(F.col("k").alias(self.key)), self.key, "left_anti")
        merged = kept.unionByName(upserts)
        merged.write.mode("overwrite").parquet(str(self.root / f"v{batch_id:06d}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=15306)
    parser.add_argument("--config", default=str(REPO / "examples" / "local" / "cluster.yaml"))
    parser.add_argument("--table", default="commerce.customer")
    parser.add_argument("--key", default="customer_id")
    parser.add_argument("--out", default="cdc_mirror")
    parser.add_argument("--changes", type=int, default=0, help="make this many random changes while streaming")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from proxy.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("cdc-mirror")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    url = f"mysql://root@{args.host}:{args.port}"
    out = Path(args.out).resolve()

    def batch_read():  # noqa: ANN202
        return spark.read.format("shardgate").option("url", url).option("table", args.table).option("config", args.config).load()

    try:
        mirror = Mirror(spark, out / "mirror", batch_read().schema, args.key)
        changes = (
            spark.readStream.format("shardgate")
            .option("url", url)
            .option("config", args.config)
            .option("tables", args.table)
            .option("startingPosition", "beginning")
            .load()
        )
        query = (
            changes.writeStream.foreachBatch(lambda df, batch_id: mirror.merge(df, batch_id))
            .option("checkpointLocation", str(out / "checkpoint"))
            .trigger(processingTime="1 second")
            .start()
        )
        if args.changes:
            writer = threading.Thread(target=make_changes, args=(args.host, args.port, args.changes))
            writer.start()
            writer.join()
        query.processAllAvailable()
        query.stop()

        source = batch_read()
        copy = mirror.current()
        missing, extra = source.exceptAll(copy).count(), copy.exceptAll(source).count()
        print(f"mirror {mirror.latest_version()}: {copy.count()} rows; source {source.count()} rows")
        print(f"rows missing from the mirror: {missing}, rows only in the mirror: {extra}")
        return 0 if missing == 0 and extra == 0 else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main())
