"""The `shardgate` data source: batch reads one partition per shard, exact types, shard pruning
by the primary vindex, and writes that put each row on its vindex's shard."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from tests.spark.conftest import ITEM_COLUMNS, ITEM_COUNT, SparkCluster, item_row

pytestmark = pytest.mark.spark


def shardgate_read(spark, cluster: SparkCluster, table: str = "commerce.spark_items", **options: str):  # noqa: ANN001, ANN201
    reader = spark.read.format("shardgate").option("url", cluster.proxy_url).option("table", table)
    reader = reader.option("config", str(cluster.config_path))
    return reader.options(**options).load()


def spark_values(row) -> tuple:  # noqa: ANN001
    """A Spark row as the tuple the shard returns (JSON text compared as parsed JSON)."""
    return tuple(bytes(v) if isinstance(v, bytearray) else v for v in row)


def normalized(rows) -> list[tuple]:  # noqa: ANN001
    import json

    out = []
    for r in rows:
        r = list(r)
        if r[9] is not None:
            r[9] = json.loads(r[9])
        out.append(tuple(r))
    return sorted(out, key=lambda r: r[0])


def test_read_uses_one_partition_per_shard(spark, seeded_items: SparkCluster) -> None:
    assert shardgate_read(spark, seeded_items).rdd.getNumPartitions() == len(seeded_items.shards())


def test_read_returns_exactly_the_rows_each_shard_holds(spark, seeded_items: SparkCluster) -> None:
    df = shardgate_read(spark, seeded_items)
    from pyspark.sql.functions import spark_partition_id

    by_partition: dict[int, list[tuple]] = {}
    for row in df.withColumn("_p", spark_partition_id()).collect():
        by_partition.setdefault(row["_p"], []).append(spark_values(row[:-1]))
    on_shards = seeded_items.shard_rows("spark_items", ITEM_COLUMNS)
    # Partition i reads shard i, in the proxy's shard order.
    for index, (shard, rows) in enumerate(on_shards.items()):
        assert normalized(by_partition[index]) == normalized(rows), shard


def test_read_values_equal_the_inserted_values(spark, seeded_items: SparkCluster) -> None:
    rows = [spark_values(r) for r in shardgate_read(spark, seeded_items).collect()]
    assert normalized(rows) == normalized(item_row(i) for i in range(1, ITEM_COUNT + 1))


def test_column_types_map_exactly(spark, seeded_items: SparkCluster) -> None:
    assert shardgate_read(spark, seeded_items).schema == T.StructType(
        [
            T.StructField("id", T.LongType(), False),
            T.StructField("name", T.StringType(), False),
            T.StructField("price", T.DecimalType(10, 2), True),
            T.StructField("qty", T.IntegerType(), True),
            T.StructField("small", T.ByteType(), True),
            T.StructField("big_unsigned", T.DecimalType(20, 0), True),
            T.StructField("ratio", T.DoubleType(), True),
            T.StructField("created", T.TimestampNTZType(), True),
            T.StructField("day", T.DateType(), True),
            T.StructField("attrs", T.StringType(), True),
            T.StructField("payload", T.BinaryType(), True),
        ]
    )


def test_equality_on_the_vindex_column_reads_only_its_shard(spark, seeded_items: SparkCluster) -> None:
    df = shardgate_read(spark, seeded_items).filter("id = 17")
    assert df.rdd.getNumPartitions() == 1
    assert [spark_values(r)[:2] for r in df.collect()] == [(17, "item-17")]


def test_in_list_on_the_vindex_column_reads_only_the_shards_of_its_values(spark, seeded_items: SparkCluster, shard_of) -> None:  # noqa: ANN001
    same_shard = [i for i in range(1, 40) if shard_of(i) == "-80"][:3]
    df = shardgate_read(spark, seeded_items).filter(df_in("id", same_shard))
    assert df.rdd.getNumPartitions() == 1
    assert sorted(r["id"] for r in df.collect()) == same_shard


def test_in_list_spanning_shards_reads_each_of_them(spark, seeded_items: SparkCluster, shard_of) -> None:  # noqa: ANN001
    ids = [1, 2, 3, 4, 5, 6]
    assert {shard_of(i) for i in ids} == set(seeded_items.shards())
    df = shardgate_read(spark, seeded_items).filter(df_in("id", ids))
    assert df.rdd.getNumPartitions() == 2
    assert sorted(r["id"] for r in df.collect()) == ids


def test_filter_on_another_column_reads_every_shard(spark, seeded_items: SparkCluster) -> None:
    df = shardgate_read(spark, seeded_items).filter("qty = 3")
    assert df.rdd.getNumPartitions() == 2
    assert sorted(r["id"] for r in df.collect()) == [i for i in range(1, ITEM_COUNT + 1) if i % 10 and i % 7 == 3]


def df_in(column: str, values: list[int]) -> str:
    return f"{column} IN ({', '.join(str(v) for v in values)})"


# -- writes -----------------------------------------------------------------------------------


@pytest.fixture
def empty_copy(seeded_items: SparkCluster) -> SparkCluster:
    seeded_items.truncate("spark_items_copy")
    return seeded_items


def shardgate_write(df, cluster: SparkCluster, mode: str, *, with_config: bool = True, **options: str) -> None:  # noqa: ANN001
    writer = df.write.format("shardgate").option("url", cluster.proxy_url).option("table", "commerce.spark_items_copy")
    if with_config:
        writer = writer.option("config", str(cluster.config_path))
    writer.options(**options).mode(mode).save()


def test_append_puts_each_row_on_the_shard_its_vindex_picks(spark, empty_copy: SparkCluster) -> None:
    shardgate_write(shardgate_read(spark, empty_copy), empty_copy, "append", batchSize="17")
    # spark_items and its copy shard by the same vindex: each shard must hold the same rows.
    assert normalized_shards(empty_copy, "spark_items_copy") == normalized_shards(empty_copy, "spark_items")


def test_append_without_a_vschema_lets_the_proxy_route_the_rows(spark, empty_copy: SparkCluster) -> None:
    shardgate_write(shardgate_read(spark, empty_copy), empty_copy, "append", with_config=False)
    assert normalized_shards(empty_copy, "spark_items_copy") == normalized_shards(empty_copy, "spark_items")


def test_overwrite_replaces_the_rows_of_every_shard(spark, empty_copy: SparkCluster) -> None:
    source = shardgate_read(spark, empty_copy)
    shardgate_write(source.filter("id > 100"), empty_copy, "append")
    shardgate_write(source.filter("id <= 50"), empty_copy, "overwrite")
    copied = [r[0] for rows in empty_copy.shard_rows("spark_items_copy", "id").values() for r in rows]
    assert sorted(copied) == list(range(1, 51))


def test_write_then_read_round_trips_every_value(spark, empty_copy: SparkCluster) -> None:
    shardgate_write(shardgate_read(spark, empty_copy), empty_copy, "append")
    back = [spark_values(r) for r in shardgate_read(spark, empty_copy, "commerce.spark_items_copy").collect()]
    assert normalized(back) == normalized(item_row(i) for i in range(1, ITEM_COUNT + 1))


def normalized_shards(cluster: SparkCluster, table: str) -> dict[str, list[tuple]]:
    return {shard: normalized(rows) for shard, rows in cluster.shard_rows(table, ITEM_COLUMNS).items()}
