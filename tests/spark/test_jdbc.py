"""Spark's JDBC source and sink (MariaDB Connector/J 2.7, default options) through the proxy.

The bar is "the way it works against MySQL": each read returns exactly the rows the shards hold
(read directly from each shard), and each written row lands on the shard its vindex picks.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pymysql
import pytest

from tests.spark.conftest import ITEM_COUNT, JDBC_DRIVER, SparkCluster, item_row

pytestmark = pytest.mark.spark


def all_shard_rows(cluster: SparkCluster, table: str, columns: str = "*") -> list[tuple]:
    rows = [r for shard_rows in cluster.shard_rows(table, columns).values() for r in shard_rows]
    return sorted(rows)


def jdbc_read(spark, cluster: SparkCluster, **options: str):  # noqa: ANN001, ANN201
    return spark.read.format("jdbc").options(**cluster.jdbc_options(), **options).load()


def sorted_tuples(df, *columns: str) -> list[tuple]:  # noqa: ANN001
    return sorted(tuple(r) for r in df.select(*columns).collect())


# -- reads ------------------------------------------------------------------------------------


def test_plain_read_returns_every_row_of_every_shard(spark, seeded_items: SparkCluster) -> None:
    df = jdbc_read(spark, seeded_items, dbtable="spark_items")
    assert sorted_tuples(df, "id", "name", "qty") == all_shard_rows(seeded_items, "spark_items", "id, name, qty")


def test_plain_read_schema_equals_the_schema_read_from_a_shard(spark, seeded_items: SparkCluster) -> None:
    through_proxy = jdbc_read(spark, seeded_items, dbtable="spark_items").schema
    direct = spark.read.format("jdbc").options(**seeded_items.shard_jdbc_options("-80"), dbtable="spark_items").load().schema
    assert through_proxy == direct


def test_plain_read_values_equal_the_inserted_values(spark, seeded_items: SparkCluster) -> None:
    df = jdbc_read(spark, seeded_items, dbtable="spark_items")
    got = {r["id"]: r for r in df.collect()}
    for i in (1, 7, 10, 199):
        want = item_row(i)
        row = got[i]
        assert row["price"] == want[2]
        assert row["created"] == want[7]
        assert (bytes(row["payload"]) if row["payload"] is not None else None) == want[10]


def test_count_counts_every_row(spark, seeded_items: SparkCluster) -> None:
    assert jdbc_read(spark, seeded_items, dbtable="spark_items").count() == ITEM_COUNT


def test_partitioned_read_returns_each_row_once(spark, seeded_items: SparkCluster) -> None:
    df = jdbc_read(
        spark,
        seeded_items,
        dbtable="spark_items",
        partitionColumn="id",
        lowerBound="1",
        upperBound=str(ITEM_COUNT),
        numPartitions="4",
    )
    assert df.rdd.getNumPartitions() == 4
    assert sorted_tuples(df, "id", "name") == all_shard_rows(seeded_items, "spark_items", "id, name")


def test_predicates_read_returns_each_rows_of_each_predicate(spark, seeded_items: SparkCluster) -> None:
    props = {k: v for k, v in seeded_items.jdbc_options().items() if k != "url"}
    df = spark.read.jdbc(
        seeded_items.jdbc_url(),
        "spark_items",
        predicates=["qty < 3", "qty >= 3", "qty IS NULL"],
        properties=props,
    )
    assert df.rdd.getNumPartitions() == 3
    assert sorted_tuples(df, "id") == all_shard_rows(seeded_items, "spark_items", "id")


def test_pushed_down_filter_and_projection_return_the_matching_rows(spark, seeded_items: SparkCluster) -> None:
    df = jdbc_read(spark, seeded_items, dbtable="spark_items").filter("id IN (3, 4, 5) AND qty IS NOT NULL")
    assert sorted_tuples(df, "id", "qty") == [(3, 3), (4, 4), (5, 5)]


def test_query_option_reads_a_derived_table_over_a_sharded_table(spark, seeded_items: SparkCluster) -> None:
    df = jdbc_read(spark, seeded_items, query="SELECT id, name FROM spark_items WHERE qty = 3")
    want = [r for r in all_shard_rows(seeded_items, "spark_items", "id, name, qty") if r[2] == 3]
    assert sorted_tuples(df, "id", "name") == [(r[0], r[1]) for r in want]


def test_query_option_with_group_by_aggregates_across_shards(spark, seeded_items: SparkCluster) -> None:
    df = jdbc_read(
        spark, seeded_items, query="SELECT qty, COUNT(*) AS n FROM spark_items WHERE qty IS NOT NULL GROUP BY qty"
    )
    counts: dict[int, int] = {}
    for _, qty in all_shard_rows(seeded_items, "spark_items", "id, qty"):
        if qty is not None:
            counts[qty] = counts.get(qty, 0) + 1
    assert sorted_tuples(df, "qty", "n") == sorted(counts.items())


def test_reading_an_unknown_table_fails_with_table_does_not_exist(spark, seeded_items: SparkCluster) -> None:
    with pytest.raises(Exception, match="doesn't exist"):
        jdbc_read(spark, seeded_items, dbtable="no_such_table").schema  # noqa: B018


# -- what the driver sends on every connection ------------------------------------------------


def test_sql_mode_set_by_the_driver_reads_back_evaluated(seeded_items: SparkCluster) -> None:
    """Connector/J opens each connection with `sql_mode = concat(@@sql_mode, ...)`; MySQL stores
    the evaluated mode, so @@sql_mode reads back as a list of modes, not as the expression."""
    with seeded_items.proxy.connect("commerce", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')")
        cur.execute("SELECT @@sql_mode")
        (mode,) = cur.fetchone()
    assert "concat" not in mode.lower()
    assert "STRICT_TRANS_TABLES" in mode.split(",")


def test_select_database_names_its_column_database(seeded_items: SparkCluster) -> None:
    """Connector/J's getCatalog() runs `select database()`; MySQL names the column `database()`
    and marks it nullable (it is NULL with no database selected)."""
    with seeded_items.proxy.connect("commerce") as conn, conn.cursor() as cur:
        cur.execute("select database()")
        assert cur.fetchone() == ("commerce",)
        assert cur.description[0][0] == "database()"
        assert cur.description[0][6] is True  # null_ok


def test_session_time_zone_applies_to_statements_sent_to_shards(seeded_items: SparkCluster) -> None:
    """A driver's session SET (time_zone here, sql_mode on every Connector/J connection) must
    hold for the statements of that session the proxy sends to shards."""
    with seeded_items.proxy.connect("commerce", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+05:00'")
        cur.execute("SELECT UNIX_TIMESTAMP('2026-01-01 00:00:00') FROM spark_items WHERE id = 1")
        (epoch,) = cur.fetchone()
    assert epoch == 1767207600  # 2026-01-01 00:00 +05:00


def test_shard_targeted_url_reads_only_that_shard(spark, seeded_items: SparkCluster) -> None:
    for shard in seeded_items.shards():
        opts = seeded_items.jdbc_options(f"commerce:{shard}")
        df = spark.read.format("jdbc").options(**opts, dbtable="spark_items").load()
        assert sorted_tuples(df, "id") == [(r[0],) for r in seeded_items.shard_rows("spark_items", "id")[shard]]


# -- writes -----------------------------------------------------------------------------------


@pytest.fixture
def empty_sink(spark_cluster: SparkCluster):  # noqa: ANN201
    """An empty `spark_sink` with its declared columns (an overwrite may have replaced them)."""
    from tests.spark.spark_cluster import create_spark_tables

    create_spark_tables(list(spark_cluster.shards().values()), ["spark_sink"])
    yield spark_cluster
    create_spark_tables(list(spark_cluster.shards().values()), ["spark_sink"])


def sink_rows(ids: range) -> list[tuple]:
    return [(i, f"name-{i}", Decimal(i) + Decimal("0.25"), datetime(2026, 3, 1, 12, 0, i % 60)) for i in ids]


def sink_frame(spark, ids: range):  # noqa: ANN001, ANN201
    return spark.createDataFrame(sink_rows(ids), "id long, name string, amount decimal(12,2), created timestamp")


def assert_rows_on_their_shards(cluster: SparkCluster, shard_of, ids: range) -> None:  # noqa: ANN001
    on_shards = cluster.shard_rows("spark_sink", "id, name, amount")
    expected: dict[str, list[tuple]] = {shard: [] for shard in on_shards}
    for i, name, amount, _ in sink_rows(ids):
        expected[shard_of(i)].append((i, name, amount))
    assert on_shards == expected
    assert all(expected.values()), "the ids must cover every shard"


def test_append_puts_each_row_on_the_shard_its_vindex_picks(spark, empty_sink: SparkCluster, shard_of) -> None:  # noqa: ANN001
    props = {k: v for k, v in empty_sink.jdbc_options().items() if k != "url"}
    sink_frame(spark, range(1, 41)).write.jdbc(empty_sink.jdbc_url(), "spark_sink", mode="append", properties=props)
    assert_rows_on_their_shards(empty_sink, shard_of, range(1, 41))


def test_append_with_rewritten_batches_puts_each_row_on_its_shard(spark, empty_sink: SparkCluster, shard_of) -> None:  # noqa: ANN001
    opts = empty_sink.jdbc_options()
    opts["url"] += "?rewriteBatchedStatements=true"
    sink_frame(spark, range(1, 41)).write.format("jdbc").options(**opts, dbtable="spark_sink").mode("append").save()
    assert_rows_on_their_shards(empty_sink, shard_of, range(1, 41))


def test_overwrite_replaces_the_rows_on_every_shard(spark, empty_sink: SparkCluster, shard_of) -> None:  # noqa: ANN001
    opts = empty_sink.jdbc_options()
    sink_frame(spark, range(1, 41)).write.format("jdbc").options(**opts, dbtable="spark_sink").mode("append").save()
    sink_frame(spark, range(100, 131)).write.format("jdbc").options(**opts, dbtable="spark_sink").mode("overwrite").save()
    assert_rows_on_their_shards(empty_sink, shard_of, range(100, 131))


def test_overwrite_with_truncate_keeps_the_table_definition(spark, empty_sink: SparkCluster, shard_of) -> None:  # noqa: ANN001
    opts = empty_sink.jdbc_options()
    sink_frame(spark, range(1, 41)).write.format("jdbc").options(**opts, dbtable="spark_sink").mode("append").save()
    sink_frame(spark, range(100, 131)).write.format("jdbc").options(
        **opts, dbtable="spark_sink", truncate="true"
    ).mode("overwrite").save()
    assert_rows_on_their_shards(empty_sink, shard_of, range(100, 131))
    for endpoint in empty_sink.shards().values():
        with pymysql.connect(host=endpoint.host, port=endpoint.port, user="root", database=endpoint.database) as c:
            with c.cursor() as cur:
                cur.execute("SHOW COLUMNS FROM spark_sink LIKE 'name'")
                assert cur.fetchone()[1] == "varchar(64)"


def test_jdbc_driver_class_is_the_debian_mariadb_driver() -> None:
    assert JDBC_DRIVER == "org.mariadb.jdbc.Driver"
