"""``SHARDGATE_EVENT_LOOP`` picks the serving processes' event loop (proxy.event_loop):
uvloop by default, asyncio's own when asked, asyncio with one warning where uvloop cannot be
imported, a clear refusal for anything else."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
import uvloop

from proxy.event_loop import EVENT_LOOP_ENV, EventLoopError, loop_factory, run
from tests.proxy.sessions_support import dsn_cluster_file, fast_answer
from tests.proxy_process import REPO, ProxyProcess, free_port, start_proxy, stop_proxy

# The environment of a process left to the default loop, whatever the test run exported.
DEFAULT = {EVENT_LOOP_ENV: ""}
# ``python -c`` running the CLI in an interpreter where uvloop cannot be imported.
WITHOUT_UVLOOP = (
    "import sys; sys.modules['uvloop'] = None; from proxy.cli import main; raise SystemExit(main(sys.argv[1:]))"
)


def test_uvloop_is_the_default_and_asyncio_is_chosen_by_name(monkeypatch) -> None:
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)

    async def loop_type() -> type:
        return type(asyncio.get_running_loop())

    assert run(loop_type(), loop_factory()) is uvloop.Loop
    assert run(loop_type(), loop_factory(" UVLoop ")) is uvloop.Loop
    monkeypatch.setenv(EVENT_LOOP_ENV, "asyncio")
    assert loop_factory() is None
    assert run(loop_type(), loop_factory()) is not uvloop.Loop
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


def test_uvloop_asked_for_by_name_where_it_is_missing_is_refused_in_one_line() -> None:
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_UVLOOP, "worker", "-c", str(REPO / "examples" / "local" / "cluster.yaml")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env=dict(os.environ, SHARDGATE_ENDPOINTS="[]", **{EVENT_LOOP_ENV: "uvloop"}),
    )
    assert out.returncode == 2
    assert "SHARDGATE_EVENT_LOOP=uvloop, but uvloop is not installed" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.fixture(scope="module")
def default_proxy(local_cluster, tmp_path_factory) -> Iterator[ProxyProcess]:
    log = tmp_path_factory.mktemp("default-loop") / "proxy.log"
    proxy = start_proxy(local_cluster.config.path, local_cluster.endpoints, log, extra_env=DEFAULT)
    try:
        yield proxy
    finally:
        stop_proxy(proxy)


def test_a_proxy_on_the_default_loop_runs_uvloop_and_answers_reads_writes_and_transactions(
    default_proxy: ProxyProcess,
) -> None:
    assert "event loop loop=uvloop" in default_proxy.log_text()
    conn = default_proxy.connect("commerce", autocommit=True)
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


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_the_fast_path_serves_a_proxy_on_either_loop(local_cluster, tmp_path: Path, loop: str) -> None:
    """uvloop's transports are no asyncio.Transport subclasses: the fast path takes them over all the same."""
    base = local_cluster.config.path
    http_port = free_port()
    cfg = base.parent / f"event-loop-{loop}-metered.yaml"
    cfg.write_text(base.read_text() + f"\nhttp: {{host: 127.0.0.1, port: {http_port}}}\n")
    proxy = start_proxy(cfg, local_cluster.endpoints, tmp_path / "proxy.log", extra_env={EVENT_LOOP_ENV: loop})
    try:
        assert f"event loop loop={loop}" in proxy.log_text()
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


def _serve_two_workers(local_cluster: Any, tmp_path: Path, command: list[str], env: dict[str, str]) -> str:
    """``serve --workers 2`` started with ``command`` until both workers listen and answer;
    its log."""
    cfg = dsn_cluster_file(local_cluster, tmp_path)
    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*command, "serve", "-c", str(cfg), "--workers", "2", "--port", str(port)],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **env),
        )
        try:
            deadline = time.monotonic() + 60
            while log_path.read_text().count("proxy listening") < 2:
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
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
    return log_path.read_text()


def test_serve_workers_run_on_the_default_loop_of_their_parent(local_cluster, tmp_path: Path) -> None:
    log = _serve_two_workers(local_cluster, tmp_path, [sys.executable, "-m", "proxy.cli"], DEFAULT)
    assert log.count("event loop loop=uvloop") == 3  # the parent and both workers


def test_without_uvloop_serve_and_its_workers_fall_back_to_asyncio_with_one_warning(
    local_cluster, tmp_path: Path
) -> None:
    """The parent cannot import uvloop; its workers could, but run on the loop it runs on."""
    log = _serve_two_workers(local_cluster, tmp_path, [sys.executable, "-c", WITHOUT_UVLOOP], DEFAULT)
    assert log.count("event loop loop=asyncio") == 3
    assert log.count("uvloop is not installed; running on asyncio's event loop") == 1
