"""Messaging: enqueue -> receive -> ack throughput (2 shards, 4 subscribers) and
commit-to-receive latency, beside the raw ceiling of the same writes issued directly against
MariaDB (100-row INSERTs, then per batch the postpone UPDATE and the ack UPDATE by id list).

    python -m tests.benchmarks messaging     # BENCH_MESSAGES=20000 BENCH_LATENCY_SAMPLES=300 BENCH_WORKERS=1
                                             # BENCH_BINLOG_WATCH=1 (0: messaging.binlog_watch false)

Beside the rates it prints the CPU time per message (user + system, from /proc) of the proxy
process and, separately, of its helper processes (the binlog decoders of the watch) over the
end-to-end run: steadier than msg/s on a shared machine.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiomysql

from proxy.config import ShardEndpoint
from proxy.engine.result import decode_text_row, split_packets
from proxy.pools import RowPacketReader
from tests.benchmarks.harness import (
    cpu_seconds,
    cpu_times,
    descendants,
    local_cluster,
    machine,
    proxies,
)
from tests.proxy_process import ProxyProcess

TABLE = "customer_events"
SHARDS = ("-80", "80-")
SUBSCRIBERS = 4
PRODUCERS = 2
INSERT_ROWS = 100
BATCH_SIZE = 50
STREAM_READ_ROWS = 1 << 16  # a subscriber takes whatever rows have arrived, up to this many
COMMENT = (
    f"vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size={BATCH_SIZE},"
    "vt_cache_size=10000,vt_poller_interval=1"
)
NS = 1_000_000_000
SETTLE_WINDOW_S = 0.2
SETTLE_IDLE_CPU_S = 0.01  # shard CPU in a window that counts as idle (5% of a core)
SETTLE_MAX_S = 10.0
# The shards' SHOW GLOBAL STATUS counters printed per 100 messages for each phase: what the
# shards execute for the same messages, end to end against raw.
STATUS = (
    "Questions", "Com_insert", "Com_update", "Com_select", "Com_delete", "Com_begin", "Com_commit",
    "Handler_read_key", "Handler_read_next", "Handler_read_rnd_next", "Handler_update", "Handler_write",
    "Handler_commit", "Innodb_rows_read", "Innodb_rows_updated", "Bytes_received", "Bytes_sent",
    "Binlog_bytes_written",
)  # fmt: skip


@dataclass
class Throughput:
    messages: int
    seconds: float
    duplicates: int = 0
    proxy_cpu: float = 0.0  # seconds, the proxy process
    helper_cpu: float = 0.0  # seconds, its child processes (binlog decoders)
    shard_cpu: float = 0.0  # seconds, the two shards' mariadbd processes
    proxy_sys: float = 0.0  # seconds, the proxy process's part in the kernel (socket calls)
    client_cpu: float = 0.0  # seconds, this process (the producers and subscribers or workers)
    status: dict[str, int] | None = None  # the shards' status counters over the run, summed

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0


async def _connect_proxy(p: ProxyProcess) -> aiomysql.Connection:
    return await aiomysql.connect(host=p.host, port=p.port, user="root", password="", db="commerce", autocommit=True)


async def _connect_shard(e: ShardEndpoint) -> aiomysql.Connection:
    return await aiomysql.connect(host=e.host, port=e.port, user=e.user, password=e.password, db=e.database,
                                  autocommit=True)  # fmt: skip


async def _prepare(endpoints: dict[str, ShardEndpoint]) -> None:
    for e in endpoints.values():
        conn = await _connect_shard(e)
        try:
            async with conn.cursor() as cur:
                await cur.execute(f"ALTER TABLE {TABLE} COMMENT '{COMMENT}'")
                await cur.execute(f"DELETE FROM {TABLE}")
        finally:
            conn.close()


async def _status(endpoints: dict[str, ShardEndpoint]) -> dict[str, int]:
    """The ``STATUS`` counters, summed over the shards."""
    total = dict.fromkeys(STATUS, 0)
    for e in endpoints.values():
        conn = await _connect_shard(e)
        try:
            async with conn.cursor() as cur:
                await cur.execute("SHOW GLOBAL STATUS")
                for name, value in await cur.fetchall():
                    if name in total:
                        total[name] += int(value)
        finally:
            conn.close()
    return total


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in STATUS}


async def _settle(shard_pids: list[int]) -> float:
    """Wait (at most ``SETTLE_MAX_S``) until the shards are idle: InnoDB purges a phase's
    updates and the next ``_prepare``'s DELETE in the background for up to ~2 s after a 20k
    run (5 us of shard CPU per message after the raw phase alone), which otherwise ran inside
    the following phase's window and was charged to it. Returns the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < SETTLE_MAX_S:
        before = cpu_seconds(*shard_pids)
        await asyncio.sleep(SETTLE_WINDOW_S)
        if cpu_seconds(*shard_pids) - before <= SETTLE_IDLE_CPU_S:
            break
    return time.perf_counter() - start


async def _stream_batches(cur: aiomysql.SSCursor) -> AsyncIterator[list[tuple[bytes | None, ...]]]:
    """The rows of an unbuffered STREAM result (its header read by ``execute``), a list per
    read off the socket: whole buffers split into row packets (``RowPacketReader``, as the
    proxy reads its shards), each row's values as the bytes the proxy sent.

    Why not ``SSCursor.fetchone``: aiomysql's two awaited reads, packet object and per-value
    conversion cost 3.5 us a row, this reader 1.1 (2.1 converting every value as aiomysql
    does: ``MessageQueue``), for 100k rows of this benchmark's shape fed to both in the proxy's 50-row writes
    (process CPU, 2026-11-24): a cost of aiomysql's reader, not of a subscriber. It was about
    half of what the end-to-end phase's clients spent beyond raw's (1.8 -> 1.4 times raw's
    client CPU: BENCHMARKS.md "msg")."""
    rows = RowPacketReader(cur.connection)
    while True:
        block, eof = await rows.read(STREAM_READ_ROWS)
        if block is not None:
            yield [decode_text_row(p) for p in split_packets(block.data)]
        if eof is not None:
            return


class Subscriber:
    """A STREAM read in bulk (``_stream_batches``); received ids are acked in groups (whatever
    has arrived since the last ack, up to ``BATCH_SIZE``) on a second connection, as a worker
    would."""

    def __init__(self, proxy: ProxyProcess, on_receive=None, on_acked=None) -> None:
        self.proxy = proxy
        self.on_receive = on_receive
        self.on_acked = on_acked
        self.pending: list[int] = []
        self.has_pending = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.conns: list[aiomysql.Connection] = []

    async def start(self) -> None:
        stream_conn, ack_conn = await _connect_proxy(self.proxy), await _connect_proxy(self.proxy)
        self.conns = [stream_conn, ack_conn]
        async with stream_conn.cursor() as cur:
            await cur.execute("SET WORKLOAD = OLAP")
        cur = await stream_conn.cursor(aiomysql.SSCursor)
        await cur.execute(f"STREAM * FROM {TABLE}")
        self.tasks = [asyncio.ensure_future(self._read(cur)), asyncio.ensure_future(self._ack(ack_conn))]

    async def _read(self, cur: aiomysql.SSCursor) -> None:
        async for rows in _stream_batches(cur):
            ids = [int(row[0]) for row in rows]  # an id is never NULL
            if self.on_receive is not None:
                at = time.perf_counter()
                for i in ids:
                    self.on_receive(i, at)
            self.pending.extend(ids)
            self.has_pending.set()

    async def _ack(self, conn: aiomysql.Connection) -> None:
        while True:
            await self.has_pending.wait()
            ids, self.pending = self.pending[:BATCH_SIZE], self.pending[BATCH_SIZE:]
            if not self.pending:
                self.has_pending.clear()
            async with conn.cursor() as cur:
                await cur.execute(
                    f"UPDATE {TABLE} SET time_acked = {time.time_ns()}, time_next = NULL"
                    f" WHERE id IN ({', '.join(str(i) for i in ids)}) AND time_acked IS NULL"
                )
            if self.on_acked is not None:
                self.on_acked(ids)

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        for t in self.tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
        for c in self.conns:
            c.close()


async def _end_to_end(
    proxy: ProxyProcess, endpoints: dict[str, ShardEndpoint], messages: int, first_id: int, expect_helpers: int,
    shard_pids: list[int],
) -> Throughput:
    seen: dict[int, int] = {}
    done = asyncio.Event()

    def on_acked(ids: list[int]) -> None:
        for i in ids:
            seen[i] = seen.get(i, 0) + 1
        if len(seen) >= messages:
            done.set()

    subs = [Subscriber(proxy, on_acked=on_acked) for _ in range(SUBSCRIBERS)]
    for s in subs:
        await s.start()
    await asyncio.sleep(0.3)
    pid = proxy.proc.pid
    # The watch's decoders (and the zygote that forks them) start with the first subscriber.
    for _ in range(100):
        if len(helpers := descendants(pid)) >= expect_helpers:
            break
        await asyncio.sleep(0.1)
    status_before = await _status(endpoints)
    cpu_before = cpu_seconds(pid), sum(map(cpu_seconds, helpers)), cpu_seconds(*shard_pids)
    sys_before, client_before = cpu_times(pid)[1], cpu_seconds(os.getpid())
    start = time.perf_counter()

    async def produce(worker: int) -> None:
        conn = await _connect_proxy(proxy)
        try:
            async with conn.cursor() as cur:
                for base in range(first_id + worker * INSERT_ROWS, first_id + messages, PRODUCERS * INSERT_ROWS):
                    values = ", ".join(f"({i}, {i % 10}, '{{}}')" for i in range(base, min(base + INSERT_ROWS, first_id + messages)))
                    await cur.execute(f"INSERT INTO {TABLE} (id, tenant_id, message) VALUES {values}")
        finally:
            conn.close()

    await asyncio.gather(*(produce(w) for w in range(PRODUCERS)))
    await asyncio.wait_for(done.wait(), timeout=120)
    elapsed = time.perf_counter() - start
    proxy_cpu = cpu_seconds(pid) - cpu_before[0]
    proxy_sys = cpu_times(pid)[1] - sys_before
    client_cpu = cpu_seconds(os.getpid()) - client_before
    helper_cpu = sum(map(cpu_seconds, helpers)) - cpu_before[1]
    shard_cpu = cpu_seconds(*shard_pids) - cpu_before[2]
    status = _delta(status_before, await _status(endpoints))
    for s in subs:
        await s.stop()
    return Throughput(messages, elapsed, sum(n - 1 for n in seen.values()), proxy_cpu, helper_cpu, shard_cpu,
                      proxy_sys, client_cpu, status)  # fmt: skip


async def _raw_ceiling(
    endpoints: dict[str, ShardEndpoint], messages: int, first_id: int, shard_pids: list[int]
) -> Throughput:
    """The same writes straight to the shards: producers insert 100-row batches (half the
    rows per shard, as the vindex would split them), workers postpone then ack each batch of
    ``BATCH_SIZE`` ids on its shard."""
    queue: asyncio.Queue[tuple[str, list[int]] | None] = asyncio.Queue()
    status_before = await _status(endpoints)
    shard_before, client_before = cpu_seconds(*shard_pids), cpu_seconds(os.getpid())
    start = time.perf_counter()

    async def produce(worker: int) -> None:
        conns = {s: await _connect_shard(e) for s, e in endpoints.items()}
        try:
            for base in range(first_id + worker * INSERT_ROWS, first_id + messages, PRODUCERS * INSERT_ROWS):
                ids = list(range(base, min(base + INSERT_ROWS, first_id + messages)))
                halves = {SHARDS[0]: ids[: len(ids) // 2], SHARDS[1]: ids[len(ids) // 2 :]}
                for shard, part in halves.items():
                    values = ", ".join(f"({i}, {i % 10}, '{{}}')" for i in part)
                    async with conns[shard].cursor() as cur:
                        await cur.execute(f"INSERT INTO {TABLE} (id, tenant_id, message) VALUES {values}")
                    for k in range(0, len(part), BATCH_SIZE):
                        queue.put_nowait((shard, part[k : k + BATCH_SIZE]))
        finally:
            for c in conns.values():
                c.close()

    async def work() -> int:
        conns = {s: await _connect_shard(e) for s, e in endpoints.items()}
        handled = 0
        try:
            while (item := await queue.get()) is not None:
                shard, ids = item
                id_list = ", ".join(map(str, ids))
                async with conns[shard].cursor() as cur:
                    now = time.time_ns()
                    await cur.execute(
                        f"UPDATE {TABLE} SET epoch = epoch + 1, time_next = {now + 60 * NS}"
                        f" WHERE id IN ({id_list}) AND time_acked IS NULL"
                    )
                    await cur.execute(
                        f"UPDATE {TABLE} SET time_acked = {time.time_ns()}, time_next = NULL"
                        f" WHERE id IN ({id_list}) AND time_acked IS NULL"
                    )
                handled += len(ids)
        finally:
            for c in conns.values():
                c.close()
        return handled

    workers = [asyncio.ensure_future(work()) for _ in range(SUBSCRIBERS)]
    await asyncio.gather(*(produce(w) for w in range(PRODUCERS)))
    for _ in workers:
        queue.put_nowait(None)
    handled = sum(await asyncio.gather(*workers))
    elapsed = time.perf_counter() - start
    shard_cpu, client_cpu = cpu_seconds(*shard_pids) - shard_before, cpu_seconds(os.getpid()) - client_before
    return Throughput(handled, elapsed, shard_cpu=shard_cpu, client_cpu=client_cpu,
                      status=_delta(status_before, await _status(endpoints)))  # fmt: skip


async def _latency(proxy: ProxyProcess, samples: int, first_id: int) -> tuple[list[float], list[float]]:
    """One message at a time, no backlog: (insert-returned -> received, insert-sent -> received)."""
    arrivals: dict[int, float] = {}
    arrived = asyncio.Event()

    def on_receive(mid: int, at: float) -> None:
        arrivals[mid] = at
        arrived.set()

    subs = [Subscriber(proxy, on_receive=on_receive) for _ in range(SUBSCRIBERS)]
    for s in subs:
        await s.start()
    await asyncio.sleep(1.5)  # past every subscriber's first poll: only the commit notify counts
    conn = await _connect_proxy(proxy)
    commit_to_receive: list[float] = []
    send_to_receive: list[float] = []
    try:
        async with conn.cursor() as cur:
            for n in range(samples):
                mid = first_id + n
                arrived.clear()
                sent = time.perf_counter()
                await cur.execute(f"INSERT INTO {TABLE} (id, tenant_id, message) VALUES ({mid}, 1, '{{}}')")
                committed = time.perf_counter()
                while mid not in arrivals:
                    await asyncio.wait_for(arrived.wait(), timeout=10)
                    arrived.clear()
                commit_to_receive.append(max(arrivals[mid] - committed, 0.0))
                send_to_receive.append(arrivals[mid] - sent)
                await asyncio.sleep(0.005)
    finally:
        conn.close()
        for s in subs:
            await s.stop()
    return commit_to_receive, send_to_receive


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


async def _run(
    proxy: ProxyProcess, endpoints: dict[str, ShardEndpoint], messages: int, samples: int, watch: bool,
    shard_pids: list[int],
) -> None:
    await _prepare(endpoints)
    settled = [await _settle(shard_pids)]
    raw = await _raw_ceiling(endpoints, messages, 1_000_000, shard_pids)
    await _prepare(endpoints)
    settled.append(await _settle(shard_pids))
    e2e = await _end_to_end(proxy, endpoints, messages, 2_000_000, 1 + len(SHARDS) if watch else 0, shard_pids)
    print(f"raw ceiling (direct MariaDB, same writes): {raw.rate:9.0f} msg/s  ({raw.messages} in {raw.seconds:.2f} s)")
    print(f"end to end via proxy, {SUBSCRIBERS} subscribers:   {e2e.rate:9.0f} msg/s  ({e2e.messages} in {e2e.seconds:.2f} s,"
          f" duplicates {e2e.duplicates})  = {100 * e2e.rate / raw.rate:.0f}% of raw")  # fmt: skip
    print(f"CPU per message: proxy process {1e6 * e2e.proxy_cpu / e2e.messages:.1f} us"
          f" ({1e6 * e2e.proxy_sys / e2e.messages:.1f} in the kernel),"
          f" its helper processes (binlog decoders) {1e6 * e2e.helper_cpu / e2e.messages:.1f} us,"
          f" the {len(shard_pids)} shards' mariadbd {1e6 * e2e.shard_cpu / e2e.messages:.1f} us"
          f" (raw: {1e6 * raw.shard_cpu / raw.messages:.1f} us),"
          f" this process's clients {1e6 * e2e.client_cpu / e2e.messages:.1f} us"
          f" (raw: {1e6 * raw.client_cpu / raw.messages:.1f} us)")  # fmt: skip
    print(f"shards idle before each phase after {settled[0]:.1f} s (raw), {settled[1]:.1f} s (end to end)")
    assert raw.status is not None and e2e.status is not None
    print("shards' status per 100 messages (end to end / raw):")
    print("  " + ", ".join(
        f"{k} {100 * e2e.status[k] / e2e.messages:.1f}/{100 * raw.status[k] / raw.messages:.1f}" for k in STATUS
    ))  # fmt: skip
    await _prepare(endpoints)
    commit, send = await _latency(proxy, samples, 3_000_000)
    print(f"commit-to-receive ({samples} msgs, no backlog): p50 {_pct(commit, 0.5):.2f} ms  p99 {_pct(commit, 0.99):.2f} ms"
          f"  mean {statistics.mean(commit) * 1000:.2f} ms")  # fmt: skip
    print(f"insert-sent-to-receive:                     p50 {_pct(send, 0.5):.2f} ms  p99 {_pct(send, 0.99):.2f} ms")


def main() -> None:
    messages = int(os.environ.get("BENCH_MESSAGES", "20000"))
    samples = int(os.environ.get("BENCH_LATENCY_SAMPLES", "300"))
    workers = int(os.environ.get("BENCH_WORKERS", "1"))
    watch = os.environ.get("BENCH_BINLOG_WATCH", "1") != "0"
    print(f"machine: {machine()}")
    print(f"messaging.binlog_watch: {str(watch).lower()}")
    print(f"proxy worker processes: {workers} (each runs its own messaging service over the same shards)")
    print(f"{messages} messages, {PRODUCERS} producers x {INSERT_ROWS}-row INSERTs, {SUBSCRIBERS} subscribers,"
          f" vt_batch_size={BATCH_SIZE}, 2 shards")  # fmt: skip
    with local_cluster() as cluster:
        endpoints = {s: cluster.endpoint("commerce", s) for s in SHARDS}
        asyncio.run(_prepare(endpoints))  # before the proxy starts: it reads the comment at start-up
        if not watch:
            with cluster.config.path.open("a") as f:  # the benchmark's own copy of the cluster file
                f.write("\nmessaging: {binlog_watch: false}\n")
        with proxies(cluster, workers=workers) as proxy:
            pids = [p for s in SHARDS if (p := cluster.pid("commerce", s)) is not None]
            asyncio.run(_run(proxy, endpoints, messages, samples, watch, pids))


if __name__ == "__main__":
    main()
