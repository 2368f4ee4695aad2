"""Ordered topics: publish throughput through the proxy beside the raw ceiling of the same inserts
issued directly on MariaDB, commit-to-receive latency for STREAM followers and for pollers, and
the publishers' cost of fanning out to 8 followers.

    python -m tests.benchmarks topics     # BENCH_TX_MESSAGES=20000 BENCH_SINGLE_MESSAGES=4000 BENCH_LATENCY_SAMPLES=400 BENCH_FAN_ROUNDS=3

Publishers, the latency follower and the poller are asyncio tasks of this process (aiomysql); the 8
fan-out followers run in another process and count row packets without decoding them; the proxy is one
process (``shardgate worker``); all share the machine's cores with the MariaDB shards. Beside the rates,
each run prints the CPU time per message of the proxy process and of the topic's shard from the first
publish until every message is visible (/proc/<pid>/stat: steadier than rates on a shared machine).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiomysql
import pymysql

from proxy.config import ShardEndpoint
from tests.benchmarks.harness import cpu_seconds, local_cluster, machine, proxies
from tests.proxy_process import ProxyProcess

KEYSPACE = "commerce"
PUBLISHERS = 4
TX_ROWS = 100
PAYLOAD = "x" * 100
TX_MESSAGES = int(os.environ.get("BENCH_TX_MESSAGES", "20000"))
SINGLE_MESSAGES = int(os.environ.get("BENCH_SINGLE_MESSAGES", "4000"))
LATENCY_SAMPLES = int(os.environ.get("BENCH_LATENCY_SAMPLES", "400"))
LATENCY_RATE = 200.0  # commits per second while measuring latency (no backlog)
FANOUT = 8
FAN_ROUNDS = int(os.environ.get("BENCH_FAN_ROUNDS", "3"))  # (without, with followers) pairs


@dataclass
class Run:
    messages: int
    publish_s: float
    visible_s: float
    proxy_cpu_s: float = 0.0  # CPU of the proxy process, first publish to all visible
    shard_cpu_s: float = 0.0  # CPU of the topic's shard, likewise

    @property
    def cpu(self) -> str:
        return (f"CPU per message: proxy {self.proxy_cpu_s * 1e6 / self.messages:.0f} us,"
                f" shard {self.shard_cpu_s * 1e6 / self.messages:.0f} us")

    @property
    def publish_rate(self) -> float:
        return self.messages / self.publish_s

    @property
    def visible_rate(self) -> float:
        return self.messages / self.visible_s


async def _connect(host: str, port: int, db: str, user: str = "root", password: str = "") -> aiomysql.Connection:
    return await aiomysql.connect(host=host, port=port, user=user, password=password, db=db, autocommit=True)


async def _proxy_conn(p: ProxyProcess) -> aiomysql.Connection:
    return await _connect(p.host, p.port, KEYSPACE)


async def _shard_conn(e: ShardEndpoint) -> aiomysql.Connection:
    return await _connect(e.host, e.port, e.database, e.user, e.password)


async def _exec(conn: aiomysql.Connection, sql: str) -> list[tuple]:
    async with conn.cursor() as cur:
        await cur.execute(sql)
        return list(await cur.fetchall()) if cur.description else []


def _values(n: int) -> str:
    return ",".join([f"('{PAYLOAD}')"] * n)


async def _publish(connect: Callable[[], Awaitable[aiomysql.Connection]], table: str, total: int, per_tx: int,
                   transaction: bool | None = None) -> float:
    """PUBLISHERS connections, transactions of ``per_tx`` messages (autocommit when 1, unless
    ``transaction`` says otherwise); seconds."""
    conns = [await connect() for _ in range(PUBLISHERS)]
    each = total // PUBLISHERS // per_tx
    stmt = f"INSERT INTO `{table}` (payload) VALUES {_values(per_tx)}"
    explicit = per_tx > 1 if transaction is None else transaction

    async def one(conn: aiomysql.Connection) -> None:
        async with conn.cursor() as cur:
            for _ in range(each):
                if explicit:
                    await cur.execute("BEGIN")
                await cur.execute(stmt)
                if explicit:
                    await cur.execute("COMMIT")

    started = time.perf_counter()
    try:
        await asyncio.gather(*(one(c) for c in conns))
        return time.perf_counter() - started
    finally:
        for c in conns:
            c.close()


async def _until(check: Callable[[], Awaitable[bool]], within: float, step: float) -> None:
    deadline = time.monotonic() + within
    while True:
        if await check() or time.monotonic() > deadline:
            return
        await asyncio.sleep(step)


async def _wait_sequenced(shard: aiomysql.Connection, topic: str, started: float) -> float:
    async def done() -> bool:
        return not (await _exec(shard, f"SELECT COUNT(*) FROM `_tms_{topic}` FORCE INDEX (message_id) WHERE message_id IS NULL"))[0][0]

    await _until(done, 120, 0.002)
    return time.perf_counter() - started


async def _topic_run(p: ProxyProcess, shard: aiomysql.Connection, topic: str, total: int, per_tx: int,
                     shard_pid: int = 0, transaction: bool | None = None) -> Run:
    p0, s0 = cpu_seconds(p.proc.pid), cpu_seconds(shard_pid)
    started = time.perf_counter()
    publish_s = await _publish(lambda: _proxy_conn(p), topic, total, per_tx, transaction)
    visible_s = await _wait_sequenced(shard, topic, started)
    p1, s1 = cpu_seconds(p.proc.pid), cpu_seconds(shard_pid)
    return Run(total // PUBLISHERS // per_tx * PUBLISHERS * per_tx, publish_s, visible_s, p1 - p0, s1 - s0)


async def _raw_run(e: ShardEndpoint, table: str, total: int, per_tx: int, shard_pid: int = 0,
                   transaction: bool | None = None) -> Run:
    s0 = cpu_seconds(shard_pid)
    seconds = await _publish(lambda: _shard_conn(e), table, total, per_tx, transaction)
    n = total // PUBLISHERS // per_tx * PUBLISHERS * per_tx
    return Run(n, seconds, seconds, 0.0, cpu_seconds(shard_pid) - s0)


class Follower:
    def __init__(self) -> None:
        self.received: dict[bytes, float] = {}
        self.count = 0
        self.task: asyncio.Task[None] | None = None
        self.conn: aiomysql.Connection | None = None

    async def start(self, p: ProxyProcess, topic: str) -> None:
        self.conn = await _proxy_conn(p)
        await _exec(self.conn, "SET WORKLOAD = OLAP")
        cur = await self.conn.cursor(aiomysql.SSCursor)
        await cur.execute(f"STREAM * FROM `{topic}` WHERE publish_time >= {int(time.time() * 1000)}")
        self.task = asyncio.ensure_future(self._read(cur))

    async def _read(self, cur: aiomysql.SSCursor) -> None:
        while True:
            row = await cur.fetchone()
            if row is None:
                return
            self.count += 1
            payload = bytes(row[2])
            if payload.startswith(b"lat-"):
                self.received[payload] = time.perf_counter()

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self.conn is not None:
            self.conn.close()


async def _poller(p: ProxyProcess, topic: str, received: dict[bytes, float], stop: asyncio.Event) -> None:
    conn = await _proxy_conn(p)
    last = f"{int(time.time() * 1000):016x}0000"
    try:
        async with conn.cursor() as cur:
            while not stop.is_set():
                await cur.execute(f"SELECT message_id, payload FROM `{topic}` WHERE message_id > '{last}'"
                                  " ORDER BY message_id LIMIT 100")
                rows = await cur.fetchall()
                now = time.perf_counter()
                for r in rows:
                    last = r[0]
                    if bytes(r[1]).startswith(b"lat-"):
                        received[bytes(r[1])] = now
                if not rows:
                    await asyncio.sleep(0.001)
    finally:
        conn.close()


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


async def _latency_of(p: ProxyProcess, topic: str, stream: bool) -> list[float]:
    """Commit-to-receive (ms) for one STREAM follower, or one poller (run on their own, so the
    poller's queries do not load the proxy while the follower is measured)."""
    follower = Follower()
    polled: dict[bytes, float] = {}
    stop = asyncio.Event()
    poller: asyncio.Future[None] | None = None
    if stream:
        await follower.start(p, topic)
    else:
        poller = asyncio.ensure_future(_poller(p, topic, polled, stop))
    received = follower.received if stream else polled
    conn = await _proxy_conn(p)
    committed: dict[bytes, float] = {}
    tag = "s" if stream else "p"
    try:
        await asyncio.sleep(0.3)
        async with conn.cursor() as cur:
            for k in range(LATENCY_SAMPLES):
                payload = f"lat-{tag}{k}".encode()
                await cur.execute(f"INSERT INTO `{topic}` (payload) VALUES ('lat-{tag}{k}')")
                committed[payload] = time.perf_counter()
                await asyncio.sleep(1 / LATENCY_RATE)

        async def all_received() -> bool:
            return len(received) >= LATENCY_SAMPLES

        await _until(all_received, 10, 0.01)
    finally:
        stop.set()
        if poller is not None:
            await asyncio.gather(poller, return_exceptions=True)
        await follower.stop()
        conn.close()
    return [(received[m] - t) * 1000 for m, t in committed.items() if m in received]


async def _latency(p: ProxyProcess, topic: str) -> tuple[list[float], list[float]]:
    return await _latency_of(p, topic, stream=True), await _latency_of(p, topic, stream=False)


def _raw_follower(port: int, topic: str, start_ms: int) -> tuple[Any, bytes]:
    """A STREAM follower whose rows are counted off the socket without decoding them (PyMySQL
    for the handshake and the result header only): its connection, and the bytes PyMySQL had
    already buffered past the header."""
    from pymysql.constants import COMMAND

    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", password="", database=KEYSPACE,
                           autocommit=True, ssl_disabled=True)
    with conn.cursor() as cur:
        cur.execute("SET WORKLOAD = OLAP")
    conn._execute_command(COMMAND.COM_QUERY, f"STREAM * FROM `{topic}` WHERE publish_time >= {start_ms}")
    columns = conn._read_packet().read_length_encoded_integer()
    for _ in range(columns + 1):  # column definitions, EOF
        conn._read_packet()
    conn._sock.setblocking(False)
    try:  # what the header's reads buffered beyond it (never blocks: the socket no longer does)
        buffered = conn._rfile.read1(1 << 16) or b""
    except BlockingIOError:
        buffered = b""
    return conn, buffered


def _followers_process(port: int, topic: str, count: int, expected: int, start_ms: int, out: Any) -> None:
    """``count`` STREAM followers in a process of their own, served by one thread and a selector:
    each follower's row packets counted off its socket (headers only, never decoded). Reports how
    many rows the slowest one received and the CPU seconds this process spent receiving.

    One thread rather than a thread per follower: 8 threads blocking in recv() each took the
    GIL back for every ~13 KB chunk, and the process spent 33-53 us of CPU a published message
    (more than the proxy and the topic's shard together, on the same 2 cores: BENCHMARKS.md
    "fanout2"), so the figure measured the benchmark's client rather than the proxy's fan-out."""
    import selectors

    followers = [_raw_follower(port, topic, start_ms) for _ in range(count)]
    out.put("ready")
    counts = [0] * count
    buffers = [bytearray(buffered) for _, buffered in followers]
    selector = selectors.DefaultSelector()
    for k, (conn, _) in enumerate(followers):
        selector.register(conn._sock, selectors.EVENT_READ, k)
    cpu0 = time.process_time()
    open_ = count

    def take(k: int) -> None:
        buf = buffers[k]
        pos, rows, size = 0, 0, len(buf)
        while size - pos >= 4:
            n = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
            if size - pos < 4 + n:
                break
            pos += 4 + n
            rows += 1
        del buf[:pos]
        counts[k] += rows

    for k in range(count):
        take(k)
    deadline = time.monotonic() + 120
    while open_ and time.monotonic() < deadline:
        for key, _ in selector.select(1.0):
            k = key.data
            try:
                chunk = key.fileobj.recv(1 << 20)
            except BlockingIOError:
                continue
            if chunk:
                buffers[k] += chunk
                take(k)
            if not chunk or counts[k] >= expected:
                selector.unregister(key.fileobj)
                open_ -= 1
    cpu = time.process_time() - cpu0
    selector.close()
    for conn, _ in followers:
        conn._sock.setblocking(True)
        conn.close()
    out.put((min(counts), cpu))


async def _fanout(
    p: ProxyProcess, shard: aiomysql.Connection, topic: str, shard_pid: int
) -> tuple[Run, Run, tuple[int, float]]:
    base = await _topic_run(p, shard, topic, TX_MESSAGES // 2, TX_ROWS, shard_pid)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    expected = TX_MESSAGES // 2 // PUBLISHERS // TX_ROWS * PUBLISHERS * TX_ROWS
    proc = ctx.Process(target=_followers_process,
                       args=(p.port, topic, FANOUT, expected, int(time.time() * 1000), out))
    proc.start()
    try:
        assert await asyncio.to_thread(out.get, True, 60) == "ready"
        fanned = await _topic_run(p, shard, topic, TX_MESSAGES // 2, TX_ROWS, shard_pid)
        delivered = await asyncio.to_thread(out.get, True, 180)
    finally:
        await asyncio.to_thread(proc.join, 10)
        if proc.is_alive():
            proc.kill()
    return base, fanned, delivered


async def _bench(p: ProxyProcess, endpoints: dict[tuple[str, str], ShardEndpoint],
                 shard_pid: Callable[[str, str], int | None]) -> None:
    admin = await _proxy_conn(p)
    topics = {}
    for name in ("bench_tx", "bench_batch", "bench_single", "bench_latency", "bench_fanout"):
        await _exec(admin, f"DROP TOPIC IF EXISTS {name}")
        await _exec(admin, f"CREATE TOPIC {name}")
        topics[name] = (await _exec(admin, f"SHOW TOPICS LIKE '{name}'"))[0][2]
    admin.close()
    print(f"machine: {machine()}", flush=True)
    print(f"topics' shards: {topics}", flush=True)

    def shard_of(name: str) -> ShardEndpoint:
        return endpoints[(KEYSPACE, topics[name])]

    def pid_of(name: str) -> int:
        return shard_pid(KEYSPACE, topics[name]) or 0

    # the raw ceiling: the same INSERTs into a copy of the log table, directly on the shard
    raw_conn = await _shard_conn(shard_of("bench_tx"))
    await _exec(raw_conn, "DROP TABLE IF EXISTS raw_topic_log")
    await _exec(raw_conn, "CREATE TABLE raw_topic_log LIKE `_tms_bench_tx`")
    raw_tx = await _raw_run(shard_of("bench_tx"), "raw_topic_log", TX_MESSAGES, TX_ROWS, pid_of("bench_tx"))
    raw_batch = await _raw_run(shard_of("bench_tx"), "raw_topic_log", TX_MESSAGES, TX_ROWS, pid_of("bench_tx"),
                               transaction=False)
    raw_single = await _raw_run(shard_of("bench_tx"), "raw_topic_log", SINGLE_MESSAGES, 1, pid_of("bench_tx"))
    # the proxy's own floor: the same INSERTs of a plain table through the proxy (shard-targeted
    # session, sent verbatim: no topic, no sequencer)
    target = f"{KEYSPACE}:{topics['bench_tx']}"
    plain_single = await _publish(lambda: _connect(p.host, p.port, target), "raw_topic_log", SINGLE_MESSAGES, 1)
    plain_rate = (SINGLE_MESSAGES // PUBLISHERS * PUBLISHERS) / plain_single
    await _exec(raw_conn, "DROP TABLE raw_topic_log")
    raw_conn.close()

    tx_shard = await _shard_conn(shard_of("bench_tx"))
    single_shard = await _shard_conn(shard_of("bench_single"))
    batch_shard = await _shard_conn(shard_of("bench_batch"))
    tx = await _topic_run(p, tx_shard, "bench_tx", TX_MESSAGES, TX_ROWS, pid_of("bench_tx"))
    # The same 100 messages as one autocommit INSERT: the proxy owns its transaction (a direct
    # publish: ids in the write, no pass), where BEGIN; INSERT; COMMIT above is the client's.
    batch = await _topic_run(p, batch_shard, "bench_batch", TX_MESSAGES, TX_ROWS, pid_of("bench_batch"),
                             transaction=False)
    single = await _topic_run(p, single_shard, "bench_single", SINGLE_MESSAGES, 1, pid_of("bench_single"))
    for label, raw, run in (("100 messages per transaction", raw_tx, tx),
                            ("100 messages per autocommit INSERT", raw_batch, batch),
                            ("single-message transactions", raw_single, single)):
        print(f"{label}: raw {raw.publish_rate:,.0f} msg/s; through the proxy {run.publish_rate:,.0f} msg/s committed"
              f" ({run.publish_rate / raw.publish_rate:.2f} of raw), {run.visible_rate:,.0f} msg/s visible"
              f" ({run.visible_rate / raw.publish_rate:.2f} of raw); raw shard CPU per message"
              f" {raw.shard_cpu_s * 1e6 / raw.messages:.0f} us; topic {run.cpu}", flush=True)
    print(f"single-message INSERTs of a plain table through the proxy: {plain_rate:,.0f} msg/s"
          f" ({plain_rate / raw_single.publish_rate:.2f} of raw)", flush=True)

    stream_ms, poll_ms = await _latency(p, "bench_latency")
    print(f"commit-to-receive at {LATENCY_RATE:.0f} commits/s, {LATENCY_SAMPLES} samples:"
          f" STREAM p50 {statistics.median(stream_ms):.2f} ms p99 {_pct(stream_ms, 0.99):.2f} ms (got {len(stream_ms)});"
          f" poller p50 {statistics.median(poll_ms):.2f} ms p99 {_pct(poll_ms, 0.99):.2f} ms (got {len(poll_ms)})",
          flush=True)

    fan_shard = await _shard_conn(shard_of("bench_fanout"))
    costs = []
    for r in range(1, FAN_ROUNDS + 1):
        # Rounds of (without, with) alternated: one 3 s phase without followers swung 22-44k msg/s
        # on this shared machine (BENCHMARKS.md, re-run at 19:11), so one pair's ratio says little.
        base, fanned, (delivered, followers_cpu) = await _fanout(p, fan_shard, "bench_fanout", pid_of("bench_fanout"))
        costs.append(1 - fanned.publish_rate / base.publish_rate)
        print(f"fan-out to {FANOUT} followers (another process), round {r}: publishers {base.publish_rate:,.0f} ->"
              f" {fanned.publish_rate:,.0f} msg/s (cost {costs[-1]:.0%}; visible {base.visible_rate:,.0f} ->"
              f" {fanned.visible_rate:,.0f}, cost {1 - fanned.visible_rate / base.visible_rate:.0%});"
              f" every follower got {delivered:,} of"
              f" {fanned.messages:,}; {base.cpu} without followers, {fanned.cpu} with them;"
              f" the followers' process {followers_cpu * 1e6 / fanned.messages:.1f} us", flush=True)
    print(f"fan-out to {FANOUT} followers: median cost {statistics.median(costs):.0%} over {FAN_ROUNDS} rounds"
          f" ({', '.join(f'{c:.0%}' for c in costs)})", flush=True)
    for c in (tx_shard, single_shard, batch_shard, fan_shard):
        c.close()


def main() -> None:
    with local_cluster() as cluster, proxies(cluster) as p:
        asyncio.run(_bench(p, cluster.endpoints, cluster.pid))


if __name__ == "__main__":
    main()
