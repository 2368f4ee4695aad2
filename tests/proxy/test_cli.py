"""The ``shardgate`` command line."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pymysql

from tests.proxy.sessions_support import dsn_cluster_file
from tests.proxy_process import REPO


def _run(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, **kw)


def _insert_customer_on_every_commerce_shard(local_cluster, base: int, email: str) -> None:
    """One customer row written directly on each commerce shard, bypassing the proxy."""
    n = base + uuid.uuid4().int % 100_000 * 10
    for (ks, _shard), e in local_cluster.endpoints.items():
        if ks != "commerce":
            continue
        conn = pymysql.connect(host=e.host, port=e.port, user=e.user, password=e.password, database=e.database,
                               autocommit=True)
        with conn.cursor() as c:
            c.execute(f"insert into customer(customer_id, email, tenant_id) values ({n}, %s, 1)", (email,))
        conn.close()
        n += 1


def test_help_documents_up_serve_and_cdc() -> None:
    out = _run("--help")
    assert out.returncode == 0
    for word in ("up", "serve", "cdc"):
        assert word in out.stdout


def test_serve_refuses_local_shards_without_dsn() -> None:
    out = _run("serve", "-c", str(REPO / "examples" / "local" / "cluster.yaml"))
    assert out.returncode == 2
    assert "has no dsn" in out.stderr


def test_bad_config_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("listen: {port: nope}\n")
    out = _run("serve", "-c", str(bad))
    assert out.returncode == 2
    assert "listen.port" in out.stderr and "Traceback" not in out.stderr


def test_cdc_writes_debezium_ndjson_and_prints_the_resume_position(local_cluster, tmp_path: Path) -> None:
    cfg = dsn_cluster_file(local_cluster, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "cdc", "-c", str(cfg), "--tables", "commerce.customer",
         "--from", "current", "--format", "debezium", "--max-rows", "2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    err_lines: list[str] = []
    opened = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err_lines.append(line)
            if "vstream opened" in line:
                opened.set()  # "current" is fixed: rows written from now on are streamed

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        # a fixed sleep raced the stream's start on a loaded machine (rows written before it
        # fixed "current" were never seen, and the run waited for them until its timeout)
        assert opened.wait(60), "".join(err_lines)
        _insert_customer_on_every_commerce_shard(local_cluster, 700_000, "cli")
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.wait(timeout=60)
        reader.join(10)
        err = "".join(err_lines)
    finally:
        if proc.poll() is None:
            proc.kill()
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(events) == 2
    assert {ev["op"] for ev in events} == {"c"}
    assert {ev["source"]["shard"] for ev in events} == {"-80", "80-"}
    # email is VARBINARY: Debezium's default binary handling is base64
    assert all(ev["after"]["email"] == "Y2xp" and ev["before"] is None for ev in events), events
    assert "resume position: [" in err


def test_cdc_from_snapshot_copies_rows_first_and_a_run_stopped_during_the_copy_has_no_resume_position(
    local_cluster, tmp_path: Path
) -> None:
    cfg = dsn_cluster_file(local_cluster, tmp_path)
    # A row on every shard: the copy has more than one group.
    _insert_customer_on_every_commerce_shard(local_cluster, 800_000, "snap")
    out = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "cdc", "-c", str(cfg), "--tables", "commerce.customer",
         "--from", "snapshot", "--format", "debezium", "--max-rows", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    first = json.loads(out.stdout.splitlines()[0])
    assert (first["op"], first["source"]["snapshot"]) == ("r", "true")
    assert "resume position: none" in out.stderr and "--from snapshot" in out.stderr
