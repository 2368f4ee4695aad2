"""Fixtures for topic tests: real proxy processes (``shardgate worker``) over the session's real
MariaDB shards, with the HTTP listener on, and real clients (aiomysql, PyMySQL, aiohttp).

Short timings make TTL and polling behaviour show within a second or two."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import aiomysql
import pymysql
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from proxy.topics.schema import message_id_sql
from tests.proxy_process import ProxyProcess, free_port, start_proxy, stop_proxy

MAX_POLL_BYTES = 1024 * 1024  # small enough for tests to cross it with a few messages
# direct_min_rows 2: most tests' publishes of one message keep the deferred path (NULL ids, a
# pass), those of several take their ids in the write: both kinds run everywhere.
TOPICS_SETTINGS = ("topics: {poll_seconds: 0.2, follow_poll_seconds: 0.05, purge_seconds: 0.3, refresh_seconds: 1,"
                   f" max_poll_bytes: {MAX_POLL_BYTES}, direct_min_rows: 2}}")


# The log table as versions before the in-place layout created it (user columns none).
EARLIER_LOG_DDL = f"""CREATE TABLE `_tms_{{name}}` (
  _pk BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  publish_time BIGINT NULL,
  seq INT NULL,
  message_id CHAR(20) CHARACTER SET ascii COLLATE ascii_general_ci
    AS ({message_id_sql("publish_time", "seq")}) PERSISTENT,
  payload LONGBLOB NOT NULL DEFAULT '',
  ttl_seconds INT UNSIGNED NULL,
  expire_ms BIGINT AS (publish_time + 1000 * ttl_seconds) PERSISTENT,
  payload_bytes BIGINT UNSIGNED AS (LENGTH(payload)) PERSISTENT,
  tx_pointer BIGINT NULL,
  pending TINYINT NOT NULL DEFAULT 0,
  stored_ms BIGINT NULL,
  PRIMARY KEY (_pk),
  UNIQUE KEY message_id (message_id),
  KEY publish_time (publish_time),
  KEY expire_ms (expire_ms),
  KEY tx_pointer (tx_pointer, pending)
) ENGINE=InnoDB COMMENT 'shardgate topic log (proxy/topics)'"""


@dataclass
class TopicProxy:
    process: ProxyProcess
    http_port: int

    @property
    def port(self) -> int:
        return self.process.port

    @property
    def rest(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/v1/namespaces"


def launch(local_cluster: Any, log_dir: Path, name: str) -> TopicProxy:
    """A proxy process with its own cluster file (its own HTTP port) next to the cluster's."""
    base: Path = local_cluster.config.path
    http_port = free_port()
    cfg = base.parent / f"topics-{name}.yaml"
    cfg.write_text(base.read_text() + f"\nhttp: {{host: 127.0.0.1, port: {http_port}}}\n{TOPICS_SETTINGS}\n")
    return TopicProxy(start_proxy(cfg, local_cluster.endpoints, log_dir / f"{name}.log"), http_port)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def topic_proxy(local_cluster, tmp_path_factory) -> AsyncIterator[TopicProxy]:
    p = launch(local_cluster, tmp_path_factory.mktemp("topics-proxy"), "a")
    try:
        yield p
    finally:
        stop_proxy(p.process)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def other_proxy(request, local_cluster, tmp_path_factory) -> AsyncIterator[TopicProxy]:
    """A second proxy on the same shards, for one test module (its own process and HTTP port)."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    p = launch(local_cluster, tmp_path_factory.mktemp(f"{name}-other"), f"{name}-other")
    try:
        yield p
    finally:
        stop_proxy(p.process)


async def connect(p: TopicProxy, db: str | None) -> aiomysql.Connection:
    return await aiomysql.connect(host="127.0.0.1", port=p.port, user="root", password="", db=db, autocommit=True)


def blocking_connect(p: TopicProxy, db: str | None) -> pymysql.connections.Connection:
    """A PyMySQL connection (blocking; where the test reads the client library's own view)."""
    return pymysql.connect(host="127.0.0.1", port=p.port, user="root", password="", database=db, autocommit=True)


def blocking_run(p: TopicProxy, db: str | None, statement: str) -> tuple:
    """One statement on a fresh PyMySQL connection; its rows (PyMySQL's tuple)."""
    conn = blocking_connect(p, db)
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
            return cur.fetchall()
    finally:
        conn.close()


async def run(p: TopicProxy, db: str | None, statement: str, args: Any = None) -> list[tuple]:
    """One statement on a fresh connection; its rows (empty for DML)."""
    conn = await connect(p, db)
    try:
        async with conn.cursor() as cur:
            await cur.execute(statement, args)
            return list(await cur.fetchall()) if cur.description else []
    finally:
        conn.close()


async def read_all(p: TopicProxy, db: str, topic: str, where: str = "message_id >= ''") -> list[tuple]:
    return await run(p, db, f"SELECT message_id, publish_time, payload FROM `{topic}` WHERE {where}"
                            " ORDER BY message_id LIMIT 1000000")


# 15 s: a check returns as soon as it holds; the bound only matters on a machine loaded by other work (CI).
async def eventually(check: Callable[[], Awaitable[bool]], within: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {within}s")
        await asyncio.sleep(0.02)


@dataclass
class TopicMaker:
    proxy: TopicProxy
    prefix: str
    made: list[tuple[str, str]] = field(default_factory=list)

    async def create(self, keyspace: str = "commerce", suffix: str = "", spec: str = "") -> str:
        name = (self.prefix + suffix)[:48]
        await run(self.proxy, keyspace, f"DROP TOPIC IF EXISTS `{name}`")
        await run(self.proxy, keyspace, f"CREATE TOPIC `{name}` {spec}")
        self.made.append((keyspace, name))
        return name


@pytest_asyncio.fixture(loop_scope="session")
async def topics(topic_proxy, request) -> AsyncIterator[TopicMaker]:
    words = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower()).removeprefix("test_")
    maker = TopicMaker(topic_proxy, "t_" + words[:40])
    try:
        yield maker
    finally:
        for ks, name in maker.made:
            with contextlib.suppress(Exception):
                await run(topic_proxy, ks, f"DROP TOPIC IF EXISTS `{name}`")


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@dataclass
class Follower:
    """``SET WORKLOAD = OLAP; STREAM * FROM topic ...`` read by a background task (aiomysql SSCursor)."""

    conn: aiomysql.Connection
    names: list[str] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)
    error: BaseException | None = None
    task: asyncio.Task[None] | None = None
    # A slow reader: stops reading for ``pause_seconds`` once it has ``pause_after`` rows.
    pause_after: int | None = None
    pause_seconds: float = 0.0

    @classmethod
    async def open(cls, p: TopicProxy, db: str, statement: str, *, pause_after: int | None = None,
                   pause_seconds: float = 0.0) -> Follower:
        conn = await connect(p, db)
        f = cls(conn, pause_after=pause_after, pause_seconds=pause_seconds)
        try:
            async with conn.cursor() as cur:
                await cur.execute("SET WORKLOAD = OLAP")
            cur = await conn.cursor(aiomysql.SSCursor)
            await cur.execute(statement)
        except BaseException:
            conn.close()
            raise
        f.names = [d[0] for d in cur.description or []]
        f.task = asyncio.ensure_future(f._read(cur))
        return f

    async def _read(self, cur: Any) -> None:
        try:
            while True:
                row = await cur.fetchone()
                if row is None:
                    return
                self.rows.append(tuple(row))
                self.arrived.append(time.monotonic())
                if len(self.rows) == self.pause_after:
                    await asyncio.sleep(self.pause_seconds)
        except Exception as e:
            self.error = e

    async def wait_for(self, count: int, within: float = 10.0) -> list[tuple]:
        async def enough() -> bool:
            if self.error is not None:
                raise self.error
            return len(self.rows) >= count

        await eventually(enough, within, f"{count} streamed rows (have {len(self.rows)})")
        return self.rows

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        self.conn.close()


@pytest_asyncio.fixture(loop_scope="session")
async def follow(topic_proxy) -> AsyncIterator[Callable[..., Awaitable[Follower]]]:
    opened: list[Follower] = []

    async def open_follower(db: str, statement: str, p: TopicProxy | None = None, **options: Any) -> Follower:
        f = await Follower.open(p or topic_proxy, db, statement, **options)
        opened.append(f)
        return f

    try:
        yield open_follower
    finally:
        for f in opened:
            await f.close()


def topic_events(p: TopicProxy, topic: str) -> dict[str, float]:
    """``shardgate_topic_events`` of one topic, by event, as the proxy's /metrics says."""
    with urllib.request.urlopen(f"http://127.0.0.1:{p.http_port}/metrics", timeout=10) as r:
        body = r.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        if family.name == "shardgate_topic_events":
            for s in family.samples:
                if s.name.endswith("_total") and s.labels.get("topic") == topic:
                    out[s.labels["event"]] = out.get(s.labels["event"], 0.0) + s.value
    return out


async def shard_conn(local_cluster: Any, p: TopicProxy, topic: str) -> aiomysql.Connection:
    """A connection straight to the topic's shard."""
    shard = (await run(p, "commerce", f"SHOW TOPICS FROM commerce LIKE '{topic}'"))[0][2]
    e = local_cluster.endpoints[("commerce", shard)]
    return await aiomysql.connect(
        host=e.host, port=e.port, user=e.user, password=e.password, db=e.database, autocommit=True
    )


async def shard_rows(conn: aiomysql.Connection, sql: str) -> list[tuple]:
    async with conn.cursor() as cur:
        await cur.execute(sql)
        return list(await cur.fetchall())
