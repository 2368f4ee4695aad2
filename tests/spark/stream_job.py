"""A Spark driver the streaming tests start (and kill -9): the change stream of
commerce.spark_changes into a Parquet directory, with a checkpoint.

    python -m tests.spark.stream_job --url mysql://root@127.0.0.1:PORT --config cluster.yaml \
        --checkpoint DIR --output DIR --start VGTID_JSON (--forever | --drain)

--forever runs micro-batches every 0.5 s until killed; --drain processes everything the shards
hold now and exits 0. It prints `started` once the query runs, then `batch N rows M` per finished batch.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from proxy.spark import register
from tests.spark.session import spark_session_builder

logger = logging.getLogger("stream_job")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--start", default="current")
    parser.add_argument("--tables", default="commerce.spark_changes")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--forever", action="store_true")
    mode.add_argument("--drain", action="store_true")
    args = parser.parse_args(argv)

    spark = spark_session_builder("shardgate-stream-job").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    changes = (
        spark.readStream.format("shardgate")
        .option("url", args.url)
        .option("config", args.config)
        .option("tables", args.tables)
        .option("startingPosition", args.start)
        .load()
    )
    query = (
        changes.writeStream.format("parquet")
        .option("path", args.output)
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    sys.stdout.write("started\n")
    sys.stdout.flush()
    try:
        if args.drain:
            query.processAllAvailable()
        else:
            seen = -1
            while query.isActive:
                progress = query.lastProgress
                if progress is not None and progress["batchId"] != seen:
                    seen = progress["batchId"]
                    sys.stdout.write(f"batch {seen} rows {progress['numInputRows']}\n")
                    sys.stdout.flush()
                time.sleep(0.1)
    finally:
        query.stop()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
