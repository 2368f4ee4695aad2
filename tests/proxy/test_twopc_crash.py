"""Atomic transfers under crashes: 8 clients move money between accounts sharded over 3
MariaDB shards through a proxy (transaction_mode = twopc from the cluster file) while the
proxy is SIGKILLed at chosen points of its commit (fault injection: before the prepare,
between PREPARE and the decision, between the decision and the commits, after the
commits) and at random moments, and one shard's mariadbd is SIGKILLed and restarted.

After recovery: the sum of balances is unchanged, every balance equals what the recorded
transfers say (no transfer half applied), no prepared XA transaction is left on any
shard, and every transfer whose COMMIT returned OK is there. Fixed seeds, a bounded
number of kills; ``python -m tests.benchmarks twopc`` runs a longer version.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql
import pytest

from proxy.cluster import LocalCluster
from tests.proxy.twopc_support import KEYSPACE, bank_cluster, prepared_xids, query_shard, wait_until
from tests.proxy_process import ProxyProcess, free_port, start_proxy, stop_proxy

SHARDS = ["-55", "55-aa", "aa-"]


@dataclass
class Workload:
    seed: int = 1414
    accounts: int = 48
    initial: int = 1000
    clients: int = 8
    seconds: float = 18.0
    fault_kills: int = 4  # proxy SIGKILLs at injected points of the commit
    random_kills: int = 2  # proxy SIGKILLs at random moments
    shard_kills: int = 1  # mariadbd SIGKILL + restart
    fault_probability: float = 0.004  # per commit and fault point


@dataclass
class Outcome:
    ok: list[int] = field(default_factory=list)  # transfer ids whose COMMIT returned OK
    failed: int = 0  # errors (rolled back, or outcome unknown to the client)
    kills: dict[str, int] = field(default_factory=lambda: {"fault": 0, "random": 0, "shard": 0})
    seconds: float = 0.0


FAULT_POINTS = ("before_prepare", "after_prepare", "after_decision", "after_commit")


class ProxyKeeper:
    """Runs the proxy, restarting it (same port) whenever it dies."""

    def __init__(self, cluster: LocalCluster, log: Path, w: Workload) -> None:
        self.cluster, self.log, self.w = cluster, log, w
        self.port = free_port()
        self.starts = 0
        self.proxy: ProxyProcess | None = None

    def start(self, faults: bool) -> None:
        env = {"SHARDGATE_TWOPC_FAULT_SEED": str(self.w.seed + self.starts)}
        if faults:
            env["SHARDGATE_TWOPC_FAULT"] = ",".join(f"{p}=kill@{self.w.fault_probability}" for p in FAULT_POINTS)
        self.starts += 1
        self.proxy = start_proxy(self.cluster.config.path, self.cluster.endpoints, self.log, port=self.port, extra_env=env)

    def died(self) -> bool:
        return self.proxy is not None and self.proxy.proc.poll() is not None


def client(keeper: ProxyKeeper, w: Workload, n: int, stop: threading.Event, out: Outcome, lock: threading.Lock) -> None:
    rng = random.Random(w.seed * 100 + n)
    seq = 0
    conn: pymysql.connections.Connection | None = None
    while not stop.is_set():
        if conn is None:
            try:
                conn = pymysql.connect(host="127.0.0.1", port=keeper.port, user="root", password="",
                                       database=KEYSPACE, connect_timeout=2, read_timeout=30)
                with conn.cursor() as c:
                    c.execute("set innodb_lock_wait_timeout = 10")
            except pymysql.err.MySQLError:
                conn = None
                time.sleep(0.1)
                continue
        seq += 1
        tid = (n + 1) * 10_000_000 + seq
        src, dst = rng.sample(range(1, w.accounts + 1), 2)
        amount = rng.randint(1, 50)
        first, second = sorted([(src, -amount), (dst, amount)])  # one lock order: no distributed deadlock
        try:
            with conn.cursor() as c:
                c.execute("begin")
                c.execute(f"update account set balance = balance + {first[1]} where id = {first[0]}")
                c.execute(f"update account set balance = balance + {second[1]} where id = {second[0]}")
                c.execute(f"insert into transfer (id, src, dst, amount) values ({tid}, {src}, {dst}, {amount})")
                c.execute("commit")
            with lock:
                out.ok.append(tid)
        except pymysql.err.MySQLError:
            with lock:
                out.failed += 1
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - the connection may be gone already
                pass
            conn = None
    if conn is not None:
        conn.close()


async def run_workload(cluster: LocalCluster, log: Path, w: Workload) -> Outcome:
    rng = random.Random(w.seed)
    out = Outcome()
    keeper = ProxyKeeper(cluster, log, w)
    await asyncio.to_thread(keeper.start, False)
    setup = pymysql.connect(host="127.0.0.1", port=keeper.port, user="root", password="", database=KEYSPACE,
                            autocommit=True)
    with setup.cursor() as c:  # one multi-shard INSERT: atomic under twopc (an implicit transaction)
        c.execute("insert into account (id, balance) values "
                  + ", ".join(f"({i}, {w.initial})" for i in range(1, w.accounts + 1)))
    setup.close()
    await asyncio.to_thread(stop_proxy, keeper.proxy)  # type: ignore[arg-type]
    await asyncio.to_thread(keeper.start, True)

    stop, lock = threading.Event(), threading.Lock()
    threads = [threading.Thread(target=client, args=(keeper, w, n, stop, out, lock), daemon=True) for n in range(w.clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    span = (1.5, w.seconds - 3.0)
    random_at = sorted(rng.uniform(*span) for _ in range(w.random_kills))
    shard_at = sorted(rng.uniform(*span) for _ in range(w.shard_kills))
    try:
        # On a slow machine the restarts can eat the window before a scheduled kill comes: the
        # loop goes on until every scheduled kill was carried out (bounded).
        while (elapsed := time.monotonic() - started) < w.seconds or (
            (random_at or shard_at) and elapsed < 3 * w.seconds
        ):
            if keeper.died():
                out.kills["fault"] += 1
                await asyncio.to_thread(keeper.start, out.kills["fault"] < w.fault_kills)
            elif random_at and elapsed >= random_at[0]:
                random_at.pop(0)
                assert keeper.proxy is not None
                os.kill(keeper.proxy.proc.pid, signal.SIGKILL)
                await asyncio.to_thread(keeper.proxy.proc.wait)
                out.kills["random"] += 1
                await asyncio.to_thread(keeper.start, out.kills["fault"] < w.fault_kills)
            elif shard_at and elapsed >= shard_at[0]:
                shard_at.pop(0)
                victim = rng.choice(SHARDS)
                await cluster.stop_shard(KEYSPACE, victim, kill=True)
                await asyncio.sleep(0.3)
                await cluster.start_shard(KEYSPACE, victim)
                out.kills["shard"] += 1
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            await asyncio.to_thread(t.join, 60)
    out.seconds = time.monotonic() - started
    # Recovery: a proxy without faults; its resolver finishes whatever the kills left in doubt.
    if keeper.died():
        out.kills["fault"] += 1
    await asyncio.to_thread(stop_proxy, keeper.proxy)  # type: ignore[arg-type]
    await asyncio.to_thread(keeper.start, False)
    try:
        poke = pymysql.connect(host="127.0.0.1", port=keeper.port, user="root", password="", database=KEYSPACE)
        poke.close()  # a first session starts the resolver (twopc is the cluster's default)
        await asyncio.to_thread(
            wait_until, lambda: not any(prepared_xids(cluster, SHARDS).values()), 30, "no prepared XA transaction left"
        )
    finally:
        await asyncio.to_thread(stop_proxy, keeper.proxy)  # type: ignore[arg-type]
    return out


def check(cluster: LocalCluster, w: Workload, out: Outcome) -> dict[str, int]:
    balances: dict[int, int] = {}
    transfers: dict[int, tuple[int, int, int]] = {}
    for shard in SHARDS:
        balances.update({int(i): int(b) for i, b in query_shard(cluster, shard, "select id, balance from account")})
        transfers.update({int(t): (int(s), int(d), int(a))
                          for t, s, d, a in query_shard(cluster, shard, "select id, src, dst, amount from transfer")})
    assert len(balances) == w.accounts
    assert sum(balances.values()) == w.accounts * w.initial, "money was created or destroyed"
    expected = dict.fromkeys(balances, w.initial)
    for src, dst, amount in transfers.values():
        expected[src] -= amount
        expected[dst] += amount
    half = {i: (balances[i], expected[i]) for i in balances if balances[i] != expected[i]}
    assert not half, f"balances disagree with the recorded transfers (half-applied transfers): {half}"
    missing = [t for t in out.ok if t not in transfers]
    assert not missing, f"{len(missing)} transfers returned OK but are not there: {missing[:10]}"
    assert not any(prepared_xids(cluster, SHARDS).values())
    return {"transfers": len(transfers), "ok": len(out.ok), "failed": out.failed}


async def test_transfers_stay_atomic_through_proxy_and_shard_crashes(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    w = Workload()
    extra = "transaction_mode: twopc\ntwopc: {resolver_interval_seconds: 0.2}\n"
    async with bank_cluster(request, tmp_path / "cluster", SHARDS, extra=extra) as cluster:
        out = await run_workload(cluster, tmp_path / "proxy.log", w)
        stats = check(cluster, w, out)
    print(f"twopc crash workload: {stats} kills={out.kills} in {out.seconds:.1f}s")
    assert out.kills["fault"] >= 1 and out.kills["random"] == w.random_kills and out.kills["shard"] == w.shard_kills
    assert stats["ok"] > 100  # the workload made progress between the crashes
