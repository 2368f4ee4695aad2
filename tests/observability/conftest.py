"""Fixtures for observability tests: a real proxy process (``shardgate worker``) over the
session's real MariaDB shards, with its HTTP listener on a free port, and real clients
(PyMySQL for SQL, aiohttp for the pages)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pymysql
import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.observability.figures import Figures
from tests.proxy_process import ProxyProcess, free_port, start_proxy, stop_proxy


@dataclass
class ObservedProxy:
    process: ProxyProcess
    http_port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def connect(self, database: str | None = "commerce", **kw: Any) -> pymysql.connections.Connection:
        return self.process.connect(database, autocommit=True, **kw)

    async def get(self, path: str) -> tuple[int, str, str]:
        """Status, content type and body of a GET on the proxy's HTTP listener (a new connection each time)."""
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
            async with http.get(self.url + path) as r:
                return r.status, r.content_type, await r.text()

    async def json(self, path: str) -> Any:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
            async with http.get(self.url + path) as r:
                return await r.json(content_type=None)

    async def scrape(self) -> Figures:
        status, content_type, body = await self.get("/metrics")
        assert status == 200 and content_type == "text/plain"
        return Figures(text_string_to_metric_families(body))


def write_cluster_file(local_cluster: Any, name: str, extra: str = "") -> tuple[Path, int]:
    """A cluster file next to the session cluster's, with an HTTP listener on a free port."""
    base: Path = local_cluster.config.path
    http_port = free_port()
    cfg = base.parent / f"observability-{name}.yaml"
    cfg.write_text(base.read_text() + f"\nhttp: {{host: 127.0.0.1, port: {http_port}}}\n{extra}\n")
    return cfg, http_port


def launch(local_cluster: Any, log_dir: Path, name: str) -> ObservedProxy:
    cfg, http_port = write_cluster_file(local_cluster, name)
    return ObservedProxy(start_proxy(cfg, local_cluster.endpoints, log_dir / f"{name}.log"), http_port)


@pytest.fixture(scope="session")
def observed_proxy(local_cluster, tmp_path_factory) -> Iterator[ObservedProxy]:
    p = launch(local_cluster, tmp_path_factory.mktemp("observability"), "main")
    try:
        yield p
    finally:
        stop_proxy(p.process)


def run(conn: pymysql.connections.Connection, sql: str) -> tuple:
    with conn.cursor() as c:
        c.execute(sql)
        return c.fetchall()
