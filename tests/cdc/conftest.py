"""CDC tests run against the session's real local cluster (root fixture ``local_cluster``).

They write to a scratch table ``cdc_probe`` created directly on every commerce shard (and
dropped afterwards), so the example schema other tests rely on is never altered. Writes
go straight to a shard with PyMySQL, like an operator or another service writing behind
the proxy's back, which is exactly what the binlog must capture.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql
import pytest
import pytest_asyncio

from proxy.cdc import EventGroup, VStream
from proxy.config import ShardEndpoint
from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy

KEYSPACE = "commerce"
SHARDS = ("-80", "80-")
PROBE_TABLE = "cdc_probe"
PROBE = f"{KEYSPACE}.{PROBE_TABLE}"

PROBE_DDL = f"""
CREATE TABLE IF NOT EXISTS {PROBE_TABLE} (
  id BIGINT NOT NULL PRIMARY KEY,
  label VARCHAR(64),
  amount DECIMAL(10,2),
  written_at DATETIME(6)
) ENGINE=InnoDB
"""

_ids = itertools.count(random.randrange(1, 1 << 40) * 1000)


def new_id() -> int:
    return next(_ids)


@dataclass
class Shard:
    """Direct SQL on one shard's MariaDB."""

    keyspace: str
    name: str
    endpoint: ShardEndpoint

    def connect(self) -> pymysql.Connection:
        ep = self.endpoint
        return pymysql.connect(
            host=ep.host,
            port=ep.port,
            user=ep.user,
            password=ep.password,
            database=ep.database,
            autocommit=True,
        )

    def run_sync(self, *statements: str | tuple[str, Sequence[Any]]) -> list[tuple]:
        conn = self.connect()
        try:
            last: list[tuple] = []
            with conn.cursor() as cur:
                for statement in statements:
                    if isinstance(statement, tuple):
                        cur.execute(statement[0], statement[1])
                    else:
                        cur.execute(statement)
                    last = list(cur.fetchall())
            return last
        finally:
            conn.close()

    async def run(self, *statements: str | tuple[str, Sequence[Any]]) -> list[tuple]:
        return await asyncio.to_thread(self.run_sync, *statements)

    async def transaction(self, *statements: str | tuple[str, Sequence[Any]]) -> None:
        await self.run("BEGIN", *statements, "COMMIT")

    async def purge_binlogs(self) -> None:
        """Rotate the binlog and purge every older file. MariaDB silently keeps a file until
        the engines have checkpointed its transactions, so retry until it is gone."""
        await self.run("FLUSH BINARY LOGS")
        newest = (await self.run("SHOW BINARY LOGS"))[-1][0]
        deadline = time.monotonic() + 20
        while (await self.run("SHOW BINARY LOGS"))[0][0] != newest:
            if time.monotonic() > deadline:
                raise TimeoutError(f"binlogs before {newest} were not purged")
            await self.run(f"PURGE BINARY LOGS TO '{newest}'")
            await asyncio.sleep(0.1)

    async def gtid_binlog_pos(self) -> str:
        rows = await self.run("SELECT @@GLOBAL.gtid_binlog_pos")
        return str(rows[0][0])


@pytest.fixture(scope="session")
def shards(local_cluster) -> dict[str, Shard]:
    return {name: Shard(KEYSPACE, name, local_cluster.endpoint(KEYSPACE, name)) for name in SHARDS}


@pytest.fixture(scope="module")
def cdc_proxy(local_cluster, tmp_path_factory) -> Iterator[ProxyProcess]:
    """A real proxy process over the cluster, for writes that go through routing."""
    log = tmp_path_factory.mktemp("cdc-proxy") / "proxy.log"
    process = start_proxy(local_cluster.config.path, local_cluster.endpoints, log)
    try:
        yield process
    finally:
        stop_proxy(process)


@pytest.fixture(scope="session")
def commerce_endpoints(local_cluster) -> dict[tuple[str, str], ShardEndpoint]:
    return {key: ep for key, ep in local_cluster.endpoints.items() if key[0] == KEYSPACE}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def probe_table(shards: dict[str, Shard]) -> AsyncIterator[str]:
    for shard in shards.values():
        await shard.run(f"DROP TABLE IF EXISTS {PROBE_TABLE}", PROBE_DDL)
    try:
        yield PROBE
    finally:
        for shard in shards.values():
            await shard.run(f"DROP TABLE IF EXISTS {PROBE_TABLE}")


async def collect_groups(
    stream: VStream,
    done: Callable[[list[EventGroup]], bool],
    within: float = 10.0,
) -> list[EventGroup]:
    """Groups from ``stream`` (heartbeats left out) until ``done(groups)`` is true."""
    groups: list[EventGroup] = []
    async with asyncio.timeout(within):
        async for group in stream:
            if group.is_heartbeat:
                if done(groups):
                    break
                continue
            groups.append(group)
            if done(groups):
                break
    return groups


def rows_of(groups: list[EventGroup], table: str = PROBE) -> list[tuple[str, str, Any, Any]]:
    """(shard, op, before, after) of every row change of ``table``, in delivery order."""
    out = []
    for group in groups:
        for event in group.row_events():
            if event.table_name != table:
                continue
            for change in event.changes:
                out.append((group.shard, event.op.value, change.before, change.after))
    return out


def ids_seen(groups: list[EventGroup]) -> list[int]:
    return [(after or before)["id"] for _shard, _op, before, after in rows_of(groups)]


async def consume_for(stream: Any, seconds: float) -> list:
    """Every non-heartbeat group a stream delivers within ``seconds``."""
    groups = []
    deadline = time.monotonic() + seconds
    async for group in stream:
        if not group.is_heartbeat:
            groups.append(group)
        if time.monotonic() >= deadline:
            break
    return groups
