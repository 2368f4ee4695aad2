"""A real proxy process (``shardgate worker``) for tests, started over a cluster's shard endpoints."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pymysql

from proxy.server import endpoints_to_json

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ProxyProcess:
    host: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    def connect(self, database: str | None = None, **kw: object) -> pymysql.connections.Connection:
        return pymysql.connect(host=self.host, port=self.port, user="root", password="", database=database, **kw)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def start_proxy(config_path: Path, endpoints: dict, log: Path, port: int | None = None, extra_env: dict | None = None) -> ProxyProcess:
    port = port or free_port()
    env = dict(os.environ, SHARDGATE_ENDPOINTS=endpoints_to_json(endpoints), **(extra_env or {}))
    f = log.open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "worker", "-c", str(config_path), "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=f,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"proxy exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"proxy did not listen on {port}:\n{log.read_text()}") from None
            time.sleep(0.05)
    return ProxyProcess("127.0.0.1", port, proc, log)


def stop_proxy(p: ProxyProcess) -> None:
    if p.proc.poll() is None:
        p.proc.terminate()
        try:
            p.proc.wait(10)
        except subprocess.TimeoutExpired:
            p.proc.kill()
            p.proc.wait()
