"""A cluster YAML for Spark tests and benchmarks: the example cluster plus tables of their own.

The example cluster's `commerce` keyspace is shared with every other test of the session, so the
Spark tests never write to (or drop) its tables. They get their own sharded tables instead: the
commerce vschema extended with the tables below (hash vindex on `id`), created on each commerce
shard directly. The YAML keeps the running cluster's `local` section, so `cluster_endpoints` of
it names the same shard endpoints the cluster listens on (the data source's `config` option uses
that to reach the shards).
"""

from __future__ import annotations

import json
from pathlib import Path

import pymysql
import yaml

from proxy.config import ClusterConfig, ShardEndpoint
from tests.proxy_process import ProxyProcess

SPARK_TABLES: dict[str, str] = {
    # JDBC write target (append / overwrite).
    "spark_sink": """
        CREATE TABLE spark_sink (
          id BIGINT NOT NULL,
          name VARCHAR(64),
          amount DECIMAL(12,2),
          created DATETIME(6),
          PRIMARY KEY (id)
        ) ENGINE=InnoDB""",
    # Every column type the data source maps.
    "spark_items": """
        CREATE TABLE spark_items (
          id BIGINT NOT NULL,
          name VARCHAR(64) NOT NULL,
          price DECIMAL(10,2),
          qty INT,
          small TINYINT,
          big_unsigned BIGINT UNSIGNED,
          ratio DOUBLE,
          created DATETIME(6),
          day DATE,
          attrs JSON,
          payload BLOB,
          PRIMARY KEY (id)
        ) ENGINE=InnoDB""",
    # The data source's write target: same columns as spark_items.
    "spark_items_copy": "CREATE TABLE spark_items_copy LIKE spark_items",
    # Source of the change stream tests.
    "spark_changes": """
        CREATE TABLE spark_changes (
          id BIGINT NOT NULL,
          label VARCHAR(64),
          n INT,
          PRIMARY KEY (id)
        ) ENGINE=InnoDB""",
    # A message table's columns (as commerce.customer_events) for the messages report example.
    "spark_events": """
        CREATE TABLE spark_events (
          id BIGINT NOT NULL,
          priority TINYINT NOT NULL DEFAULT 50,
          epoch BIGINT NOT NULL DEFAULT 0,
          time_next BIGINT DEFAULT 0,
          time_acked BIGINT DEFAULT NULL,
          tenant_id BIGINT,
          message JSON,
          PRIMARY KEY (id)
        ) ENGINE=InnoDB""",
    # The benchmark's 1M-row table.
    "spark_bench": """
        CREATE TABLE spark_bench (
          id BIGINT NOT NULL,
          tenant_id BIGINT NOT NULL,
          amount DECIMAL(12,2) NOT NULL,
          label VARCHAR(32) NOT NULL,
          created DATETIME(6) NOT NULL,
          PRIMARY KEY (id)
        ) ENGINE=InnoDB""",
}


def write_spark_cluster_yaml(base: ClusterConfig, directory: Path) -> Path:
    """Write `directory/cluster.yaml`: `base` with the Spark tables added to `commerce`."""
    directory.mkdir(parents=True, exist_ok=True)
    keyspaces: dict[str, dict[str, object]] = {}
    for name, ks in base.keyspaces.items():
        vschema = json.loads(json.dumps(ks.vschema))
        if name == "commerce":
            for table in SPARK_TABLES:
                vschema["tables"][table] = {"column_vindexes": [{"column": "id", "name": "hash"}]}
        vschema_path = directory / f"{name}_vschema.json"
        vschema_path.write_text(json.dumps(vschema, indent=2))
        entry: dict[str, object] = {"vschema": str(vschema_path), "shards": list(ks.shards)}
        if ks.schema_path is not None:
            entry["schema"] = str(ks.schema_path)
        keyspaces[name] = entry
    doc: dict[str, object] = {
        "listen": {"host": base.listen.host, "port": base.listen.port},
        "users": [{"user": u.user, "password": u.password} for u in base.users],
        "routing_rules": {"rules": []},
        "vschema_ddl_authorized_users": "%",  # the Spark tests add tables with ALTER VSCHEMA
        "keyspaces": keyspaces,
    }
    if base.local is not None:
        doc["local"] = {"data_dir": str(base.local.data_dir), "base_port": base.local.base_port}
    path = directory / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def add_spark_tables_to_vschema(proxy: ProxyProcess) -> None:
    """The cluster's live vschema (kept in the cluster, seeded by whichever proxy started first)
    gets the Spark tables too: the YAML above only seeds a cluster that has none yet."""
    conn = proxy.connect("commerce", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW VSCHEMA TABLES")
            known = {r[0] for r in cur.fetchall()}
            for table in SPARK_TABLES:
                if table not in known:
                    cur.execute(f"ALTER VSCHEMA ON commerce.{table} ADD VINDEX hash(id)")
    finally:
        conn.close()


def shard_connection(endpoint: ShardEndpoint, **kw: object) -> pymysql.connections.Connection:
    """A direct connection to one shard's MariaDB (bypassing the proxy)."""
    return pymysql.connect(
        host=endpoint.host,
        port=endpoint.port,
        user=endpoint.user,
        password=endpoint.password,
        database=endpoint.database,
        autocommit=True,
        **kw,
    )


def create_spark_tables(shard_endpoints: list[ShardEndpoint], tables: list[str] | None = None) -> None:
    """(Re)create the Spark tables on every given shard."""
    for endpoint in shard_endpoints:
        with shard_connection(endpoint) as conn, conn.cursor() as cur:
            for table in tables or list(SPARK_TABLES):
                cur.execute(f"DROP TABLE IF EXISTS `{table}`")
                cur.execute(SPARK_TABLES[table])
