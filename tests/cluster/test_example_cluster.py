"""The example cluster (examples/local): its vschemas agree with its schema files."""

from __future__ import annotations

import aiomysql

from proxy.cluster import LocalCluster
from proxy.config import load_config
from tests.conftest import EXAMPLE_CLUSTER_YAML
from vschema.loader import build_vschema


def example_vschema():
    config = load_config(EXAMPLE_CLUSTER_YAML)
    return build_vschema(
        {name: (ks.vschema, list(ks.shards)) for name, ks in config.keyspaces.items()},
        config.routing_rules,
    )


def test_sharded_tables_use_the_hash_vindex_as_primary() -> None:
    commerce = example_vschema().keyspaces["commerce"]
    primary = {
        name: (table.column_vindexes[0].columns, table.column_vindexes[0].vindex.type_name)
        for name, table in commerce.tables.items()
        if table.column_vindexes
    }
    assert primary == {
        "customer": (["customer_id"], "hash"),
        "corder": (["customer_id"], "hash"),
        "customer_events": (["id"], "hash"),
    }


def test_corder_owns_a_consistent_lookup_unique_vindex_on_order_id() -> None:
    corder = example_vschema().keyspaces["commerce"].tables["corder"]
    lookup = corder.column_vindexes[1]
    assert (lookup.columns, lookup.vindex.type_name, lookup.owned) == (
        ["order_id"],
        "consistent_lookup_unique",
        True,
    )


def test_auto_increment_columns_draw_from_lookup_sequences() -> None:
    tables = example_vschema().keyspaces["commerce"].tables
    for table, column, sequence in (
        ("customer", "customer_id", "customer_seq"),
        ("corder", "order_id", "corder_seq"),
    ):
        auto = tables[table].auto_increment
        assert auto is not None and auto.column == column
        assert auto.sequence_table is not None
        assert (auto.sequence_table.keyspace, auto.sequence_table.name) == ("lookup", sequence)
        assert auto.sequence_table.type == "sequence"


async def test_every_vschema_table_exists_on_every_shard_of_its_keyspace(
    local_cluster: LocalCluster,
) -> None:
    config = load_config(EXAMPLE_CLUSTER_YAML)
    for (keyspace, _shard), endpoint in local_cluster.endpoints.items():
        conn = await aiomysql.connect(
            host=endpoint.host,
            port=endpoint.port,
            user=endpoint.user,
            password=endpoint.password,
            db=endpoint.database,
        )
        try:
            async with conn.cursor() as cur:
                await cur.execute("SHOW TABLES")
                tables = {name for (name,) in await cur.fetchall()}
        finally:
            await conn.ensure_closed()
        assert set(config.keyspaces[keyspace].vschema["tables"]) <= tables
