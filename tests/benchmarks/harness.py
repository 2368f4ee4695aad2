"""Shared benchmark scaffolding: a local cluster in a temp dir, proxy processes, and
a closed-loop load generator (threads with mysqlclient, which releases the GIL
while waiting on the socket) reporting QPS and latency percentiles."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import MySQLdb

from proxy.cluster import LocalCluster
from proxy.engine.sequence import SequenceAllocator
from proxy.pools import ShardAddress, ShardPools
from proxy.vcursor import SessionVCursor
from proxy.worker_cpus import worker_environments
from tests.conftest import example_cluster_config
from tests.proxy_process import ProxyProcess, free_port, start_proxy, stop_proxy


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()} · {os.cpu_count()} cores · {cpu} · Python {platform.python_version()}"


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds a process used so far (from /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / _CLOCK_TICKS, int(fields[12]) / _CLOCK_TICKS  # utime, stime (fields 14, 15)


def cpu_seconds(*pids: int) -> float:
    """User + system CPU time the processes ``pids`` used so far (from /proc/<pid>/stat; a
    process gone counts 0): the figure a shared machine does not distort, unlike QPS."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / _CLOCK_TICKS


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children, ...)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


@contextmanager
def local_cluster() -> Iterator[LocalCluster]:
    with tempfile.TemporaryDirectory(prefix="shardgate-bench-") as tmp:
        config = example_cluster_config(Path(tmp) / "data")
        cluster = LocalCluster(config)
        asyncio.run(cluster.start())
        try:
            yield cluster
        finally:
            asyncio.run(cluster.stop())


def shard_pids(cluster: LocalCluster) -> list[int]:
    """The mariadbd processes of the cluster's shards."""
    pids = (cluster.pid(s.key[0], s.key[1]) for s in cluster.local_shards)
    return [pid for pid in pids if pid is not None]


def session_vcursor(cluster: LocalCluster, vschema: Any) -> SessionVCursor:
    """The proxy's own VCursor (its shard pools, which read row packets in bulk) over
    ``vschema``, outside a transaction: engine primitives measured as the proxy runs them,
    not through the engine tests' aiomysql VCursor (which reads rows one at a time, ~3x
    the CPU a row: 20,000 rows cost ~60 ms there). ``await vc.pools.close()`` when done."""
    addresses = [ShardAddress.of(ks, shard, e)
                 for (ks, shard), e in cluster.endpoints.items()]
    return SessionVCursor(lambda: vschema, ShardPools(addresses, maxsize=8), lambda: None, SequenceAllocator())


@dataclass
class ProxyGroup:
    """The proxy processes sharing one port (SO_REUSEPORT); the first stands for them all
    where a benchmark needs one address or process."""

    procs: list[ProxyProcess]

    @property
    def host(self) -> str:
        return self.procs[0].host

    @property
    def port(self) -> int:
        return self.procs[0].port

    @property
    def proc(self) -> Any:
        return self.procs[0].proc

    @property
    def log(self) -> Path:
        return self.procs[0].log

    @property
    def pids(self) -> list[int]:
        return [p.proc.pid for p in self.procs]

    def connect(self, database: str | None = None, **kw: object) -> Any:
        return self.procs[0].connect(database, **kw)


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a TCP socket listening on ``port`` (from /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd) in inodes:
                return True
        except OSError:
            continue
    return False


@contextmanager
def proxies(cluster: LocalCluster, workers: int = 1, env: dict[str, str] | None = None) -> Iterator[ProxyGroup]:
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="shardgate-bench-proxy-")) / "proxy.log"
    extra_env = {"SHARDGATE_LOG_LEVEL": "WARNING", **(env or {})}
    # Each process on a CPU of its own, as ``--workers N`` starts them (proxy/worker_cpus.py).
    cpus = worker_environments(workers) if "SHARDGATE_PIN_WORKERS" not in extra_env else [{}] * workers
    endpoints = cluster.endpoints
    if os.environ.get("BENCH_SHARD_TRANSPORT") == "tcp":  # A/B of the shards' sockets in one checkout
        endpoints = {key: dataclasses.replace(e, socket=None) for key, e in endpoints.items()}
    procs = [start_proxy(cluster.config.path, endpoints, log, port=port, extra_env={**extra_env, **cpu})
             for cpu in cpus]
    # start_proxy returns once the port answers, which the first process's socket already does
    # for the others: wait until each listens itself, or the warm-up misses the late ones.
    deadline = time.monotonic() + 30
    while not all(_listens(p.proc.pid, port) for p in procs):
        if time.monotonic() > deadline:
            raise RuntimeError(f"not every proxy process listens on {port}")
        time.sleep(0.05)
    try:
        yield ProxyGroup(procs)
    finally:
        for p in procs:
            stop_proxy(p)


@dataclass
class LoadResult:
    qps: float
    p50_ms: float
    p99_ms: float
    errors: int
    count: int = 0  # operations completed


def closed_loop(
    connect: Callable[[], MySQLdb.Connection],
    op: Callable[[MySQLdb.cursors.Cursor, int], None],
    clients: int,
    seconds: float,
) -> LoadResult:
    """``clients`` threads, each on its own connection, running ``op`` back to back."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    conns = [connect() for _ in range(clients)]
    start_evt = threading.Event()
    stop_at = [0.0]

    def worker(i: int) -> None:
        cur = conns[i].cursor()
        lat = latencies[i]
        n = i * 1_000_003
        start_evt.wait()
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at[0]:
                break
            try:
                op(cur, n)
            except MySQLdb.Error:
                errors[i] += 1
            lat.append(time.perf_counter() - t0)
            n += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    begin = time.perf_counter()
    stop_at[0] = begin + seconds
    start_evt.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - begin
    for c in conns:
        c.close()
    flat = sorted(x for lat in latencies for x in lat)
    if not flat:
        return LoadResult(0.0, 0.0, 0.0, sum(errors), 0)
    return LoadResult(
        qps=len(flat) / elapsed,
        p50_ms=statistics.median(flat) * 1000,
        p99_ms=flat[min(len(flat) - 1, int(len(flat) * 0.99))] * 1000,
        errors=sum(errors),
        count=len(flat),
    )
