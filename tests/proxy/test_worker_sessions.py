"""With ``--workers 2`` the process list and KILL span the worker processes sharing the port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from proxy.worker_peers import WORKER_ID_SHIFT
from tests.proxy.sessions_support import (
    dsn_cluster_file,
    one_customer_per_commerce_shard,
    query,
    run_in_thread,
    shard_threads_running,
    sleeping_scatter,
    wait_for,
)
from tests.proxy_process import REPO, free_port


@pytest.fixture(scope="module")
def two_workers(local_cluster, tmp_path_factory) -> Iterator[int]:
    """``shardgate serve --workers 2`` over the test cluster; yields its port."""
    work = tmp_path_factory.mktemp("workers")
    cfg = dsn_cluster_file(local_cluster, work)
    port = free_port()
    log = (work / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "-c", str(cfg), "--workers", "2", "--port", str(port)],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not _both_workers_answer(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"workers did not start:\n{Path(log.name).read_text()}")
            time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _connect(port: int, database: str | None = None) -> pymysql.connections.Connection:
    return pymysql.connect(host="127.0.0.1", port=port, user="root", password="", database=database, autocommit=True)


def _both_workers_answer(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            pass
        conns = _one_client_per_worker(port)
    except (OSError, pymysql.err.Error, RuntimeError):
        return False
    for c in conns.values():
        c.close()
    return True


def _one_client_per_worker(port: int, database: str | None = None) -> dict[int, pymysql.connections.Connection]:
    """Connect until a client is on each of the two workers (the kernel spreads
    connections over SO_REUSEPORT listeners by hash); the others are closed."""
    found: dict[int, pymysql.connections.Connection] = {}
    for _ in range(64):
        conn = _connect(port, database)
        worker = conn.thread_id() >> WORKER_ID_SHIFT
        if worker in found:
            conn.close()
        else:
            found[worker] = conn
        if len(found) == 2:
            return found
    for c in found.values():
        c.close()
    raise RuntimeError(f"64 connections all landed on workers {sorted(found)}")


def test_processlist_from_one_worker_shows_the_sessions_of_both(two_workers: int) -> None:
    clients = _one_client_per_worker(two_workers, "commerce")
    try:
        assert sorted(clients) == [0, 1]
        for asking in clients.values():
            rows = {r[0]: r for r in query(asking, "show processlist")}
            for other in clients.values():
                assert other.thread_id() in rows
                user, db = rows[other.thread_id()][1], rows[other.thread_id()][3]
                assert (user, db) == ("root", "commerce")
            assert rows[asking.thread_id()][4] == "Query"
            others = [c for c in clients.values() if c is not asking]
            assert all(rows[c.thread_id()][4] == "Sleep" for c in others)
    finally:
        for c in clients.values():
            c.close()


def test_kill_query_reaches_a_session_on_the_other_worker(two_workers: int, local_cluster) -> None:
    tenant = one_customer_per_commerce_shard(local_cluster)
    tag = f"wk_{uuid.uuid4().hex[:8]}"
    clients = _one_client_per_worker(two_workers, "commerce")
    victim, killer = clients[0], clients[1]
    try:
        outcome = run_in_thread(victim, sleeping_scatter(tenant, 30, tag))
        assert wait_for(lambda: all(shard_threads_running(local_cluster, tag).values()))
        query(killer, f"kill query {victim.thread_id()}")
        assert outcome.done.wait(10)
        assert isinstance(outcome.error, pymysql.err.OperationalError) and outcome.error.args[0] == 1317
        assert wait_for(lambda: not any(shard_threads_running(local_cluster, tag).values()))
        assert query(victim, "select 7") == ((7,),)
        # KILL (the connection) the other way round.
        query(victim, f"kill {killer.thread_id()}")
        with pytest.raises((pymysql.err.OperationalError, pymysql.err.InterfaceError)):
            query(killer, "select 1")
        assert wait_for(lambda: killer.thread_id() not in {r[0] for r in query(victim, "show processlist")}, timeout=3)
        with pytest.raises(pymysql.err.OperationalError) as e:
            query(victim, f"kill {(1 << WORKER_ID_SHIFT) | 0xFFFFFF}")
        assert e.value.args[0] == 1094
    finally:
        victim.close()
        killer.close()


def _worker_pids(port: int) -> list[int]:
    """The ``proxy.cli worker`` processes serving ``port``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"proxy.cli" in args and b"worker" in args and str(port).encode() in args:
            pids.append(int(entry.name))
    return pids


def test_each_worker_runs_on_a_cpu_of_its_own(two_workers: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: nothing to spread the workers over")
    pids = _worker_pids(two_workers)
    assert len(pids) == 2, pids
    assert sorted(cpu for pid in pids for cpu in os.sched_getaffinity(pid)) == cpus[:2]
