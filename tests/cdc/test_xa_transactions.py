"""Two-phase-commit (XA) transactions in the change stream.

A ``twopc`` transaction that writes on two shards commits the first shard (the MM) as a
plain transaction and the other as an XA branch: ``XA PREPARE`` (its rows, one binlog event
group) and later ``XA COMMIT`` (another group). These tests run a proxy in ``twopc`` mode
over a cluster of their own (keyspace ``bank``, shards ``-80`` and ``80-``; the proxy
is killed at chosen points of its commit) and read every shard's binlog with a VStream:
the branch's rows arrive once, at the XA COMMIT, including for a consumer resuming from a
position saved between prepare and commit, and for a branch the resolver committed after
the coordinator died or its shard restarted; a rolled-back branch never arrives.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
import pytest_asyncio

from proxy.cdc import CommitEvent, EventGroup, Gtid, GtidPosition, Vgtid, VStream
from proxy.cdc.errors import XaBranchUnavailableError
from proxy.cdc.xa_branches import Xid
from proxy.cluster import LocalCluster
from tests.cdc.conftest import collect_groups, consume_for, rows_of
from tests.proxy.twopc_support import (
    KEYSPACE,
    bank_cluster,
    direct,
    ids_on,
    prepared_xids,
    query_shard,
    running_proxy,
    wait_until,
)
from tests.proxy_process import ProxyProcess

SHARDS = ["-80", "80-"]
MM, XA = SHARDS  # the transactions below touch -80 first: it holds the decision
ACCOUNT, TRANSFER = f"{KEYSPACE}.account", f"{KEYSPACE}.transfer"
TABLES = [ACCOUNT, TRANSFER]
LOW, HIGH = (ids_on(s, SHARDS, 200, start=1000) for s in SHARDS)  # ids living on each shard
READ_BACK = "read a prepared XA branch back from the binlog"


@pytest_asyncio.fixture(scope="module")
async def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LocalCluster]:
    async with bank_cluster(
        request,
        tmp_path_factory.mktemp("cdc-xa"),
        SHARDS,
        extra="transaction_mode: twopc\ntwopc: {resolver_interval_seconds: 0.2}\n",
    ) as c:
        yield c



@pytest.fixture(scope="module")
def proxy(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxyProcess]:
    """A healthy proxy: its resolver finishes what a killed one left prepared."""
    with running_proxy(cluster, tmp_path_factory.mktemp("proxy") / "proxy.log") as p:
        yield p


@pytest.fixture
def accounts(proxy: ProxyProcess) -> tuple[int, int]:
    """An account on each shard (balance 100), created in one-shard autocommit statements."""
    a, b = LOW.pop(), HIGH.pop()
    run(proxy, f"insert into account (id, balance) values ({a}, 100)")
    run(proxy, f"insert into account (id, balance) values ({b}, 100)")
    return a, b


def run(p: ProxyProcess, *statements: str) -> None:
    conn = p.connect(KEYSPACE, autocommit=True)
    try:
        with conn.cursor() as c:
            for statement in statements:
                c.execute(statement)
    finally:
        conn.close()


def transfer_statements(a: int, b: int, amount: int, t1: int, t2: int) -> list[str]:
    """Writes on both shards: the account and a transfer row on -80, the same on 80-."""
    return [
        "begin",
        f"update account set balance = balance - {amount} where id = {a}",
        f"update account set balance = balance + {amount} where id = {b}",
        f"insert into transfer (id, src, dst, amount) values ({t1}, {a}, {b}, {amount})",
        f"insert into transfer (id, src, dst, amount) values ({t2}, {a}, {b}, {amount})",
        "commit",
    ]


def transfer(p: ProxyProcess, a: int, b: int, amount: int, t1: int, t2: int) -> None:
    conn = p.connect(KEYSPACE)
    try:
        with conn.cursor() as c:
            for statement in transfer_statements(a, b, amount, t1, t2):
                c.execute(statement)
    finally:
        conn.close()


def stream(cluster: LocalCluster, start: str | Vgtid = "current") -> VStream:
    return VStream(cluster.endpoints, TABLES, start, heartbeat_interval=0.3)


def row_keys(groups: list[EventGroup]) -> list[tuple[str, str, str, int]]:
    """(shard, table, op, id) of every row change, in delivery order."""
    out = []
    for table in TABLES:
        for shard, op, before, after in rows_of(groups, table):
            out.append((shard, table, op, (after or before)["id"]))
    return out


def has_rows(*wanted: tuple[str, str, str, int]):
    return lambda groups: all(w in row_keys(groups) for w in wanted)


def expected_transfer_rows(a: int, b: int, t1: int, t2: int) -> list[tuple[str, str, str, int]]:
    return [
        (MM, ACCOUNT, "update", a),
        (XA, ACCOUNT, "update", b),
        (MM, TRANSFER, "insert", t1),
        (XA, TRANSFER, "insert", t2),
    ]


def binlog_events(cluster: LocalCluster, shard: str) -> list[tuple[Any, ...]]:
    """(event type, info) of every event in the shard's binlog files."""
    out = []
    for name, *_size in query_shard(cluster, shard, "show binary logs"):
        rows = query_shard(cluster, shard, f"show binlog events in '{name}'")
        out.extend((row[2], row[5]) for row in rows)
    return out


def statement_of_group(cluster: LocalCluster, shard: str, gtid: str) -> str:
    """The statement that ends the binlog group of ``gtid`` (how it committed)."""
    events = binlog_events(cluster, shard)
    for i, (kind, info) in enumerate(events):
        if kind == "Gtid" and info.endswith(f"GTID {gtid}"):
            for later_kind, later_info in events[i + 1 :]:
                if later_kind in ("Query", "Xid", "XA_prepare"):
                    return later_info
    raise AssertionError(f"GTID {gtid} not in the binlog of {shard}")


def prepared_gtids(cluster: LocalCluster, shard: str) -> list[str]:
    """GTIDs of the prepared (XA PREPARE) groups in the shard's binlog."""
    return [
        info.rsplit(" ", 1)[1]
        for kind, info in binlog_events(cluster, shard)
        if kind == "Gtid" and info.startswith("XA START ")
    ]


def commit_gtid(groups: list[EventGroup], shard: str, row_id: int) -> str:
    for group in groups:
        if group.shard == shard and any(
            (c.after or c.before)["id"] == row_id for e in group.row_events() for c in e.changes
        ):
            return group_gtid(group)
    raise AssertionError(f"no group of {shard} holds row {row_id}")


def group_gtid(group: EventGroup) -> str:
    """The GTID of the shard transaction a group delivers (its COMMIT's)."""
    return next(e.gtid for e in group.events if isinstance(e, CommitEvent))


def nothing_prepared(cluster: LocalCluster) -> bool:
    return all(not rows for rows in prepared_xids(cluster, SHARDS).values())


# -- delivery ------------------------------------------------------------------------------------


async def test_twopc_transaction_on_two_shards_reaches_the_stream_once_with_every_row(
    cluster: LocalCluster, proxy: ProxyProcess, accounts: tuple[int, int]
) -> None:
    a, b = accounts
    t1, t2 = LOW.pop(), HIGH.pop()
    wanted = expected_transfer_rows(a, b, t1, t2)
    async with stream(cluster) as s:
        await asyncio.to_thread(transfer, proxy, a, b, 30, t1, t2)
        groups = await collect_groups(s, has_rows(*wanted), within=15)
        groups += await consume_for(s, 1.0)  # nothing comes twice
    assert sorted(k for k in row_keys(groups) if k[3] in (a, b, t1, t2)) == sorted(wanted)
    balances = {
        after["id"]: after["balance"]
        for _shard, _op, _before, after in rows_of(groups, ACCOUNT)
        if after and after["id"] in (a, b)
    }
    assert balances == {a: 70, b: 130}
    # One transaction per shard, each with its shard's rows.
    for shard, ids in ((MM, {a, t1}), (XA, {b, t2})):
        holding = [g for g in groups if g.shard == shard and g.row_count]
        assert len(holding) == 1
        assert {k[3] for k in row_keys(holding)} == ids
    # The MM committed plainly; the other shard's rows come with its XA COMMIT's GTID.
    assert statement_of_group(cluster, MM, commit_gtid(groups, MM, a)).startswith("COMMIT")
    assert statement_of_group(cluster, XA, commit_gtid(groups, XA, b)).startswith("XA COMMIT X'")


async def test_branch_committed_in_one_phase_reaches_the_stream(
    cluster: LocalCluster, proxy: ProxyProcess, accounts: tuple[int, int]
) -> None:
    """Read on -80 (its plain branch holds the decision), write on 80- only: the XA branch
    commits with XA COMMIT ... ONE PHASE, binlogged as an ordinary transaction."""
    a, b = accounts
    async with stream(cluster) as s:
        await asyncio.to_thread(
            run,
            proxy,
            "begin",
            f"select balance from account where id = {a} for update",
            f"update account set balance = balance + 7 where id = {b}",
            "commit",
        )
        groups = await collect_groups(s, has_rows((XA, ACCOUNT, "update", b)), within=15)
        groups += await consume_for(s, 1.0)
    assert [k for k in row_keys(groups) if k[3] in (a, b)] == [(XA, ACCOUNT, "update", b)]


async def test_rolled_back_prepared_branch_reaches_the_stream_as_nothing(
    cluster: LocalCluster, accounts: tuple[int, int], tmp_path: Path
) -> None:
    """Every branch prepared, then a failure before the decision: the prepared branch is
    rolled back (XA ROLLBACK, by a resolver). A later
    transaction's rows arrive; the rolled-back rows never do."""
    a, b = accounts
    t1, t2, t3 = LOW.pop(), HIGH.pop(), HIGH.pop()
    prepared_before = len(prepared_gtids(cluster, XA))
    with running_proxy(cluster, tmp_path / "proxy.log", fault="after_prepare=fail") as p:
        async with stream(cluster) as s:
            with pytest.raises(pymysql.err.MySQLError):
                await asyncio.to_thread(transfer, p, a, b, 30, t1, t2)
            # Undecided: a resolver rolls the prepared branch back (presumed abort).
            await asyncio.to_thread(wait_until, lambda: nothing_prepared(cluster), 15, "rollback")
            await asyncio.to_thread(
                run, p, f"insert into transfer (id, src, dst, amount) values ({t3}, {a}, {b}, 1)"
            )
            groups = await collect_groups(s, has_rows((XA, TRANSFER, "insert", t3)), within=15)
            groups += await consume_for(s, 1.0)
    assert [k for k in row_keys(groups) if k[3] in (a, b, t1, t2, t3)] == [
        (XA, TRANSFER, "insert", t3)
    ]
    # The branch really was prepared, then rolled back, in the binlog.
    assert len(prepared_gtids(cluster, XA)) == prepared_before + 1
    queries = [info for kind, info in binlog_events(cluster, XA) if kind == "Query"]
    assert any(info.startswith("XA ROLLBACK X'") for info in queries)


# -- resuming ------------------------------------------------------------------------------------


async def test_consumer_resuming_between_prepare_and_commit_sees_the_branch_once(
    cluster: LocalCluster,
    accounts: tuple[int, int],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The coordinator pauses between XA PREPARE and the decision; meanwhile a transaction
    on the prepared shard is delivered and its VGTID saved: that position includes the
    prepared group, not the XA COMMIT. A consumer resuming from it gets the branch's rows
    once (read back from the binlog) and the saved transaction not again; one resuming
    after the XA COMMIT does not get them again."""
    caplog.set_level(logging.INFO, logger="proxy.cdc")
    a, b = accounts
    t1, t2, marker, later = LOW.pop(), HIGH.pop(), HIGH.pop(), HIGH.pop()
    wanted = expected_transfer_rows(a, b, t1, t2)
    with running_proxy(cluster, tmp_path / "proxy.log", fault="after_prepare=pause:2") as p:
        async with stream(cluster) as first:
            commit = asyncio.ensure_future(asyncio.to_thread(transfer, p, a, b, 30, t1, t2))
            await asyncio.to_thread(
                wait_until, lambda: bool(prepared_xids(cluster, [XA])[XA]), 5, "the prepare"
            )
            await asyncio.to_thread(direct_insert, cluster, XA, marker)
            seen = await collect_groups(first, has_rows((XA, TRANSFER, "insert", marker)))
            saved = seen[-1].vgtid
            await commit
            live = await collect_groups(first, has_rows(*wanted), within=15)
    assert not read_back_logged(caplog)  # the live stream held the branch: nothing re-read
    assert sorted(k for k in row_keys(live) if k[3] in (a, b, t1, t2)) == sorted(wanted)
    assert saved is not None
    position = GtidPosition.parse(saved.position_of(KEYSPACE, XA) or "")
    assert position.includes(Gtid.parse(prepared_gtids(cluster, XA)[-1]))
    assert not position.includes(Gtid.parse(commit_gtid(live, XA, b)))

    async with stream(cluster, saved) as resumed:
        groups = await collect_groups(resumed, has_rows(*wanted), within=15)
        groups += await consume_for(resumed, 1.0)
    assert sorted(k for k in row_keys(groups) if k[3] in (a, b, t1, t2, marker)) == sorted(wanted)
    assert read_back_logged(caplog)
    assert commit_gtid(groups, XA, b) == commit_gtid(live, XA, b)

    after_commit = groups[-1].vgtid
    assert after_commit is not None
    async with stream(cluster, after_commit) as again:
        await asyncio.to_thread(direct_insert, cluster, XA, later)
        groups = await collect_groups(again, has_rows((XA, TRANSFER, "insert", later)))
        groups += await consume_for(again, 1.0)
    assert [k for k in row_keys(groups) if k[3] in (a, b, t1, t2, later)] == [
        (XA, TRANSFER, "insert", later)
    ]


def direct_insert(cluster: LocalCluster, shard: str, transfer_id: int) -> None:
    """A transaction written on the shard itself, around the proxy."""
    conn = direct(cluster, shard)
    try:
        with conn.cursor() as c:
            c.execute(
                f"insert into transfer (id, src, dst, amount) values ({transfer_id}, 0, 0, 0)"
            )
    finally:
        conn.close()


def read_back_logged(caplog: pytest.LogCaptureFixture) -> bool:
    return any(r.getMessage() == READ_BACK for r in caplog.records)


# -- crashes -------------------------------------------------------------------------------------


async def test_branch_committed_by_the_resolver_after_the_coordinator_died_reaches_the_stream(
    cluster: LocalCluster, proxy: ProxyProcess, accounts: tuple[int, int], tmp_path: Path
) -> None:
    """The coordinator is killed after the decision (COMMIT on the MM), before the XA
    COMMIT: the branch stays prepared until the healthy proxy's resolver commits it. A
    live consumer gets its rows then, once; one resuming from the position it had just
    before that XA COMMIT gets exactly what the live one got after it."""
    a, b = accounts
    t1, t2 = LOW.pop(), HIGH.pop()
    wanted = expected_transfer_rows(a, b, t1, t2)
    async with stream(cluster) as live:
        with running_proxy(cluster, tmp_path / "dying.log", fault="after_decision=kill") as dying:
            with pytest.raises(pymysql.err.OperationalError):
                await asyncio.to_thread(transfer, dying, a, b, 40, t1, t2)
            dying.proc.wait(10)
            assert dying.proc.returncode == -9
        await asyncio.to_thread(wait_until, lambda: nothing_prepared(cluster), 15, "the resolver")
        groups = await collect_groups(live, has_rows(*wanted), within=15)
        groups += await consume_for(live, 1.0)
    assert sorted(k for k in row_keys(groups) if k[3] in (a, b, t1, t2)) == sorted(wanted)
    xa_commit = commit_gtid(groups, XA, b)
    assert statement_of_group(cluster, XA, xa_commit).startswith("XA COMMIT X'")

    at = next(
        i
        for i, g in enumerate(groups)
        if g.shard == XA and g.row_count and group_gtid(g) == xa_commit
    )
    assert at > 0  # the MM's group came first
    saved = groups[at - 1].vgtid
    assert saved is not None
    expected = [k for k in row_keys(groups[at:]) if k[3] in (a, b, t1, t2)]
    async with stream(cluster, saved) as resumed:
        later = await collect_groups(resumed, has_rows(*expected), within=15)
        later += await consume_for(resumed, 1.0)
    assert sorted(k for k in row_keys(later) if k[3] in (a, b, t1, t2)) == sorted(expected)


async def test_branch_committed_after_its_shard_restarted_reaches_the_stream(
    cluster: LocalCluster, proxy: ProxyProcess, accounts: tuple[int, int], tmp_path: Path
) -> None:
    """The decision is COMMIT, then the prepared shard's mariadbd is killed before its XA
    COMMIT; MariaDB keeps the prepared branch, and it is committed once the shard is back.
    The stream, which reconnects to the restarted shard, delivers its rows once."""
    a, b = accounts
    t1, t2 = LOW.pop(), HIGH.pop()
    wanted = expected_transfer_rows(a, b, t1, t2)
    with running_proxy(cluster, tmp_path / "proxy.log", fault="after_decision=pause:1.5") as p:
        async with stream(cluster) as live:
            commit = asyncio.ensure_future(asyncio.to_thread(transfer, p, a, b, 50, t1, t2))
            await asyncio.to_thread(
                wait_until, lambda: bool(prepared_xids(cluster, [XA])[XA]), 5, "the prepare"
            )
            await asyncio.sleep(0.5)  # the decision is committed within the pause's first moments
            await cluster.stop_shard(KEYSPACE, XA, kill=True)
            await commit  # OK: the decision was recorded before the crash
            await cluster.start_shard(KEYSPACE, XA)
            await asyncio.to_thread(wait_until, lambda: nothing_prepared(cluster), 20, "the commit")
            groups = await collect_groups(live, has_rows(*wanted), within=30)
            groups += await consume_for(live, 1.0)
    assert sorted(k for k in row_keys(groups) if k[3] in (a, b, t1, t2)) == sorted(wanted)


async def test_commit_of_a_branch_whose_prepare_was_purged_ends_the_stream_naming_it(
    cluster: LocalCluster,
) -> None:
    """The binlog file holding the XA PREPARE is purged before the XA COMMIT; a stream
    starting between the two cannot have the rows: it fails, naming the xid, instead of
    going on without them."""
    xid = Xid(7, b"cdc-purged", b"branch")
    row_id = HIGH.pop()
    conn = direct(cluster, XA)
    try:
        with conn.cursor() as c:
            c.execute(f"xa start {xid}")
            c.execute(f"insert into transfer (id, src, dst, amount) values ({row_id}, 1, 2, 3)")
            c.execute(f"xa end {xid}")
            c.execute(f"xa prepare {xid}")
    finally:
        conn.close()
    between = Vgtid.from_json(
        [
            {"keyspace": KEYSPACE, "shard": shard, "gtid": gtid_binlog_pos(cluster, shard)}
            for shard in SHARDS
        ]
    )
    await asyncio.to_thread(purge_binlogs, cluster, XA)
    await asyncio.to_thread(query_shard, cluster, XA, f"xa commit {xid}")
    with pytest.raises(XaBranchUnavailableError) as failure:
        async with stream(cluster, between) as s:
            await collect_groups(s, lambda groups: False, within=15)
    assert failure.value.xid == str(xid)
    assert str(xid) in str(failure.value) and "bank/80-" in str(failure.value)


def gtid_binlog_pos(cluster: LocalCluster, shard: str) -> str:
    return str(query_shard(cluster, shard, "select @@global.gtid_binlog_pos")[0][0])


def purge_binlogs(cluster: LocalCluster, shard: str) -> None:
    """Rotate the binlog and purge every older file (MariaDB keeps a file until the engines
    checkpointed it: retried until gone)."""
    query_shard(cluster, shard, "flush binary logs")
    newest = query_shard(cluster, shard, "show binary logs")[-1][0]

    def purged() -> bool:
        query_shard(cluster, shard, f"purge binary logs to '{newest}'")
        return query_shard(cluster, shard, "show binary logs")[0][0] == newest

    wait_until(purged, 20, "the old binlogs purged")
