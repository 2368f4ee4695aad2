"""What every proxy process does around a resharding switch: it follows the stored topology
(routing, shard pools, SHOW VITESS_SHARDS/TABLETS) and holds writes refused by a source shard
until the new shards serve, then runs them there."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pymysql
import pytest

from proxy.cluster import LocalCluster
from proxy.resharding.denied_writes import deny_writes
from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy
from tests.resharding.split import (
    KEYSPACE,
    SOURCE,
    SPLIT_SERVING,
    TARGETS,
    Split,
    ids_on,
    run_sql,
    shard_of,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

_ids = itertools.count(int(time.time() * 1000) % 10_000_000 * 1_000_000, 100_000)  # ranges apart per test


def _proxy(cluster: LocalCluster, tmp_path: Path, name: str) -> ProxyProcess:
    return start_proxy(cluster.config.path, cluster.endpoints, tmp_path / f"{name}.log")


@pytest.fixture
def proxies(reshard_cluster: LocalCluster, tmp_path: Path) -> Iterator[list[ProxyProcess]]:
    started = [_proxy(reshard_cluster, tmp_path, "a"), _proxy(reshard_cluster, tmp_path, "b")]
    try:
        yield started
    finally:
        for p in started:
            stop_proxy(p)


def _query(p: ProxyProcess, sql: str) -> list[tuple]:
    conn = p.connect(KEYSPACE, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


async def _until(check: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, "not within the time allowed"
        await asyncio.sleep(0.05)


async def test_every_proxy_process_follows_the_switch(split: Split, proxies: list[ProxyProcess]) -> None:
    await split.prepare()
    a, b = proxies
    ids = ids_on(split.vschema, "customer", SOURCE, 6, next(_ids))
    for i in ids:
        _query(a, f"insert into customer (customer_id, email) values ({i}, 'before-{i}')")
    assert [r[0] for r in _query(b, "show vitess_shards") if r[0].startswith(KEYSPACE)] == [
        f"{KEYSPACE}/-80", f"{KEYSPACE}/80-"]
    await split.switch()
    for p in proxies:
        await _until(lambda p=p: [r[0] for r in _query(p, "show vitess_shards") if r[0].startswith(KEYSPACE)]
                     == [f"{KEYSPACE}/{s}" for s in SPLIT_SERVING])
    tablets = {(r[1], r[2]): r[4] for r in _query(b, "show vitess_tablets")}
    assert tablets[(KEYSPACE, SOURCE)] == "NOT_SERVING"
    assert all(tablets[(KEYSPACE, t)] == "SERVING" for t in TARGETS)
    # Reads and writes route by the new shards, from either process.
    listed = ",".join(map(str, ids))
    assert sorted(r[0] for r in _query(b, f"select customer_id from customer where customer_id in ({listed})")) == ids
    for i in ids:
        _query(b, f"update customer set email = 'after-{i}' where customer_id = {i}")
        target = split.endpoint(shard_of(split.vschema, "customer", i, TARGETS))
        assert run_sql(target, f"select email from customer where customer_id = {i}") == [(f"after-{i}".encode(),)]
    assert run_sql(split.cluster.endpoint(KEYSPACE, SOURCE),
                   f"select count(*) from customer where email like 'after-%' and customer_id in ({listed})") == [(0,)]
    # A two-phase commit whose decision lives on a new shard (the transaction's first one).
    first, other = ids_on(split.vschema, "customer", TARGETS[0], 1, next(_ids))[0], ids_on(
        split.vschema, "customer", "80-", 1, next(_ids))[0]
    conn = b.connect(KEYSPACE, autocommit=True)
    try:
        with conn.cursor() as cur:
            for statement in ("set transaction_mode = 'twopc'", "begin",
                              f"insert into customer (customer_id, email) values ({first}, '2pc')",
                              f"insert into customer (customer_id, email) values ({other}, '2pc')", "commit"):
                cur.execute(statement)
    finally:
        conn.close()
    assert run_sql(split.endpoint(TARGETS[0]), f"select email from customer where customer_id = {first}") == [(b"2pc",)]
    assert run_sql(split.endpoint("80-"), f"select email from customer where customer_id = {other}") == [(b"2pc",)]
    # A proxy started after the switch serves the stored topology from its start.
    late = _proxy(split.cluster, proxies[0].log.parent, "late")
    try:
        assert [r[0] for r in _query(late, "show vitess_shards") if r[0].startswith(KEYSPACE)] == [
            f"{KEYSPACE}/{s}" for s in SPLIT_SERVING]
    finally:
        stop_proxy(late)


def _write_loop(p: ProxyProcess, ids: list[int], stop: threading.Event, done: list[tuple[int, float, str]]) -> None:
    """Autocommit inserts, one at a time, until ``stop`` (or the ids run out): each (id,
    seconds, error text or '')."""
    conn = p.connect(KEYSPACE, autocommit=True)
    try:
        with conn.cursor() as cur:
            for i in ids:
                if stop.is_set():
                    return
                started = time.monotonic()
                try:
                    cur.execute(f"insert into customer (customer_id, email) values ({i}, 'w')")
                    done.append((i, time.monotonic() - started, ""))
                except pymysql.MySQLError as e:
                    done.append((i, time.monotonic() - started, str(e)))
                time.sleep(0.005)
    finally:
        conn.close()


def _metric(p: ProxyProcess, http_port: int, name: str) -> float:
    """The sum of a metric's samples in ``p``'s /metrics (the only proxy on that port)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


async def test_writes_during_the_switch_are_held_then_land_on_the_targets(
    split: Split, reshard_cluster: LocalCluster, tmp_path: Path
) -> None:
    await split.prepare()
    a = _proxy(reshard_cluster, tmp_path, "alone")  # alone on the HTTP port: its /metrics are read
    try:
        await _held_writes(split, a)
        assert split.config.http is not None
        held = _metric(a, split.config.http.port, 'shardgate_reshard_writes_held_total{keyspace="commerce",outcome="released"}')
        assert held >= 1
        assert _metric(a, split.config.http.port, 'shardgate_reshard_write_hold_seconds_count{keyspace="commerce"}') == held
    finally:
        stop_proxy(a)


async def _held_writes(split: Split, a: ProxyProcess) -> None:
    ids = ids_on(split.vschema, "customer", SOURCE, 400, next(_ids))
    stop = threading.Event()
    done: list[tuple[int, float, str]] = []
    writer = threading.Thread(target=_write_loop, args=(a, ids, stop, done))
    writer.start()
    try:
        await _until(lambda: len(done) >= 20)
        await split.switch(pause=0.5)  # writes meanwhile are refused by the source: held
        count = len(done)
        await _until(lambda: len(done) >= count + 20)
    finally:
        stop.set()
        await asyncio.to_thread(writer.join)
    assert [e for _, _, e in done if e] == []
    written = [i for i, _, _ in done]
    held = [s for _, s, _ in done if s > 0.3]
    assert held, "no write was held through the switch"
    assert max(held) < 5
    listed = ",".join(map(str, written))
    on_targets = []
    for t in TARGETS:
        on_targets += [r[0] for r in run_sql(split.endpoint(t), f"select customer_id from customer where customer_id in ({listed})")]
    assert sorted(on_targets) == sorted(written)  # every write exactly once, on the target its id names
    for t in TARGETS:
        rows = run_sql(split.endpoint(t), f"select customer_id from customer where customer_id in ({listed})")
        assert all(shard_of(split.vschema, "customer", r[0], TARGETS) == t for r in rows)


async def _switch_with_writes_denied(split: Split, pause: float) -> asyncio.Task[object]:
    """The switch started; returns once the source refuses writes (the flip follows ``pause`` s later)."""
    switching = asyncio.ensure_future(split.switch(pause=pause))
    source = split.cluster.endpoint(KEYSPACE, SOURCE)

    def denied() -> bool:
        rows = run_sql(source, "select count(*) from information_schema.triggers where trigger_schema = database()"
                               " and trigger_name like 'shardgate_deny_%'")
        return rows[0][0] == 3 * len(split.tables)

    await _until(denied)
    return switching


async def test_a_transaction_that_used_the_source_shard_is_rolled_back_with_a_retryable_error(
    split: Split, proxies: list[ProxyProcess]
) -> None:
    await split.prepare()
    i = ids_on(split.vschema, "customer", SOURCE, 1, next(_ids))[0]
    conn = proxies[0].connect(KEYSPACE, autocommit=True)
    try:
        with conn.cursor() as cur:
            switching = await _switch_with_writes_denied(split, pause=1.0)
            cur.execute("begin")
            cur.execute(f"select count(*) from customer where customer_id = {i}")  # reads go on on the source
            with pytest.raises(pymysql.MySQLError) as e:
                await asyncio.to_thread(cur.execute, f"insert into customer (customer_id, email) values ({i}, 't')")
            await switching
            assert e.value.args[0] == 1213
            assert "try restarting transaction" in e.value.args[1] and KEYSPACE in e.value.args[1]
            # The proxy rolled it back: the session is usable, the retry lands on the target.
            cur.execute("begin")
            cur.execute(f"insert into customer (customer_id, email) values ({i}, 't')")
            cur.execute("commit")
    finally:
        conn.close()
    target = split.endpoint(shard_of(split.vschema, "customer", i, TARGETS))
    assert run_sql(target, f"select email from customer where customer_id = {i}") == [(b"t",)]


async def test_the_first_write_of_a_transaction_on_the_source_shard_is_held_and_joins_the_transaction(
    split: Split, proxies: list[ProxyProcess]
) -> None:
    await split.prepare()
    base = next(_ids)
    moved = ids_on(split.vschema, "customer", SOURCE, 1, base)[0]
    stays = ids_on(split.vschema, "customer", "80-", 1, base)[0]
    conn = proxies[0].connect(KEYSPACE, autocommit=True)
    try:
        with conn.cursor() as cur:
            switching = await _switch_with_writes_denied(split, pause=0.5)
            cur.execute("begin")
            cur.execute(f"insert into customer (customer_id, email) values ({stays}, 'tx')")  # 80-: not resharded
            started = time.monotonic()
            await asyncio.to_thread(cur.execute, f"insert into customer (customer_id, email) values ({moved}, 'tx')")
            held = time.monotonic() - started
            cur.execute("commit")
            await switching
    finally:
        conn.close()
    assert held > 0.2
    target = split.endpoint(shard_of(split.vschema, "customer", moved, TARGETS))
    assert run_sql(target, f"select email from customer where customer_id = {moved}") == [(b"tx",)]
    assert run_sql(split.endpoint("80-"), f"select email from customer where customer_id = {stays}") == [(b"tx",)]
    assert run_sql(split.endpoint(SOURCE), f"select count(*) from customer where customer_id = {moved}") == [(0,)]


async def test_a_write_held_past_write_hold_seconds_fails_with_vitess_buffering_error(
    split: Split, reshard_cluster: LocalCluster, tmp_path: Path
) -> None:
    await split.prepare()
    short = split.config.path.parent / "cluster-short-hold.yaml"  # beside the vschema files it names
    short.write_text(split.config.path.read_text() + "\nresharding: {write_hold_seconds: 1}\n")
    p = start_proxy(short, reshard_cluster.endpoints, tmp_path / "proxy.log")
    try:
        source = split.cluster.endpoint(KEYSPACE, SOURCE)
        async with split._source() as sc:
            await deny_writes(sc, source.database, split.tables)  # a switch that never flips
        i = ids_on(split.vschema, "customer", SOURCE, 1, next(_ids))[0]
        started = time.monotonic()
        with pytest.raises(pymysql.MySQLError) as e:
            await asyncio.to_thread(_query, p, f"insert into customer (customer_id, email) values ({i}, 'x')")
        assert 1 <= time.monotonic() - started < 5
        assert e.value.args[0] == 1105
        assert "upstream shards are not available" in e.value.args[1] and "keyspace commerce" in e.value.args[1]
    finally:
        stop_proxy(p)


def _multi_shard_write_loop(
    p: ProxyProcess, pairs: list[tuple[int, int]], counted: tuple[int, int], stop: threading.Event,
    done: list[tuple[tuple[int, int], float, str]],
) -> None:
    """Autocommit statements that span shards, in the session's ``multi`` mode: per pair (one id
    on the source shard, one on 80-) a two-row INSERT, then an UPDATE of both rows, then an
    UPDATE adding 1 to the two ``counted`` rows; each (pair, seconds of the slowest, error or '')."""
    conn = p.connect(KEYSPACE, autocommit=True)
    a, b = counted
    try:
        with conn.cursor() as cur:
            cur.execute("set transaction_mode = 'multi'")
            for x, y in pairs:
                if stop.is_set():
                    return
                slowest, error = 0.0, ""
                for sql in (f"insert into customer (customer_id, email, tenant_id) values ({x}, 'm', 0), ({y}, 'm', 0)",
                            f"update customer set tenant_id = tenant_id + 1 where customer_id in ({x}, {y})",
                            f"update customer set tenant_id = tenant_id + 1 where customer_id in ({a}, {b})"):
                    started = time.monotonic()
                    try:
                        cur.execute(sql)
                    except pymysql.MySQLError as e:
                        error = f"{sql}: {e}"
                        break
                    finally:
                        slowest = max(slowest, time.monotonic() - started)
                done.append(((x, y), slowest, error))
                time.sleep(0.005)
    finally:
        conn.close()


async def test_multi_shard_autocommit_writes_in_multi_mode_are_held_through_the_switch_and_applied_once(
    split: Split, reshard_cluster: LocalCluster, tmp_path: Path
) -> None:
    await split.prepare()
    p = _proxy(reshard_cluster, tmp_path, "multi")
    base = next(_ids)
    moved, stays = ids_on(split.vschema, "customer", SOURCE, 301, base), ids_on(split.vschema, "customer", "80-", 301, base)
    counted = (moved.pop(), stays.pop())  # a row on each side, +1 by every pair's last statement
    _query(p, f"insert into customer (customer_id, email, tenant_id) values ({counted[0]}, 'n', 0), ({counted[1]}, 'n', 0)")
    stop = threading.Event()
    done: list[tuple[tuple[int, int], float, str]] = []
    writer = threading.Thread(target=_multi_shard_write_loop, args=(p, list(zip(moved, stays, strict=True)), counted, stop, done))
    writer.start()
    try:
        await _until(lambda: len(done) >= 10)
        await split.switch(pause=0.5)  # the source refuses writes meanwhile: the statements are held
        count = len(done)
        await _until(lambda: len(done) >= count + 10, seconds=15)
    finally:
        stop.set()
        await asyncio.to_thread(writer.join)
        stop_proxy(p)
    assert [e for _, _, e in done if e] == []
    assert any(s > 0.3 for _, s, _ in done), "no statement was held through the switch"
    written = [i for pair, _, _ in done for i in pair]
    listed = ",".join(map(str, written))
    rows: list[tuple] = []
    for shard in (*TARGETS, "80-"):
        found = run_sql(split.endpoint(shard), f"select customer_id, tenant_id from customer where customer_id in ({listed})")
        assert all(shard_of(split.vschema, "customer", r[0], SPLIT_SERVING) == shard for r in found)
        rows += found
    # Every row once, on the shard its id names, updated exactly once; no statement ran twice.
    assert sorted(r[0] for r in rows) == sorted(written)
    assert {r[1] for r in rows} == {1}
    on = {shard_of(split.vschema, "customer", i, SPLIT_SERVING): i for i in counted}
    for shard, i in on.items():
        assert run_sql(split.endpoint(shard), f"select tenant_id from customer where customer_id = {i}") == [(len(done),)]
