"""The `shardgate` streaming source: change rows from the CDC stream, VGTID offsets in Spark's
checkpoint, and exactly-once output across a kill -9 of the driver."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from proxy.cdc import Vgtid
from proxy.spark.options import SourceOptions
from proxy.spark.stream_reader import ChangeStreamReader
from tests.spark.conftest import SparkCluster
from tests.spark.spark_cluster import shard_connection

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


def current_vgtid(cluster: SparkCluster) -> str:
    """Every commerce shard's binlog position now, as a VGTID (a stream start before new writes)."""
    positions = []
    for shard, endpoint in cluster.shards().items():
        with shard_connection(endpoint) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
            positions.append({"keyspace": "commerce", "shard": shard, "gtid": cur.fetchone()[0]})
    return json.dumps(positions)


class ChangeWriter:
    """Writes single-row changes to spark_changes through the proxy and remembers each one as
    (op, id, label) — label is the row's label after the change, None for a delete."""

    def __init__(self, cluster: SparkCluster, first_id: int) -> None:
        self.cluster = cluster
        self.next_id = first_id
        self.live: list[int] = []
        self.expected: list[tuple[str, int, str | None]] = []

    def run(self, statements: int, pause: float = 0.0, stop: threading.Event | None = None) -> None:
        """`statements` changes, or (with `stop`) changes until `stop` is set."""
        with self.cluster.proxy.connect("commerce", autocommit=True) as conn, conn.cursor() as cur:
            n = -1
            while (stop is not None and not stop.is_set()) or (stop is None and n + 1 < statements):
                n += 1
                if n % 5 == 4 and self.live:
                    victim = self.live.pop(0)
                    cur.execute("DELETE FROM spark_changes WHERE id = %s", (victim,))
                    self.expected.append(("delete", victim, None))
                elif n % 3 == 2 and self.live:
                    target = self.live[-1]
                    label = f"updated-{n}"
                    cur.execute("UPDATE spark_changes SET label = %s, n = n + 1 WHERE id = %s", (label, target))
                    self.expected.append(("update", target, label))
                else:
                    row_id, self.next_id = self.next_id, self.next_id + 1
                    label = f"new-{row_id}"
                    cur.execute("INSERT INTO spark_changes (id, label, n) VALUES (%s, %s, 0)", (row_id, label))
                    self.live.append(row_id)
                    self.expected.append(("insert", row_id, label))
                if pause:
                    time.sleep(pause)


def change_key(op: str, before: str | None, after: str | None) -> tuple[str, int, str | None]:
    image = json.loads(after if after is not None else before)
    return (op, image["id"], None if after is None else image["label"])


def stream_options(cluster: SparkCluster, start: str) -> dict[str, str]:
    return {
        "url": cluster.proxy_url,
        "config": str(cluster.config_path),
        "tables": "commerce.spark_changes",
        "startingPosition": start,
    }


def test_stream_delivers_inserts_updates_and_deletes_with_their_row_images(spark, spark_cluster: SparkCluster, shard_of) -> None:  # noqa: ANN001
    start = current_vgtid(spark_cluster)
    writer = ChangeWriter(spark_cluster, first_id=1_000)
    writer.run(30)
    changes = spark.readStream.format("shardgate").options(**stream_options(spark_cluster, start)).load()
    query = changes.writeStream.format("memory").queryName("stream_changes").start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    rows = spark.sql("SELECT * FROM stream_changes").collect()
    assert Counter(change_key(r["op"], r["before"], r["after"]) for r in rows) == Counter(writer.expected)
    for r in rows:
        image = json.loads(r["after"] or r["before"])
        assert (r["keyspace"], r["table"], r["shard"]) == ("commerce", "spark_changes", shard_of(image["id"]))
        assert Vgtid.from_json(r["vgtid"]).position_of("commerce", r["shard"]) is not None


def test_reading_the_same_offset_range_twice_gives_the_same_rows(spark_cluster: SparkCluster) -> None:
    start = current_vgtid(spark_cluster)
    ChangeWriter(spark_cluster, first_id=2_000).run(20)
    reader = ChangeStreamReader(SourceOptions.parse(stream_options(spark_cluster, start)))
    start_offset, end_offset = reader.initialOffset(), reader.latestOffset()

    def read_range() -> list[tuple]:
        return [row for p in reader.partitions(start_offset, end_offset) for row in reader.read(p)]

    first = read_range()
    assert len(first) == 20
    assert read_range() == first


def test_a_stream_killed_mid_batch_resumes_from_its_checkpoint_without_duplicates_or_gaps(
    spark, spark_cluster: SparkCluster, tmp_path: Path
) -> None:  # noqa: ANN001
    start = current_vgtid(spark_cluster)
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"
    job = [
        sys.executable, "-m", "tests.spark.stream_job",
        "--url", spark_cluster.proxy_url, "--config", str(spark_cluster.config_path),
        "--checkpoint", str(checkpoint), "--output", str(output), "--start", start,
    ]  # fmt: skip
    writer = ChangeWriter(spark_cluster, first_id=10_000)
    driver = subprocess.Popen(
        [*job, "--forever"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        start_new_session=True,  # its own process group: the kill takes the JVM and workers too
    )  # fmt: skip
    started, batches_with_rows = threading.Event(), threading.Event()

    def watch() -> None:
        assert driver.stdout is not None
        for line in driver.stdout:
            if line.strip() == "started":
                started.set()
            if line.startswith("batch ") and int(line.split()[-1]) > 0:
                batches_with_rows.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        assert started.wait(120), "the streaming job did not start"
        stop_writing = threading.Event()
        writes = threading.Thread(target=writer.run, args=(0, 0.01, stop_writing))
        writes.start()
        try:
            assert batches_with_rows.wait(120), "the stream committed no batch with rows"
            time.sleep(0.7)  # into the next micro-batch, while changes keep coming
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
            time.sleep(1)  # changes made while no driver runs
        finally:
            stop_writing.set()
            writes.join()
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
    assert driver.returncode == -signal.SIGKILL

    drained = subprocess.run([*job, "--drain"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert drained.returncode == 0, drained.stderr[-3000:]

    rows = spark.read.parquet(str(output)).collect()
    identities = Counter((r["shard"], r["gtid"], r["row_in_txn"]) for r in rows)
    assert [k for k, n in identities.items() if n > 1] == []
    assert Counter(change_key(r["op"], r["before"], r["after"]) for r in rows) == Counter(writer.expected)
