"""CDC benchmark: the VStream over 2 shards beside the raw python-mysql-replication reader,
in the same run, on the same binlogs.

* Throughput: a backlog is written to both shards first (single-row transactions, then
  batched 100-row transactions); each reader then drains it from the same start position.
  Two raw baselines read both shards at the same time: ``raw`` with one thread per shard in
  one process (the library's usual use; the shards share one GIL) and ``raw-procs`` with one
  process per shard (the parallelism the VStream's decoder processes have). Rates are per
  shard; the ratio column is the VStream's rate over each baseline's.
* Latency: writer processes commit single-row transactions at a fixed total rate (1k/s over
  the 2 shards) while a reader streams live; latency is from the moment the writer's COMMIT
  returned to the moment the row reached the consumer (raw: ``fetchone`` returned the rows
  event; VStream: the transaction group was yielded; VStream over SQL: a client of a proxy
  process running ``VSTREAM * FROM customer`` had the row), p50/p99.

Run: ``python -m tests.benchmarks cdc`` (not part of the default test suite).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import threading
import time
from dataclasses import dataclass

import pymysql
import pymysql.cursors
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import HeartbeatLogEvent, MariadbGtidEvent, QueryEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from proxy.cdc import GtidPosition, Vgtid, VStream
from proxy.cdc.replica_ids import next_replica_server_id
from proxy.config import ShardEndpoint
from tests.benchmarks.harness import local_cluster, machine, proxies
from tests.proxy_process import ProxyProcess

TABLE = "cdc_bench"
SHARDS = (("commerce", "-80"), ("commerce", "80-"))
SINGLE_ROW_TXNS = 6000  # per shard
BATCHED_TXNS = 200  # per shard, 100 rows each
BATCH_ROWS = 100
LATENCY_RATE = 1000.0  # commits/s over both shards
LATENCY_SECONDS = 5.0
# raw: the library's reader, one thread per shard in one process (how it is usually run);
# raw-procs: the same, one process per shard (the parallelism the VStream's decoders have).
READERS = ("raw", "raw-procs", "vstream")
THROUGHPUT_ROUNDS = int(os.environ.get("CDC_BENCH_THROUGHPUT_ROUNDS", "5"))
LATENCY_ROUNDS = int(os.environ.get("CDC_BENCH_LATENCY_ROUNDS", "3"))
DDL = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
  id BIGINT NOT NULL PRIMARY KEY, label VARCHAR(64), amount DECIMAL(10,2), written_at DATETIME(6)
) ENGINE=InnoDB"""
LIVE_INSERT = f"INSERT INTO {TABLE} VALUES (%s, 'live', 3, NOW(6))"
# SQL VSTREAM needs a table of the proxy's vschema: the example schema's customer table.
SQL_TABLE = "customer"
SQL_INSERT = (
    f"INSERT INTO {SQL_TABLE} (customer_id, email, tenant_id, created_at) "
    "VALUES (%s, 'live', 3, NOW(6))"
)
EVENTS = [
    MariadbGtidEvent,
    QueryEvent,
    XidEvent,
    WriteRowsEvent,
    UpdateRowsEvent,
    DeleteRowsEvent,
    HeartbeatLogEvent,
]


def connect(ep, **kw) -> pymysql.Connection:
    return pymysql.connect(
        host=ep.host, port=ep.port, user=ep.user, password=ep.password, database=ep.database, **kw
    )


def gtid_pos(ep) -> GtidPosition:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
            return GtidPosition.parse(cur.fetchone()[0])
    finally:
        conn.close()


def write_backlog(ep, first_id: int, single: int, batches: int) -> None:
    conn = connect(ep, autocommit=True)
    try:
        with conn.cursor() as cur:
            for i in range(single):
                cur.execute(
                    f"INSERT INTO {TABLE} VALUES (%s, 'single', 1.25, NOW(6))", (first_id + i,)
                )
            base = first_id + single
            for b in range(batches):
                values = ",".join(
                    f"({base + b * BATCH_ROWS + r}, 'batched', 2.5, NOW(6))"
                    for r in range(BATCH_ROWS)
                )
                cur.execute(f"INSERT INTO {TABLE} VALUES {values}")
    finally:
        conn.close()


# -- raw reader --------------------------------------------------------------------------


def raw_stream(ep, start: GtidPosition) -> BinLogStreamReader:
    return BinLogStreamReader(
        connection_settings={
            "host": ep.host,
            "port": ep.port,
            "user": ep.user,
            "password": ep.password,
        },
        server_id=next_replica_server_id(),
        blocking=True,
        is_mariadb=True,
        auto_position=str(start),
        only_events=EVENTS,
        only_schemas=[ep.database],
        slave_heartbeat=1.0,
        enable_logging=False,
    )


@dataclass
class Drain:
    rows: int = 0
    txns: int = 0
    seconds: float = 0.0


def raw_drain(ep, start: GtidPosition, end: GtidPosition, out: Drain) -> None:
    """Read from ``start`` until the transaction ``end`` is committed, decoding every row."""
    last = max(end, key=lambda g: g.domain)
    stream = raw_stream(ep, start)
    t0 = time.perf_counter()
    seq = -1
    try:
        while True:
            event = stream.fetchone()
            if isinstance(event, MariadbGtidEvent):
                seq = event.gtid_seq_no if event.domain_id == last.domain else -1
            elif isinstance(event, WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent):
                out.rows += len(event.rows)
            elif isinstance(event, XidEvent):
                out.txns += 1
                if seq >= last.seq:
                    break
    finally:
        out.seconds = time.perf_counter() - t0
        stream.close()


def raw_throughput(cluster, starts, ends) -> dict[tuple[str, str], Drain]:
    results = {key: Drain() for key in SHARDS}
    threads = [
        threading.Thread(
            target=raw_drain, args=(cluster.endpoint(*key), starts[key], ends[key], results[key])
        )
        for key in SHARDS
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _raw_drain_process(ep_tuple, start: str, end: str, results) -> None:
    """A separate process (spawned): ``raw_drain`` of one shard, reporting its Drain."""
    host, port, user, password, database = ep_tuple
    ep = ShardEndpoint(host, port, user, password, database)
    out = Drain()
    raw_drain(ep, GtidPosition.parse(start), GtidPosition.parse(end), out)
    results.put(((ep.host, ep.port), out))


def raw_throughput_processes(cluster, starts, ends) -> dict[tuple[str, str], Drain]:
    """The raw reader with the VStream's parallelism: one process per shard."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = {}
    for key in SHARDS:
        ep = cluster.endpoint(*key)
        proc = ctx.Process(
            target=_raw_drain_process,
            args=(
                (ep.host, ep.port, ep.user, ep.password, ep.database),
                str(starts[key]),
                str(ends[key]),
                queue,
            ),
        )
        proc.start()
        procs[(ep.host, ep.port)] = (key, proc)
    results = {}
    for _ in SHARDS:
        address, drain = queue.get(timeout=600)
        results[procs[address][0]] = drain
    for _key, proc in procs.values():
        proc.join()
    return results


async def vstream_throughput(cluster, starts, txns_per_shard: int) -> dict[tuple[str, str], Drain]:
    """Drain the VStream from ``starts`` until each shard delivered its backlog (the
    backlog holds exactly ``txns_per_shard`` transactions per shard)."""
    endpoints = {key: cluster.endpoint(*key) for key in SHARDS}
    start = Vgtid.from_positions(starts)
    results = {key: Drain() for key in SHARDS}
    remaining = len(SHARDS)
    t0 = time.perf_counter()
    async with VStream(endpoints, [f"commerce.{TABLE}"], start=start) as stream:
        async for group in stream:
            drain = results[(group.keyspace, group.shard)]
            if drain.txns == txns_per_shard:
                continue  # this shard is done; the rest is the next backlog
            drain.rows += group.row_count
            drain.txns += 1
            if drain.txns == txns_per_shard:
                drain.seconds = time.perf_counter() - t0
                remaining -= 1
                if not remaining:
                    break
    return results


# -- latency -----------------------------------------------------------------------------


def paced_writer(
    ep_tuple, first_id: int, rate: float, seconds: float, results, insert: str = LIVE_INSERT
) -> None:
    """A separate process: single-row autocommit inserts at ``rate``/s; reports commit times."""
    host, port, user, password, database = ep_tuple
    conn = pymysql.connect(
        host=host, port=port, user=user, password=password, database=database, autocommit=True
    )
    acks: list[tuple[int, float]] = []
    try:
        with conn.cursor() as cur:
            interval = 1.0 / rate
            t0 = time.monotonic()
            i = 0
            while time.monotonic() - t0 < seconds:
                target = t0 + i * interval
                delay = target - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                row_id = first_id + i
                cur.execute(insert, (row_id,))
                acks.append((row_id, time.time()))
                i += 1
    finally:
        conn.close()
    results.put(acks)


def start_writers(cluster, first_id: int, insert: str = LIVE_INSERT):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = []
    for n, key in enumerate(SHARDS):
        ep = cluster.endpoint(*key)
        proc = ctx.Process(
            target=paced_writer,
            args=(
                (ep.host, ep.port, ep.user, ep.password, ep.database),
                first_id + n * 10_000_000,
                LATENCY_RATE / len(SHARDS),
                LATENCY_SECONDS,
                queue,
                insert,
            ),
        )
        proc.start()
        procs.append(proc)
    return procs, queue


def collect_acks(procs, queue) -> dict[int, float]:
    acks: dict[int, float] = {}
    for _ in procs:
        acks.update(dict(queue.get(timeout=LATENCY_SECONDS + 60)))
    for proc in procs:
        proc.join()
    return acks


def raw_latency(cluster, first_id: int) -> tuple[dict[int, float], dict[int, float]]:
    seen: dict[int, float] = {}
    stop = threading.Event()
    streams = []

    def read(key) -> None:
        ep = cluster.endpoint(*key)
        stream = raw_stream(ep, gtid_pos(ep))
        streams.append(stream)
        while not stop.is_set():
            event = stream.fetchone()
            if isinstance(event, WriteRowsEvent):
                now = time.time()
                for row in event.rows:
                    seen[row["values"]["id"]] = now
        stream.close()

    threads = [threading.Thread(target=read, args=(key,)) for key in SHARDS]
    for t in threads:
        t.start()
    time.sleep(1.0)
    procs, queue = start_writers(cluster, first_id)
    acks = collect_acks(procs, queue)
    time.sleep(1.5)  # heartbeats (1 s) wake the readers so they can see the stop flag
    stop.set()
    for t in threads:
        t.join()
    return acks, seen


async def vstream_latency(cluster, first_id: int) -> tuple[dict[int, float], dict[int, float]]:
    endpoints = {key: cluster.endpoint(*key) for key in SHARDS}
    seen: dict[int, float] = {}
    async with VStream(endpoints, [f"commerce.{TABLE}"], heartbeat_interval=0.5) as stream:
        # Like the raw readers, let the binlog connections come up before writing.
        warmup_end = time.monotonic() + 1.0
        async for _heartbeat in stream:
            if time.monotonic() >= warmup_end:
                break
        procs, queue = start_writers(cluster, first_id)
        acks_future = asyncio.get_running_loop().run_in_executor(None, collect_acks, procs, queue)
        async for group in stream:
            now = time.time()
            for event in group.row_events():
                for change in event.changes:
                    seen[change.after["id"]] = now
            if acks_future.done() and len(seen) >= len(acks_future.result()):
                break
        acks = await acks_future
    return acks, seen


def sql_vstream_latency(
    cluster, proxy: ProxyProcess, first_id: int
) -> tuple[dict[int, float], dict[int, float]]:
    """The same, read as a client of the proxy: ``VSTREAM * FROM customer`` over the MySQL
    protocol (PyMySQL, unbuffered); a row counts when the client has it. The writers write on
    the shards directly, as for the other readers; a negative id ends the reader."""
    seen: dict[int, float] = {}
    opened = threading.Event()
    failure: list[BaseException] = []

    def read() -> None:
        conn = proxy.connect("commerce", cursorclass=pymysql.cursors.SSCursor, autocommit=True)
        try:
            cur = conn.cursor()
            cur.execute("SET WORKLOAD = OLAP")
            cur.execute(f"VSTREAM * FROM {SQL_TABLE} LIMIT 100000000")
            opened.set()
            while True:
                row = cur.fetchone()
                now = time.time()
                if row is None:
                    raise RuntimeError("VSTREAM ended before the sentinel row")
                row_id = int(row[1])
                if row_id < 0:
                    return
                seen[row_id] = now
        except BaseException as exc:
            failure.append(exc)
            opened.set()
        finally:
            # The stream has no end to read: leave the result unfinished (PyMySQL would
            # otherwise try to read it to its end when it is collected).
            if conn._result is not None:
                conn._result.unbuffered_active = False
            conn.close()

    reader = threading.Thread(target=read)
    reader.start()
    opened.wait(30)
    procs, queue = start_writers(cluster, first_id, SQL_INSERT)
    acks = collect_acks(procs, queue)
    time.sleep(0.5)
    sentinel = cluster.endpoint(*SHARDS[0])
    conn = connect(sentinel, autocommit=True)
    with conn.cursor() as cur:
        cur.execute(SQL_INSERT, (-first_id,))
    conn.close()
    reader.join(60)
    if failure:
        raise failure[0]
    return acks, seen


def medians_of(
    rounds_by_reader: dict[str, list[tuple[float, float]]],
) -> dict[str, tuple[float, float]]:
    """Per reader, the median of each of the two figures its rounds measured."""
    return {
        name: (
            statistics.median(r[0] for r in rounds),
            statistics.median(r[1] for r in rounds),
        )
        for name, rounds in rounds_by_reader.items()
    }


def percentiles(acks: dict[int, float], seen: dict[int, float]) -> tuple[float, float, int]:
    lat = sorted((seen[i] - t) * 1000 for i, t in acks.items() if i in seen)
    missing = sum(1 for i in acks if i not in seen)
    p50 = statistics.median(lat)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return p50, p99, missing


# -- main --------------------------------------------------------------------------------


def main() -> None:
    print(machine())
    with local_cluster() as cluster:
        for key in SHARDS:
            conn = connect(cluster.endpoint(*key), autocommit=True)
            with conn.cursor() as cur:
                cur.execute(DDL)
            conn.close()

        starts = {key: gtid_pos(cluster.endpoint(*key)) for key in SHARDS}
        t0 = time.perf_counter()
        writers = [
            threading.Thread(
                target=write_backlog,
                args=(cluster.endpoint(*key), 1 + n * 100_000_000, SINGLE_ROW_TXNS, 0),
            )
            for n, key in enumerate(SHARDS)
        ]
        for t in writers:
            t.start()
        for t in writers:
            t.join()
        mids = {key: gtid_pos(cluster.endpoint(*key)) for key in SHARDS}
        writers = [
            threading.Thread(
                target=write_backlog,
                args=(
                    cluster.endpoint(*key),
                    50_000_000 + n * 100_000_000,
                    0,
                    BATCHED_TXNS,
                ),
            )
            for n, key in enumerate(SHARDS)
        ]
        for t in writers:
            t.start()
        for t in writers:
            t.join()
        ends = {key: gtid_pos(cluster.endpoint(*key)) for key in SHARDS}
        print(f"backlog written in {time.perf_counter() - t0:.1f} s")

        print(
            f"\nThroughput per shard (2 shards read concurrently; median of {THROUGHPUT_ROUNDS}"
            " alternating rounds), rows/s and txns/s:"
        )
        print(f"{'shape':<22}{'reader':<10}{'rows/s':>10}{'txns/s':>10}{'vstream/reader':>16}")
        for shape, begin, finish, txns in (
            ("single-row txns", starts, mids, SINGLE_ROW_TXNS),
            (f"{BATCH_ROWS}-row txns", mids, ends, BATCHED_TXNS),
        ):
            rates: dict[str, list[tuple[float, float]]] = {r: [] for r in READERS}
            for _ in range(THROUGHPUT_ROUNDS):
                raw = raw_throughput(cluster, begin, finish)
                raw_procs = raw_throughput_processes(cluster, begin, finish)
                vs = asyncio.run(vstream_throughput(cluster, begin, txns))
                for name, drains in (("raw", raw), ("raw-procs", raw_procs), ("vstream", vs)):
                    rates[name].append(
                        (
                            statistics.mean(d.rows / d.seconds for d in drains.values()),
                            statistics.mean(d.txns / d.seconds for d in drains.values()),
                        )
                    )
            medians = medians_of(rates)
            for name, (rows, txns_per_s) in medians.items():
                ratio = "" if name == "vstream" else f"{medians['vstream'][0] / rows:>8.2f}"
                print(f"{shape:<22}{name:<10}{rows:>10.0f}{txns_per_s:>10.0f}{ratio}")

        print(
            f"\nCommit-to-event latency at {LATENCY_RATE:.0f} commits/s over 2 shards "
            f"({LATENCY_ROUNDS} alternating rounds of {LATENCY_SECONDS:.0f} s each):"
        )
        print(f"{'round':<7}{'reader':<13}{'commits':>9}{'p50 ms':>9}{'p99 ms':>9}{'missing':>9}")
        readers = ("raw", "vstream", "vstream-sql")
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in readers}
        first_id = 200_000_000
        with proxies(cluster) as proxy:
            for n in range(LATENCY_ROUNDS):
                for name in readers:
                    first_id += 50_000_000
                    if name == "raw":
                        acks, seen = raw_latency(cluster, first_id)
                    elif name == "vstream":
                        acks, seen = asyncio.run(vstream_latency(cluster, first_id))
                    else:
                        acks, seen = sql_vstream_latency(cluster, proxy, first_id)
                    p50, p99, missing = percentiles(acks, seen)
                    results[name].append((p50, p99))
                    print(f"{n:<7}{name:<13}{len(acks):>9}{p50:>9.2f}{p99:>9.2f}{missing:>9}")
        medians = medians_of(results)
        for name, (p50, p99) in medians.items():
            print(f"median {name:<13} p50 {p50:.2f} ms, p99 {p99:.2f} ms")
        for name in readers[1:]:
            print(
                f"ratios {name}/raw (medians): p50 {medians[name][0] / medians['raw'][0]:.2f}, "
                f"p99 {medians[name][1] / medians['raw'][1]:.2f}"
            )


if __name__ == "__main__":
    main()
