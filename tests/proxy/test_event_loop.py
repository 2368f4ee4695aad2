"""``SHARDGATE_EVENT_LOOP`` picks the serving processes' event loop (proxy.event_loop):
asyncio's own by default, uvloop when asked, a clear refusal for anything else."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from proxy.event_loop import EVENT_LOOP_ENV, EventLoopError, loop_factory, run
from tests.proxy.sessions_support import dsn_cluster_file, fast_answer
from tests.proxy_process import REPO, ProxyProcess, free_port, start_proxy, stop_proxy

needs_uvloop = pytest.mark.skipif(importlib.util.find_spec("uvloop") is None, reason="uvloop is not installed")


@needs_uvloop
def test_asyncio_is_the_default_and_uvloop_is_chosen_by_name(monkeypatch) -> None:
    import uvloop

    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    assert loop_factory() is None
    assert loop_factory(" AsyncIO ") is None
    monkeypatch.setenv(EVENT_LOOP_ENV, "uvloop")
    factory = loop_factory()
    assert factory is not None

    async def loop_type() -> type:
        return type(asyncio.get_running_loop())

    assert run(loop_type(), factory) is uvloop.Loop
    assert run(loop_type(), loop_factory("asyncio")) is not uvloop.Loop
    with pytest.raises(EventLoopError, match="expected one of asyncio, uvloop"):
        loop_factory("trio")


def test_an_unknown_event_loop_is_refused_in_one_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "worker", "-c", str(REPO / "examples" / "local" / "cluster.yaml")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env=dict(os.environ, SHARDGATE_ENDPOINTS="[]", **{EVENT_LOOP_ENV: "libevent"}),
    )
    assert out.returncode == 2
    assert "SHARDGATE_EVENT_LOOP='libevent': expected one of asyncio, uvloop" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.fixture(scope="module")
def uvloop_proxy(local_cluster, tmp_path_factory) -> Iterator[ProxyProcess]:
    log = tmp_path_factory.mktemp("uvloop") / "proxy.log"
    proxy = start_proxy(local_cluster.config.path, local_cluster.endpoints, log, extra_env={EVENT_LOOP_ENV: "uvloop"})
    try:
        yield proxy
    finally:
        stop_proxy(proxy)


@needs_uvloop
def test_a_proxy_on_uvloop_answers_reads_writes_and_transactions(uvloop_proxy: ProxyProcess) -> None:
    assert "event loop loop=uvloop" in uvloop_proxy.log_text()
    conn = uvloop_proxy.connect("commerce", autocommit=True)
    try:
        with conn.cursor() as cur:
            ids = [930_001 + i for i in range(6)]
            listed = ",".join(map(str, ids))
            cur.execute(f"delete from customer where customer_id in ({listed})")
            for i in ids[:3]:
                cur.execute("insert into customer(customer_id, email, tenant_id) values (%s, %s, 7)", (i, f"u{i}@x"))
            cur.execute("select customer_id, tenant_id from customer where customer_id = %s", (ids[1],))
            assert cur.fetchall() == ((ids[1], 7),)
            conn.begin()
            for i in ids[3:]:
                cur.execute("insert into customer(customer_id, email, tenant_id) values (%s, %s, 7)", (i, f"u{i}@x"))
            conn.rollback()
            cur.execute(f"select customer_id from customer where customer_id in ({listed}) order by customer_id")
            assert [r[0] for r in cur.fetchall()] == ids[:3]  # a scatter read; the rolled back rows absent
            cur.execute(f"delete from customer where customer_id in ({listed})")
    finally:
        conn.close()


@needs_uvloop
def test_the_fast_path_serves_a_proxy_on_uvloop(local_cluster, tmp_path: Path) -> None:
    """uvloop's transports are no asyncio.Transport subclasses: the fast path takes them over all the same."""
    base = local_cluster.config.path
    http_port = free_port()
    cfg = base.parent / "event-loop-metered.yaml"
    cfg.write_text(base.read_text() + f"\nhttp: {{host: 127.0.0.1, port: {http_port}}}\n")
    proxy = start_proxy(cfg, local_cluster.endpoints, tmp_path / "proxy.log", extra_env={EVENT_LOOP_ENV: "uvloop"})
    try:
        metrics = f"http://127.0.0.1:{http_port}/metrics"
        conn = proxy.connect("commerce", autocommit=True)
        try:
            with conn.cursor() as cur:

                def point_select() -> Any:
                    cur.execute("select customer_id from customer where customer_id = 930101")
                    return cur.fetchall()

                assert fast_answer(metrics, point_select) == ()
        finally:
            conn.close()
    finally:
        stop_proxy(proxy)


@needs_uvloop
def test_serve_workers_run_on_the_loop_their_parent_was_given(local_cluster, tmp_path: Path) -> None:
    cfg = dsn_cluster_file(local_cluster, tmp_path)
    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "serve", "-c", str(cfg), "--workers", "2", "--port", str(port)],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **{EVENT_LOOP_ENV: "uvloop"}),
        )
        try:
            deadline = time.monotonic() + 60
            while log_path.read_text().count("proxy listening") < 2:
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
            assert log_path.read_text().count("event loop loop=uvloop") == 3  # the parent and both workers
            for n in range(4):  # connections spread over both workers
                conn = pymysql.connect(host="127.0.0.1", port=port, user="root", password="", database="commerce")
                with conn.cursor() as cur:
                    cur.execute("select %s + 1", (n,))
                    assert cur.fetchall() == ((n + 1,),)
                conn.close()
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
