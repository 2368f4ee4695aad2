"""The worked pipeline in examples/spark runs end to end against a proxy (one command each)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.conftest import SparkCluster

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


def run_example(name: str, cluster: SparkCluster, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, str(REPO / "examples" / "spark" / name),
        "--port", str(cluster.proxy.port), "--config", str(cluster.config_path), *args,
    ]  # fmt: skip
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_messages_report_writes_a_parquet_report_and_a_png_chart(spark, spark_cluster: SparkCluster, tmp_path: Path) -> None:
    spark_cluster.truncate("spark_events")
    done = run_example("messages_report.py", spark_cluster, "--table", "commerce.spark_events", "--seed", "300", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    report = spark.read.parquet(str(tmp_path / "report.parquet"))
    assert report.groupBy().sum("enqueued").collect()[0][0] == 300
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cdc_mirror_ends_with_a_mirror_equal_to_a_batch_read(spark_cluster: SparkCluster, tmp_path: Path) -> None:
    with spark_cluster.proxy.connect("commerce", autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO spark_changes (id, label, n) VALUES (%s, %s, 0)", [(50_000 + i, f"m{i}") for i in range(20)])
        cur.execute("DELETE FROM spark_changes WHERE id = 50003")
        cur.execute("UPDATE spark_changes SET n = 7 WHERE id = 50004")
    done = run_example("cdc_mirror.py", spark_cluster, "--table", "commerce.spark_changes", "--key", "id", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "rows missing from the mirror: 0, rows only in the mirror: 0" in done.stdout
