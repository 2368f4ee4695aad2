"""A TPC-H cluster for tests and the benchmark: its own LocalCluster with keyspace `tpch`
(shards -80 and 80-, tables sharded by the hash vindex, nation/region as reference tables)
plus one plain MariaDB (`tpch_oracle`, unsharded) holding every row, and a real proxy process
that knows only `tpch`.

Rows are loaded straight into the shards with ``LOAD DATA LOCAL INFILE`` (each row on the
shard its vindex picks, reference tables on every shard) and into the oracle.
"""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pymysql
import yaml

from proxy.cluster import LocalCluster, find_free_port_range
from proxy.config import ShardEndpoint, load_config
from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy
from tests.tpch.datagen import SCHEMA_PATH, SHARDS, TABLES, VSCHEMA_PATH, Dataset

HERE = Path(__file__).resolve().parent
KEYSPACE = "tpch"
ORACLE = "tpch_oracle"


def write_cluster_yaml(files: Path, data_dir: Path) -> Path:
    """The cluster file LocalCluster starts: keyspace `tpch` on 2 shards + the oracle server."""
    files.mkdir(parents=True, exist_ok=True)
    for src in (SCHEMA_PATH, VSCHEMA_PATH, HERE / "oracle_vschema.json"):
        shutil.copy(src, files / src.name)
    doc = {
        "listen": {"host": "127.0.0.1", "port": 15306},
        "users": [{"user": "root", "password": ""}],
        "local": {"data_dir": str(data_dir), "base_port": 17100},
        "keyspaces": {
            KEYSPACE: {"vschema": VSCHEMA_PATH.name, "schema": SCHEMA_PATH.name, "shards": list(SHARDS)},
            ORACLE: {"vschema": "oracle_vschema.json", "schema": SCHEMA_PATH.name, "shards": ["0"]},
        },
    }
    path = files / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def write_proxy_yaml(files: Path, shards: dict[str, ShardEndpoint], port: int) -> Path:
    """The proxy's cluster file: keyspace `tpch` only, its shards given by dsn."""
    doc = {
        "listen": {"host": "127.0.0.1", "port": port},
        "users": [{"user": "root", "password": ""}],
        "keyspaces": {
            KEYSPACE: {
                "vschema": VSCHEMA_PATH.name,
                "shards": {s: f"mysql://{e.user}@{e.host}:{e.port}/{e.database}" for s, e in shards.items()},
            }
        },
    }
    path = files / "proxy.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def connect(ep: ShardEndpoint, **kw: object) -> pymysql.connections.Connection:
    return pymysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password,
                           database=ep.database, autocommit=True, **kw)


@dataclass
class TpchCluster:
    cluster: LocalCluster
    work: Path

    @property
    def shards(self) -> dict[str, ShardEndpoint]:
        return {s: self.cluster.endpoint(KEYSPACE, s) for s in SHARDS}

    @property
    def oracle(self) -> ShardEndpoint:
        return self.cluster.endpoint(ORACLE, "0")

    def servers(self) -> list[ShardEndpoint]:
        return [*self.shards.values(), self.oracle]

    def start_proxy(self, extra_env: dict | None = None) -> ProxyProcess:
        from tests.proxy_process import free_port

        port = free_port()
        config = write_proxy_yaml(self.work / "files", self.shards, port)
        endpoints = {(KEYSPACE, s): e for s, e in self.shards.items()}
        return start_proxy(config, endpoints, self.work / "proxy.log", port=port, extra_env=extra_env)

    stop_proxy = staticmethod(stop_proxy)


def make_cluster(work: Path, template_dir: Path | None = None) -> TpchCluster:
    """A TpchCluster (not started) with its data under `work`, on free ports."""
    path = write_cluster_yaml(work / "files", work / "data")
    first = find_free_port_range(len(SHARDS) + 2)
    config = load_config(path, base_port=first, listen_port=first + len(SHARDS) + 1)
    return TpchCluster(LocalCluster(config, template_dir=template_dir), work)


def load(tc: TpchCluster, data: Dataset) -> float:
    """Load `data` into the shards and the oracle (tables emptied first); returns seconds."""
    started = time.monotonic()
    jobs: list[tuple[ShardEndpoint, list[tuple[str, Path]]]] = []
    for shard, ep in tc.shards.items():
        jobs.append((ep, [(t, f) for t in TABLES for f in data.files(t, None if data.is_reference(t) else shard)]))
    jobs.append((tc.oracle, [(t, f) for t in TABLES for f in data.files(t, None)]))
    with ThreadPoolExecutor(len(jobs)) as pool:
        for fut in [pool.submit(_load_server, ep, files) for ep, files in jobs]:
            fut.result()
    return time.monotonic() - started


def _load_server(ep: ShardEndpoint, files: list[tuple[str, Path]]) -> None:
    conn = connect(ep, local_infile=True)
    try:
        with conn.cursor() as cur:
            # Nothing reads these servers' binlogs; skipping it halves the load time.
            cur.execute("SET SESSION sql_log_bin = 0, unique_checks = 0, foreign_key_checks = 0")
            for table in dict.fromkeys(t for t, _ in files):
                cur.execute(f"TRUNCATE TABLE {table}")
            for table, path in files:
                cur.execute(
                    f"LOAD DATA LOCAL INFILE %s INTO TABLE {table} CHARACTER SET utf8mb4 "
                    "FIELDS TERMINATED BY '\\t' ESCAPED BY '' LINES TERMINATED BY '\\n'",
                    (str(path),),
                )
                cur.execute("SHOW WARNINGS LIMIT 5")
                warnings = cur.fetchall()
                if warnings:
                    raise RuntimeError(f"{ep.dsn} {table} <- {path.name}: {warnings}")
            for table in dict.fromkeys(t for t, _ in files):
                cur.execute(f"ANALYZE TABLE {table}")
                cur.fetchall()
    finally:
        conn.close()


def row_counts(ep: ShardEndpoint) -> dict[str, int]:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            out = {}
            for table in TABLES:
                cur.execute(f"SELECT COUNT(*) FROM {table}")
                out[table] = int(cur.fetchone()[0])
            return out
    finally:
        conn.close()
