"""Single-message publishes: what of their cost is the topic's and what is the proxy's generic
per-statement cost. Each case runs 4 publishers (aiomysql, this process) of 100-byte messages,
as autocommit INSERTs and as BEGIN; INSERT; COMMIT, and reports msg/s beside the CPU time per
message of the proxy process and of the topic's shard (user + system, /proc/<pid>/stat: steadier
than rates on a shared machine):

- raw: the INSERTs directly on the shard, into a copy of the topic's log table;
- plain: the same INSERTs through the proxy in a shard-targeted session (no topic, no sequencer):
  the proxy's generic cost;
- topic: INSERTs into the topic through the proxy (routing, the commit hook, the sequencer passes).

    python -m tests.benchmarks topic_publish     # BENCH_MESSAGES=3000 BENCH_ROUNDS=2 BENCH_PYSPY=out.txt

``BENCH_PYSPY``: also record the proxy with py-spy during the topic cases (collapsed stacks).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Awaitable, Callable

import aiomysql

from tests.benchmarks.bench_metrics_overhead import cpu_seconds
from tests.benchmarks.bench_topics import (
    KEYSPACE,
    PUBLISHERS,
    _connect,
    _exec,
    _publish,
    _shard_conn,
    _wait_sequenced,
)
from tests.benchmarks.harness import local_cluster, machine, proxies

MESSAGES = int(os.environ.get("BENCH_MESSAGES", "3000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
PYSPY = os.environ.get("BENCH_PYSPY")


async def _status(shard: aiomysql.Connection) -> tuple[int, int, int]:
    """The shard's multi-table UPDATEs so far (a sequencer pass is one: nothing else runs them here),
    index entries stepped over (Handler_read_next), and InnoDB's history list length (purge lag)."""
    rows = dict(await _exec(shard, "SHOW GLOBAL STATUS WHERE Variable_name IN"
                                   " ('Com_update_multi', 'Handler_read_next', 'Innodb_history_list_length')"))
    return int(rows["Com_update_multi"]), int(rows["Handler_read_next"]), int(rows["Innodb_history_list_length"])


async def _bench(proxy_pid: int, shard_pid: int, host: str, port: int, shard_ep, shard: str) -> None:
    n = MESSAGES // PUBLISHERS * PUBLISHERS
    raw = await _shard_conn(shard_ep)
    await _exec(raw, "DROP TABLE IF EXISTS raw_topic_log")
    await _exec(raw, "CREATE TABLE raw_topic_log LIKE `_tms_bench_publish`")
    cases: dict[str, Callable[[], Awaitable[aiomysql.Connection]]] = {
        "raw": lambda: _shard_conn(shard_ep),
        "raw view": lambda: _shard_conn(shard_ep),
        "plain": lambda: _connect(host, port, f"{KEYSPACE}:{shard}"),
        "topic": lambda: _connect(host, port, KEYSPACE),
    }
    for rnd in range(ROUNDS):
        for transaction in (False, True):
            shape = "BEGIN; INSERT; COMMIT" if transaction else "autocommit INSERT"
            rates: dict[str, float] = {}
            for case, connect in cases.items():
                table = "bench_publish" if case in ("topic", "raw view") else "raw_topic_log"
                spy = None
                if PYSPY and case == "topic":
                    spy = await asyncio.create_subprocess_exec(
                        "py-spy", "record", "-r", "200", "-f", "raw", "-o", f"{PYSPY}.{rnd}.{int(transaction)}",
                        "-p", str(proxy_pid), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    await asyncio.sleep(1)
                passes0, next0, _ = await _status(raw)
                p0, s0 = cpu_seconds(proxy_pid), cpu_seconds(shard_pid)
                started = time.perf_counter()
                seconds = await _publish(connect, table, MESSAGES, 1, transaction)
                if case == "topic":  # until the sequencer caught up: its passes are part of the cost
                    await _wait_sequenced(raw, "bench_publish", started)
                p1, s1 = cpu_seconds(proxy_pid), cpu_seconds(shard_pid)
                passes, read_next, history = await _status(raw)
                passes, read_next = passes - passes0, read_next - next0
                if spy is not None:
                    spy.send_signal(2)
                    await asyncio.wait_for(spy.wait(), 30)
                rates[case] = n / seconds
                print(f"round {rnd + 1} {shape:21} {case:8}: {n / seconds:7,.0f} msg/s"
                      f" ({n / seconds / rates['raw']:.2f} of raw); CPU per message: proxy"
                      f" {(p1 - p0) * 1e6 / n:5.0f} us, shard {(s1 - s0) * 1e6 / n:5.0f} us;"
                      f" sequencer passes per message {passes / n:.2f}, index entries read per pass"
                      f" {read_next / max(passes, 1):,.0f}, history list {history:,}", flush=True)
    await _exec(raw, "DROP TABLE raw_topic_log")
    raw.close()


def main() -> None:
    print(f"machine: {machine()}; load {os.getloadavg()[0]:.1f}", flush=True)
    with local_cluster() as cluster, proxies(cluster) as p:

        async def setup() -> str:
            admin = await _connect(p.host, p.port, KEYSPACE)
            await _exec(admin, "DROP TOPIC IF EXISTS bench_publish")
            await _exec(admin, "CREATE TOPIC bench_publish")
            shard = (await _exec(admin, "SHOW TOPICS LIKE 'bench_publish'"))[0][2]
            admin.close()
            return shard

        shard = asyncio.run(setup())
        shard_pid = cluster._instances[(KEYSPACE, shard)].pid
        assert shard_pid is not None
        asyncio.run(_bench(p.proc.pid, shard_pid, p.host, p.port, cluster.endpoints[(KEYSPACE, shard)], shard))
        print(f"load after: {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
