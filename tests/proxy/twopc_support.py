"""A cluster of its own for the 2PC tests: keyspace ``bank`` (accounts and a transfer
log, hash vindex on ``id``) on real MariaDB shards, whose shards and proxies the tests
may kill without disturbing the session's shared cluster."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pymysql

from proxy.cluster import LocalCluster, find_free_port_range
from proxy.config import load_config
from tests.conftest import mariadb_template_dir
from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy
from vschema.vindexes.hash import hash_uint64

KEYSPACE = "bank"

SCHEMA = """
CREATE TABLE account (id BIGINT NOT NULL PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB;
CREATE TABLE transfer (
  id BIGINT NOT NULL PRIMARY KEY, src BIGINT NOT NULL, dst BIGINT NOT NULL, amount BIGINT NOT NULL
) ENGINE=InnoDB;
"""

# A Vitess message table (for the messaging-after-commit test).
MESSAGE_SCHEMA = """
CREATE TABLE bank_events (
  id BIGINT NOT NULL, priority TINYINT NOT NULL DEFAULT 50, epoch BIGINT NOT NULL DEFAULT 0,
  time_next BIGINT DEFAULT 0, time_acked BIGINT DEFAULT NULL, message JSON,
  PRIMARY KEY (id), INDEX poller_idx (time_acked, priority, time_next DESC)
) ENGINE=InnoDB
  COMMENT 'vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size=10,vt_cache_size=100,vt_poller_interval=1';
"""

VSCHEMA = {
    "sharded": True,
    "vindexes": {"hash": {"type": "hash"}},
    "tables": {
        "account": {"column_vindexes": [{"column": "id", "name": "hash"}]},
        "transfer": {"column_vindexes": [{"column": "id", "name": "hash"}]},
    },
}


def shard_of(row_id: int, shards: list[str]) -> str:
    """The shard of ``shards`` (key ranges) that the hash vindex puts ``row_id`` on."""
    ksid = hash_uint64(row_id)
    for shard in shards:
        lo, _, hi = shard.partition("-")
        if (not lo or ksid >= bytes.fromhex(lo)) and (not hi or ksid < bytes.fromhex(hi)):
            return shard
    raise AssertionError(f"no shard for {row_id}")


def ids_on(shard: str, shards: list[str], count: int, start: int = 1) -> list[int]:
    out: list[int] = []
    i = start
    while len(out) < count:
        if shard_of(i, shards) == shard:
            out.append(i)
        i += 1
    return out


def _cluster_files(work: Path, shards: list[str], extra: str, messages: bool) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    vschema = json.loads(json.dumps(VSCHEMA))
    if messages:
        vschema["tables"]["bank_events"] = {"column_vindexes": [{"column": "id", "name": "hash"}]}
    (work / "bank_schema.sql").write_text(SCHEMA + (MESSAGE_SCHEMA if messages else ""))
    (work / "bank_vschema.json").write_text(json.dumps(vschema))
    base = find_free_port_range(len(shards) + 1)
    path = work / "cluster.yaml"
    path.write_text(
        "users: [{user: root, password: ''}]\n"
        f"local: {{data_dir: {work / 'data'}, base_port: {base}}}\n"
        "keyspaces:\n"
        f"  {KEYSPACE}: {{vschema: bank_vschema.json, schema: bank_schema.sql, shards: {json.dumps(shards)}}}\n"
        + extra
    )
    return path


@asynccontextmanager
async def bank_cluster(
    request: Any, work: Path, shards: list[str], extra: str = "", messages: bool = False
) -> AsyncIterator[LocalCluster]:
    """A started cluster with keyspace ``bank`` on ``shards``; ``extra`` is appended to the
    cluster file (e.g. ``transaction_mode: twopc``); ``messages`` adds the message table
    ``bank_events``. ``request``: pytest's (for the cached
    MariaDB template data dir), or None (benchmarks)."""
    template = mariadb_template_dir(request.config, work) if request is not None else None
    cluster = LocalCluster(load_config(_cluster_files(work, shards, extra, messages)), template_dir=template)
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


def direct(cluster: LocalCluster, shard: str, **kw: Any) -> pymysql.connections.Connection:
    """A connection straight to one shard (around the proxy)."""
    e = cluster.endpoint(KEYSPACE, shard)
    return pymysql.connect(host=e.host, port=e.port, user=e.user, password=e.password, database=e.database,
                           autocommit=True, **kw)


def query_shard(cluster: LocalCluster, shard: str, sql: str) -> list[tuple[Any, ...]]:
    conn = direct(cluster, shard)
    try:
        with conn.cursor() as c:
            c.execute(sql)
            return list(c.fetchall())
    finally:
        conn.close()


def prepared_xids(cluster: LocalCluster, shards: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    """``XA RECOVER`` of every shard that answers (prepared XA transactions)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for shard in shards:
        try:
            out[shard] = query_shard(cluster, shard, "xa recover")
        except pymysql.err.MySQLError:
            out[shard] = [("unreachable",)]
    return out


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@contextmanager
def running_proxy(cluster: LocalCluster, log: Path, fault: str = "") -> Iterator[ProxyProcess]:
    """A proxy process over ``cluster``; ``fault`` arms a 2PC fault point (proxy.twopc.faults)."""
    env = {"SHARDGATE_TWOPC_FAULT": fault} if fault else {}
    p = start_proxy(cluster.config.path, cluster.endpoints, log, extra_env=env)
    try:
        yield p
    finally:
        stop_proxy(p)
