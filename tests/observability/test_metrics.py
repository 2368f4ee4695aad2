"""``/metrics`` adds up: a known workload through a real proxy process shows in the scrape
as exactly the statements, rows, errors, plans and transactions it was made of."""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from collections.abc import Awaitable, Callable

import pymysql
import pytest

from proxy.observability.figures import Figures
from tests.observability.conftest import ObservedProxy, run
from vschema.vindexes.hash import hash_uint64

QUERIES = ("shardgate_queries", "shardgate_queries_total")
DURATION_COUNT = ("shardgate_query_duration_seconds", "shardgate_query_duration_seconds_count")


def delta(after: Figures, before: Figures, family: tuple[str, str] | str, **labels: str) -> float:
    if isinstance(family, str):
        family = (family, family + "_total")
    return after.total(*family, **labels) - before.total(*family, **labels)


def shard_of(customer_id: int) -> str:
    return "-80" if hash_uint64(customer_id)[0] < 0x80 else "80-"


def ids_on(shard: str, count: int) -> list[int]:
    """Fresh customer ids whose rows live on ``shard``."""
    out = []
    n = 7_000_000 + uuid.uuid4().int % 1_000_000 * 100
    while len(out) < count:
        n += 1
        if shard_of(n) == shard:
            out.append(n)
    return out


# 15 s: a check returns as soon as it holds; the bound only matters on a machine loaded by other work (CI).
async def eventually(check: Callable[[], Awaitable[bool]], within: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, f"{what} did not hold within {within} s"
        await asyncio.sleep(0.1)


async def test_a_workload_of_selects_inserts_and_errors_is_counted_exactly(observed_proxy: ObservedProxy) -> None:
    selects, inserts, errors = 12, 7, 3
    ids = ids_on("-80", inserts // 2) + ids_on("80-", inserts - inserts // 2)
    conn = observed_proxy.connect()
    before = await observed_proxy.scrape()
    try:
        for i in ids:
            run(conn, f"insert into customer(customer_id, email, tenant_id) values ({i}, 'm{i}@example.com', 1)")
        returned = 0
        for n in range(selects):
            returned += len(run(conn, f"select customer_id, email from customer where customer_id = {ids[n % inserts]}"))
        for _ in range(errors):
            with pytest.raises(pymysql.err.ProgrammingError) as e:
                run(conn, "select * from no_such_table_for_metrics")
            assert e.value.args[0] == 1146
    finally:
        conn.close()
    after = await observed_proxy.scrape()

    assert returned == selects
    assert delta(after, before, QUERIES, statement="select", plan="Route/EqualUnique", keyspace="commerce") == selects
    assert delta(after, before, QUERIES, statement="insert", plan="Insert/Sharded", keyspace="commerce") == inserts
    assert delta(after, before, QUERIES, statement="select", plan="Unrouted", keyspace="commerce") == errors
    assert delta(after, before, "shardgate_errors", code="1146") == errors
    assert delta(after, before, "shardgate_rows_returned", statement="select", plan="Route/EqualUnique") == selects
    assert delta(after, before, DURATION_COUNT, statement="select") == selects + errors
    assert delta(after, before, DURATION_COUNT, statement="insert") == inserts
    # every statement counted is in the latency histogram, and nothing else is
    assert delta(after, before, QUERIES) == delta(after, before, DURATION_COUNT) >= selects + inserts + errors


async def test_a_statement_shape_is_planned_once_then_served_from_the_plan_cache(
    observed_proxy: ObservedProxy,
) -> None:
    alias = "c_" + uuid.uuid4().hex[:12]
    conn = observed_proxy.connect()
    try:
        before = await observed_proxy.scrape()
        run(conn, f"select customer_id as {alias} from customer where customer_id = 5")
        middle = await observed_proxy.scrape()
        run(conn, f"select customer_id as {alias} from customer where customer_id = 6")
        after = await observed_proxy.scrape()
    finally:
        conn.close()
    assert delta(middle, before, "shardgate_plan_cache_misses") == 1
    assert delta(middle, before, "shardgate_plan_cache_hits") == 0
    assert delta(after, middle, "shardgate_plan_cache_misses") == 0
    assert delta(after, middle, "shardgate_plan_cache_hits") == 1


async def test_pool_gauges_and_open_transactions_follow_pinned_connections(observed_proxy: ObservedProxy) -> None:
    (a, b), (c,) = ids_on("-80", 2), ids_on("80-", 1)
    # Earlier tests' sessions end asynchronously (a closed socket is seen at the proxy's next read; an SSCursor
    # dropped mid-stream closes at garbage collection): counting ours against a base read while one of those was
    # still ending made this test fail in CI (3 == 1 + 3). So wait until no other session is open.
    gc.collect()

    async def no_other_sessions() -> bool:
        return (await observed_proxy.scrape()).total("shardgate_client_connections") == 0

    await eventually(no_other_sessions, within=10.0, what="earlier tests' sessions end")
    idle = await observed_proxy.scrape()
    base_in_use = idle.total("shardgate_pool_in_use", keyspace="commerce", shard="-80")
    base_sessions = idle.total("shardgate_client_connections")
    assert idle.total("shardgate_pool_capacity", keyspace="commerce", shard="-80") == 32
    conns = [observed_proxy.connect() for _ in range(3)]
    try:
        run(conns[0], "begin")
        run(conns[0], f"select * from customer where customer_id = {a}")
        run(conns[1], "begin")
        run(conns[1], f"insert into customer(customer_id, email) values ({b}, 'b@example.com')")
        # one transaction over both shards
        run(conns[2], "begin")
        run(conns[2], f"insert into customer(customer_id, email) values ({a}, 'a@example.com')")
        run(conns[2], f"insert into customer(customer_id, email) values ({c}, 'c@example.com')")

        held = await observed_proxy.scrape()
        assert held.total("shardgate_transactions_open") == 3
        # (>=: the message poller of customer_events may hold one for a moment too)
        assert held.total("shardgate_pool_in_use", keyspace="commerce", shard="-80") >= base_in_use + 3
        assert held.total("shardgate_pool_in_use", keyspace="commerce", shard="80-") >= 1
        assert held.total("shardgate_pool_size", keyspace="commerce", shard="-80") >= 3
        assert held.total("shardgate_client_connections") == base_sessions + 3

        for conn in conns:
            run(conn, "commit")
        done = await observed_proxy.scrape()
        assert delta(done, held, "shardgate_transaction_commits", shards="1", mode="multi") == 2
        assert delta(done, held, "shardgate_transaction_commits", shards="2", mode="multi") == 1
        assert done.total("shardgate_transactions_open") == 0

        async def released() -> bool:
            figures = await observed_proxy.scrape()
            return figures.total("shardgate_pool_in_use", keyspace="commerce", shard="-80") <= base_in_use

        await eventually(released, what="committed transactions give their connections back")
    finally:
        for conn in conns:
            conn.close()

    async def sessions_gone() -> bool:
        return (await observed_proxy.scrape()).total("shardgate_client_connections") == base_sessions

    await eventually(sessions_gone, what="closed client sessions leave the connections gauge")


async def test_a_pool_at_capacity_counts_waiters_and_wait_time(observed_proxy: ObservedProxy) -> None:
    # every connection of the -80 pool pinned by a transaction, and one more session waiting
    (x,) = ids_on("-80", 1)
    first = await observed_proxy.scrape()
    capacity = int(first.total("shardgate_pool_capacity", keyspace="commerce", shard="-80"))
    holders = [observed_proxy.connect() for _ in range(capacity)]
    waiter = observed_proxy.connect()
    try:
        for h in holders:
            run(h, "begin")
            run(h, f"select * from customer where customer_id = {x}")
        before = await observed_proxy.scrape()
        assert before.total("shardgate_pool_in_use", keyspace="commerce", shard="-80") == capacity
        waiting = asyncio.get_running_loop().run_in_executor(
            None, run, waiter, f"select * from customer where customer_id = {x}")

        async def one_waiting() -> bool:
            figures = await observed_proxy.scrape()
            # (the message poller of customer_events may be waiting too)
            return figures.total("shardgate_pool_waiters", keyspace="commerce", shard="-80") >= 1

        await eventually(one_waiting, what="a session waiting for a connection of the full pool")
        await asyncio.sleep(0.3)
        run(holders[0], "commit")
        await waiting
        after = await observed_proxy.scrape()
        assert after.total("shardgate_pool_waiters", keyspace="commerce", shard="-80") == 0
        assert delta(after, before, "shardgate_pool_waits", keyspace="commerce", shard="-80") >= 1
        assert delta(after, before, "shardgate_pool_wait_seconds", keyspace="commerce", shard="-80") >= 0.3
    finally:
        for conn in [*holders, waiter]:
            conn.close()


async def test_a_two_phase_commit_and_a_rollback_show_in_the_twopc_counters(observed_proxy: ObservedProxy) -> None:
    (a,), (c,) = ids_on("-80", 1), ids_on("80-", 1)
    conn = observed_proxy.connect()
    before = await observed_proxy.scrape()
    try:
        run(conn, "set transaction_mode = 'twopc'")
        run(conn, "begin")
        run(conn, f"insert into customer(customer_id, email) values ({a}, 'x{a}@example.com')")
        run(conn, f"insert into customer(customer_id, email) values ({c}, 'x{c}@example.com')")
        run(conn, "commit")
        run(conn, "begin")
        run(conn, f"update customer set email = 'y' where customer_id in ({a}, {c})")
        run(conn, "rollback")
    finally:
        conn.close()

    async def counted() -> bool:
        after = await observed_proxy.scrape()
        return (delta(after, before, "shardgate_twopc", event="commits_two_phase") == 1
                and delta(after, before, "shardgate_twopc", event="rollbacks") == 1
                and delta(after, before, "shardgate_transaction_commits", shards="2", mode="twopc") == 1)

    await eventually(counted, what="the 2PC commit and rollback counted")


async def test_the_fast_paths_shard_connections_show_next_to_the_pools(observed_proxy: ObservedProxy) -> None:
    (a,) = ids_on("-80", 1)
    conn = observed_proxy.connect()
    try:
        for _ in range(5):  # planned once, then answered by the fast path on a link of its own
            run(conn, f"select customer_id from customer where customer_id = {a}")

        async def linked() -> bool:
            figures = await observed_proxy.scrape()
            return figures.total("shardgate_fast_path_links", keyspace="commerce", shard="-80") >= 1

        await eventually(linked, what="a fast-path link to commerce/-80 in the figures")
    finally:
        conn.close()
