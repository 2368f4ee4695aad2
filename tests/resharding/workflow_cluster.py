"""A ``shardgate up`` process over a cluster of its own, for the Reshard workflow's tests.

The workflow runs where the shards run (proxy/resharding/host.py), so these tests start the real
command: ``shardgate up -c <file>`` (local shards, proxy, workflow host) in a child process that a
test may kill -9 and start again, and drive it with ``shardgate reshard`` commands. The cluster
file is the example's (commerce -80/80-, lookup 0) on free ports with its data in a temporary
directory, and its vschema store on ``lookup/0`` (a merge back re-creates ``commerce/-80``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from proxy.cdc import VStream
from proxy.cdc.events import RowOp
from proxy.cluster import find_free_port_range, find_mariadb_binaries
from proxy.cluster.datadir import ensure_template
from proxy.config import ShardEndpoint, load_config
from proxy.resharding.cluster_view import ClusterView
from proxy.resharding.topology import read_topology, serving_endpoints, shard_locator
from tests.conftest import EXAMPLE_CLUSTER_YAML
from tests.proxy_process import REPO, free_port

KEYSPACE = "commerce"
ER_LOCK_DEADLOCK = 1213


def write_cluster_file(work: Path, template_dir: Path, copy_chunk_rows: int = 2000) -> Path:
    files = work / "files"
    files.mkdir(parents=True)
    for name in ("commerce_vschema.json", "commerce_schema.sql", "lookup_vschema.json", "lookup_schema.sql"):
        (files / name).write_text((EXAMPLE_CLUSTER_YAML.parent / name).read_text())
    base = find_free_port_range(12)  # the file's 3 shards and room for the new ones
    path = files / "cluster.yaml"
    path.write_text(
        f"""listen: {{host: 127.0.0.1, port: {free_port()}}}
http: {{host: 127.0.0.1, port: {free_port()}}}
users: [{{user: root, password: ""}}]
vschema_ddl_authorized_users: "%"
local: {{data_dir: {work / "data"}, base_port: {base}}}
vschema_store: {{keyspace: lookup, shard: "0"}}
resharding: {{copy_chunk_rows: {copy_chunk_rows}}}
keyspaces:
  commerce:
    vschema: commerce_vschema.json
    schema: commerce_schema.sql
    shards: ["-80", "80-"]
  lookup:
    vschema: lookup_vschema.json
    schema: lookup_schema.sql
    shards: ["0"]
"""
    )
    # The MariaDB template the session fixtures use (install-db runs once per machine).
    asyncio.run(ensure_template(find_mariadb_binaries(), template_dir))
    (work / "data").mkdir()
    (work / "data" / ".template").symlink_to(template_dir)
    return path


@dataclass
class UpProcess:
    """``shardgate up`` in a child process (its own session, so kill -9 takes only it)."""

    config_path: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    config: object = field(init=False)

    def __post_init__(self) -> None:
        self.config = load_config(self.config_path)

    @property
    def port(self) -> int:
        return self.config.listen.port  # type: ignore[attr-defined]

    def start(self, timeout: float = 120.0) -> None:
        with self.log.open("ab") as f:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "proxy.cli", "up", "-c", str(self.config_path)],
                cwd=REPO, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"shardgate up exited with {self.proc.returncode}:\n{self.log.read_text()[-4000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"shardgate up did not listen:\n{self.log.read_text()[-4000:]}") from None
                time.sleep(0.1)

    def kill(self) -> None:
        """kill -9 (its shards get SIGTERM from the kernel: their parent died)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._wait_shards_down()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._wait_shards_down()

    def _wait_shards_down(self, timeout: float = 60.0) -> None:
        data = self.config.local.data_dir  # type: ignore[attr-defined]
        deadline = time.monotonic() + timeout
        for pid_file in data.glob("*/*/mariadbd.pid"):
            while pid_file.exists() and time.monotonic() < deadline:
                try:
                    os.kill(int(pid_file.read_text().strip()), 0)
                except (ProcessLookupError, ValueError, FileNotFoundError):
                    break
                time.sleep(0.1)

    def connect(self, **kw: object) -> pymysql.Connection:
        return pymysql.connect(host="127.0.0.1", port=self.port, user="root", password="", database=KEYSPACE,
                               autocommit=True, **kw)


def reshard(
    config_path: Path, workflow: str, *verb: str, keyspace: str = KEYSPACE, timeout: float = 300.0
) -> subprocess.CompletedProcess[str]:
    """``shardgate reshard -c <file> --workflow W --keyspace commerce <verb...>``."""
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", "reshard", "-c", str(config_path), "--workflow", workflow,
         "--keyspace", keyspace, *verb],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )


def status(config_path: Path, workflow: str) -> dict:
    done = reshard(config_path, workflow, "status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def shard_endpoints(config_path: Path, keyspace: str = KEYSPACE) -> dict[str, ShardEndpoint]:
    """Every known shard of the keyspace (the stored topology's), as the workflow sees them."""
    async def read() -> dict[str, ShardEndpoint]:
        view = ClusterView(load_config(config_path))
        try:
            return await view.endpoints(keyspace)
        finally:
            await view.close()

    return asyncio.run(read())


def serving_shards(config_path: Path) -> tuple[str, ...]:
    async def read() -> tuple[str, ...]:
        view = ClusterView(load_config(config_path))
        try:
            return (await view.topology(KEYSPACE)).serving
        finally:
            await view.close()

    return asyncio.run(read())


def kill_shard(config_path: Path, shard: str) -> None:
    """kill -9 one commerce shard's mariadbd (found by its pid file)."""
    data_dir = shard_endpoints_data_dirs(config_path)[shard]
    os.kill(int((data_dir / "mariadbd.pid").read_text().strip()), signal.SIGKILL)


def shard_endpoints_data_dirs(config_path: Path) -> dict[str, Path]:
    async def read() -> dict[str, Path]:
        view = ClusterView(load_config(config_path))
        try:
            topology = await view.topology(KEYSPACE)
            return {s: spec.local.data_dir for s, spec in topology.shards.items() if spec.local is not None}
        finally:
            await view.close()

    return asyncio.run(read())


class Writer:
    """Commits rows through the proxy without pause: single-shard inserts and two-row transactions
    that usually span shards; remembers what committed and what failed."""

    def __init__(self, up: UpProcess, first_id: int) -> None:
        self.up = up
        self.next_id = first_id
        self.committed: set[int] = set()
        self.errors: list[str] = []
        self.retried = 0
        self.write_seconds: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        conn = self.up.connect(read_timeout=60)
        try:
            while not self._stop.is_set():
                ids = [self.next_id] if self.next_id % 2 else [self.next_id, self.next_id + 1]
                self.next_id += len(ids)
                started = time.perf_counter()
                try:
                    with conn.cursor() as cur:
                        if len(ids) > 1:
                            cur.execute("begin")
                        for i in ids:
                            cur.execute(
                                "insert into customer (customer_id, email, tenant_id) values (%s, %s, %s)",
                                (i, f"c{i}@example.com".encode(), i % 7),
                            )
                        if len(ids) > 1:
                            cur.execute("commit")
                    self.committed.update(ids)
                except pymysql.MySQLError as e:
                    try:
                        conn.rollback()
                    except pymysql.MySQLError:
                        conn = self.up.connect(read_timeout=60)
                    if e.args and e.args[0] == ER_LOCK_DEADLOCK:
                        # A transaction caught by the switch is rolled back as a deadlock victim is:
                        # the application runs it again (under new ids: nothing of it committed).
                        self.retried += 1
                    else:
                        self.errors.append(f"{ids}: {e}")
                self.write_seconds.append(time.perf_counter() - started)
                time.sleep(0.002)
        finally:
            conn.close()


class ChangeConsumer:
    """A Python VStream over ``commerce.customer`` from "current", across the switch (it follows the
    journal to the new shards): the customer ids of the inserts it saw, in order."""

    def __init__(self, up: UpProcess) -> None:
        self.up = up
        self.seen: list[int] = []
        self.error: BaseException | None = None
        self.opened = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        assert self.opened.wait(60), f"the change stream did not open: {self.error}"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            asyncio.run(self._follow())
        except BaseException as e:  # handed to the test by stop()
            self.error = e
            self.opened.set()

    async def _follow(self) -> None:
        config = self.up.config
        topologies = await read_topology(config)  # type: ignore[arg-type]
        endpoints = {k: e for k, e in serving_endpoints(topologies).items() if k[0] == KEYSPACE}
        async with VStream(
            endpoints, [f"{KEYSPACE}.customer"], start="current", heartbeat_interval=0.2,
            shard_locator=shard_locator(config),  # type: ignore[arg-type]
        ) as stream:
            self.opened.set()
            async for group in stream:
                for event in group.row_events():
                    if event.op is RowOp.INSERT:
                        self.seen.extend(int(change.after["customer_id"]) for change in event.changes if change.after)
                if self._stop.is_set():
                    return
