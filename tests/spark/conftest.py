"""Spark fixtures: a local[2] SparkSession with the MariaDB JDBC jar, and a proxy over the
session's local cluster that also knows the Spark tests' own tables (see `spark_cluster`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark  # noqa: F401  - fail loudly when `pip install .[spark]` was not run
import pytest

from proxy.cluster import LocalCluster
from proxy.config import ShardEndpoint
from proxy.spark import register
from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy
from tests.spark.session import MARIADB_JDBC_JAR, spark_session_builder
from tests.spark.spark_cluster import (
    add_spark_tables_to_vschema,
    create_spark_tables,
    shard_connection,
    write_spark_cluster_yaml,
)

JDBC_DRIVER = "org.mariadb.jdbc.Driver"

@dataclass
class SparkCluster:
    """What the Spark tests run against: the proxy, the shards behind it and the YAML naming them."""

    proxy: ProxyProcess
    config_path: Path
    cluster: LocalCluster

    def shards(self, keyspace: str = "commerce") -> dict[str, ShardEndpoint]:
        return {
            shard: endpoint
            for (ks, shard), endpoint in sorted(self.cluster.endpoints.items())
            if ks == keyspace
        }

    def jdbc_url(self, database: str = "commerce") -> str:
        return f"jdbc:mysql://{self.proxy.host}:{self.proxy.port}/{database}"

    def jdbc_options(self, database: str = "commerce") -> dict[str, str]:
        return {"url": self.jdbc_url(database), "driver": JDBC_DRIVER, "user": "root", "password": ""}

    def shard_jdbc_options(self, shard: str, keyspace: str = "commerce") -> dict[str, str]:
        e = self.shards(keyspace)[shard]
        return {
            "url": f"jdbc:mysql://{e.host}:{e.port}/{e.database}",
            "driver": JDBC_DRIVER,
            "user": e.user,
            "password": e.password,
        }

    @property
    def proxy_url(self) -> str:
        return f"mysql://root@{self.proxy.host}:{self.proxy.port}"

    def shard_rows(self, table: str, columns: str = "*", keyspace: str = "commerce") -> dict[str, list[tuple]]:
        """Every row of `table` on each shard, read directly from the shard, ordered by id."""
        out: dict[str, list[tuple]] = {}
        for shard, endpoint in self.shards(keyspace).items():
            with shard_connection(endpoint) as conn, conn.cursor() as cur:
                cur.execute(f"SELECT {columns} FROM `{table}` ORDER BY id")
                out[shard] = list(cur.fetchall())
        return out

    def truncate(self, table: str, keyspace: str = "commerce") -> None:
        for endpoint in self.shards(keyspace).values():
            with shard_connection(endpoint) as conn, conn.cursor() as cur:
                cur.execute(f"TRUNCATE TABLE `{table}`")


@pytest.fixture(scope="session")
def spark_cluster(local_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    work = tmp_path_factory.mktemp("spark-cluster")
    config_path = write_spark_cluster_yaml(local_cluster.config, work)
    create_spark_tables([e for (ks, _), e in local_cluster.endpoints.items() if ks == "commerce"])
    proxy = start_proxy(config_path, local_cluster.endpoints, work / "proxy.log")
    try:
        add_spark_tables_to_vschema(proxy)
        yield SparkCluster(proxy=proxy, config_path=config_path, cluster=local_cluster)
    finally:
        stop_proxy(proxy)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    if not MARIADB_JDBC_JAR.exists():
        pytest.fail(f"{MARIADB_JDBC_JAR} is missing: apt-get install libmariadb-java")
    session = spark_session_builder("shardgate-tests").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


def item_row(i: int) -> tuple:
    """Row `i` of the seeded `spark_items` table; every tenth row has NULLs in its nullable columns."""
    from datetime import date, datetime, timedelta
    from decimal import Decimal

    if i % 10 == 0:
        return (i, f"item-{i}", None, None, None, None, None, None, None, None, None)
    return (
        i,
        f"item-{i}",
        Decimal(i * 125) / 100,
        i % 7,
        (i % 100) - 50,
        2**63 + i,
        i / 3,
        datetime(2026, 1, 1, 8, 30) + timedelta(minutes=i, microseconds=i * 7),
        date(2026, 1, 1) + timedelta(days=i),
        f'{{"i": {i}, "tags": ["t{i % 3}"]}}',
        bytes([i % 256, 0, 255, 10]),
    )


ITEM_COLUMNS = "id, name, price, qty, small, big_unsigned, ratio, created, day, attrs, payload"
ITEM_COUNT = 200


@pytest.fixture(scope="session")
def seeded_items(spark_cluster: SparkCluster) -> SparkCluster:
    """`spark_items` holding rows 1..ITEM_COUNT, inserted through the proxy (so on their shards)."""
    spark_cluster.truncate("spark_items")
    rows = [item_row(i) for i in range(1, ITEM_COUNT + 1)]
    with spark_cluster.proxy.connect("commerce", autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO spark_items ({ITEM_COLUMNS}) VALUES ({', '.join(['%s'] * 11)})", rows)
    return spark_cluster


@pytest.fixture(scope="session")
def commerce_vschema(spark_cluster: SparkCluster):  # noqa: ANN201
    from proxy.config import load_config
    from vschema.loader import build_vschema

    config = load_config(spark_cluster.config_path)
    return build_vschema({n: (ks.vschema, list(ks.shards)) for n, ks in config.keyspaces.items()})


@pytest.fixture(scope="session")
def shard_of(commerce_vschema):  # noqa: ANN001, ANN201
    """id -> the commerce shard its hash vindex picks (the tables here all shard by `id`)."""
    vindex = commerce_vschema.find_table("spark_sink", "commerce").primary_vindex.vindex

    def pick(row_id: int) -> str:
        return commerce_vschema.shard_for("commerce", vindex.keyspace_id(row_id))

    return pick
