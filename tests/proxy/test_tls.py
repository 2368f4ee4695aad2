"""TLS on the client side (listen.tls) and the refusal to expose a password-less proxy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pymysql
import pytest
import yaml

from tests.proxy_process import REPO, free_port, start_proxy, stop_proxy


def _config_copy(tmp: Path, **listen: object) -> Path:
    """The example cluster file, with absolute paths and a different listen block."""
    src = REPO / "examples" / "local" / "cluster.yaml"
    doc = yaml.safe_load(src.read_text())
    for ks in doc["keyspaces"].values():
        for key in ("vschema", "schema"):
            if key in ks and ks[key]:
                ks[key] = str((src.parent / ks[key]).resolve())
    doc["listen"] = {**doc.get("listen", {}), **listen}
    out = tmp / "cluster.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


@pytest.fixture(scope="module")
def tls_proxy(local_cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    cfg = _config_copy(tmp, host="127.0.0.1", port=free_port(), tls={"cert": str(cert), "key": str(key)})
    p = start_proxy(cfg, local_cluster.endpoints, tmp / "proxy.log")
    try:
        yield p, cert
    finally:
        stop_proxy(p)


def test_300_consecutive_pymysql_tls_connects_all_succeed(tls_proxy) -> None:
    p, cert = tls_proxy
    for i in range(300):
        conn = pymysql.connect(
            host=p.host, port=p.port, user="root", password="", ssl={"ca": str(cert), "check_hostname": False},
            connect_timeout=5, read_timeout=5,
        )
        try:
            with conn.cursor() as c:
                c.execute("show status like 'Ssl_cipher'") if i == 0 else c.execute("select 1")
        finally:
            conn.close()


def test_tls_session_is_encrypted(tls_proxy) -> None:
    p, cert = tls_proxy
    conn = pymysql.connect(host=p.host, port=p.port, user="root", password="", ssl={"ca": str(cert), "check_hostname": False})
    try:
        assert conn._sock.version().startswith("TLS")  # type: ignore[union-attr]
    finally:
        conn.close()


def test_mariadb_cli_over_tls(tls_proxy) -> None:
    p, cert = tls_proxy
    out = subprocess.run(
        ["mariadb", "-h127.0.0.1", f"-P{p.port}", "-uroot", "--ssl", f"--ssl-ca={cert}", "--quick", "--batch",
         "-e", "show vitess_shards"],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert "lookup/0" in out.stdout


def test_non_loopback_listen_without_passwords_is_refused(local_cluster, tmp_path) -> None:
    cfg = _config_copy(tmp_path, host="0.0.0.0", port=free_port())
    out = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "serve", "-c", str(cfg)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode != 0
    assert "refusing to listen on 0.0.0.0" in out.stderr
