"""``shardgate serve --workers 2``: one scrape, from whichever worker answers it, counts the
statements both workers ran."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.observability.conftest import ObservedProxy, run
from tests.proxy_process import REPO, ProxyProcess, free_port

WORKERS = 2


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, f"shardgate serve exited:\n{log.read_text()}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}:\n{log.read_text()}"
            time.sleep(0.05)


@pytest.fixture
def worker_group(local_cluster, tmp_path) -> Iterator[ObservedProxy]:
    """``shardgate serve --workers 2`` over the session's shards, given by dsn."""
    files = local_cluster.config.path.parent
    port, http_port = free_port(), free_port()
    keyspaces = {
        name: {
            "vschema": str(files / ks.vschema_path.name),
            "shards": {shard: local_cluster.endpoint(name, shard).dsn for shard in ks.shards},
        }
        for name, ks in local_cluster.config.keyspaces.items()
    }
    cfg = tmp_path / "workers.yaml"
    cfg.write_text(json.dumps({  # JSON is YAML
        "listen": {"host": "127.0.0.1", "port": port},
        "users": [{"user": "root", "password": ""}],
        "http": {"host": "127.0.0.1", "port": http_port},
        "keyspaces": keyspaces,
    }))
    log = tmp_path / "serve.log"
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "proxy.cli", "serve", "-c", str(cfg), "--workers", str(WORKERS)],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, proc, log)
        _wait_for_port(http_port, proc, log)
        yield ObservedProxy(ProxyProcess("127.0.0.1", port, proc, log), http_port)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def test_one_scrape_counts_the_queries_of_every_worker(worker_group: ObservedProxy) -> None:
    connections, selects_each = 16, 5
    conns = [worker_group.connect() for _ in range(connections)]  # SO_REUSEPORT spreads them
    try:
        for conn in conns:
            for n in range(selects_each):
                run(conn, f"select customer_id from customer where customer_id = {n + 1}")
    finally:
        for conn in conns:
            conn.close()
    sent = connections * selects_each

    # the worker answering a scrape brings its own figures up to date; the others write
    # theirs every second: waited for (up to 20 s) until a scrape counts every query, not
    # assumed after 1.5 s (a busy machine's worker writes late)
    deadline = time.monotonic() + 20
    for _ in range(1000):
        figures = await worker_group.scrape()
        if figures.total("shardgate_queries", "shardgate_queries_total", statement="select",
                         plan="Route/EqualUnique") >= sent or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    answered_by = set()
    deadline = time.monotonic() + 20
    while len(answered_by) < WORKERS:  # new HTTP connections until each worker answered once
        assert time.monotonic() < deadline, f"only workers {answered_by} answered scrapes"
        body = await worker_group.json("/debug/vars")
        answered_by.add(body["process"]["pid"])
        assert len(body["workers"]) == WORKERS
        by_worker = body["queries_by_worker"]
        assert len(by_worker) == WORKERS and all(n > 0 for n in by_worker.values()), by_worker
        figures = await worker_group.scrape()
        assert figures.total("shardgate_queries", "shardgate_queries_total", statement="select",
                             plan="Route/EqualUnique") == sent
        assert figures.total("shardgate_query_duration_seconds", "shardgate_query_duration_seconds_count") == sum(
            by_worker.values()) == figures.total("shardgate_queries", "shardgate_queries_total")
        # live gauges sum over workers: every pool of both workers
        assert figures.total("shardgate_pool_capacity", keyspace="commerce", shard="-80") == 32 * WORKERS
