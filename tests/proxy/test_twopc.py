"""transaction_mode (Vitess's single / multi / twopc) through a real proxy process over
real MariaDB shards: commit and rollback, in-doubt transactions finished by the
resolver after the coordinator died, SHOW UNRESOLVED TRANSACTIONS / SHOW TRANSACTION
STATUS, a shard down during commit."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pymysql
import pytest
import pytest_asyncio

from proxy.cluster import LocalCluster
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
LOW, HIGH = (ids_on(s, SHARDS, 40) for s in SHARDS)  # account ids on each shard


@pytest_asyncio.fixture(scope="module")
async def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalCluster]:
    async with bank_cluster(
        request, tmp_path_factory.mktemp("twopc"), SHARDS, extra="twopc: {resolver_interval_seconds: 0.2}\n",
        messages=True,
    ) as c:
        yield c



@pytest.fixture(scope="module")
def proxy(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    with running_proxy(cluster, tmp_path_factory.mktemp("proxy") / "proxy.log") as p:
        yield p


@pytest.fixture
def accounts(proxy: ProxyProcess) -> Iterator[tuple[int, int]]:
    """Two accounts on different shards, balance 100 each (ids unique per test)."""
    a, b = LOW.pop(), HIGH.pop()
    conn = proxy.connect(KEYSPACE, autocommit=True)
    with conn.cursor() as c:
        c.execute(f"insert into account (id, balance) values ({a}, 100)")
        c.execute(f"insert into account (id, balance) values ({b}, 100)")
    conn.close()
    yield a, b


def balances(proxy: ProxyProcess, *ids: int) -> list[int]:
    conn = proxy.connect(KEYSPACE)
    try:
        with conn.cursor() as c:
            out = []
            for i in ids:
                c.execute(f"select balance from account where id = {i}")
                row = c.fetchone()
                out.append(None if row is None else int(row[0]))
            return out
    finally:
        conn.close()


def transfer(conn: pymysql.connections.Connection, a: int, b: int, amount: int, mode: str) -> None:
    with conn.cursor() as c:
        c.execute(f"set transaction_mode = '{mode}'")
        c.execute("begin")
        c.execute(f"update account set balance = balance - {amount} where id = {a}")
        c.execute(f"update account set balance = balance + {amount} where id = {b}")
        c.execute("commit")


def nothing_prepared(cluster: LocalCluster) -> bool:
    return all(not rows for rows in prepared_xids(cluster, SHARDS).values())


def records(cluster: LocalCluster) -> list[tuple[object, ...]]:
    return [r for s in SHARDS for r in query_shard(cluster, s, "select dtid, state from _shardgate.dt_state")]


# -- modes -------------------------------------------------------------------------------------


def test_transaction_mode_is_a_session_variable(proxy: ProxyProcess) -> None:
    conn = proxy.connect(KEYSPACE)
    try:
        with conn.cursor() as c:
            c.execute("select @@transaction_mode")
            assert c.fetchone() == ("MULTI",)  # the cluster file's default
            c.execute("set @@transaction_mode = 'twopc'")
            c.execute("select @@transaction_mode")
            assert c.fetchone() == ("TWOPC",)
            c.execute("set session transaction_mode = single")
            c.execute("select @@transaction_mode")
            assert c.fetchone() == ("SINGLE",)
            with pytest.raises(pymysql.err.MySQLError) as e:
                c.execute("set transaction_mode = 'sometimes'")
            assert e.value.args[0] == 1231
            assert "can't be set to the value of 'sometimes'" in e.value.args[1]
    finally:
        conn.close()


def test_transaction_mode_cannot_change_after_the_transaction_touched_a_shard(proxy: ProxyProcess, accounts) -> None:
    a, _ = accounts
    conn = proxy.connect(KEYSPACE)
    try:
        with conn.cursor() as c:
            c.execute("begin")
            c.execute("set transaction_mode = 'twopc'")  # nothing touched yet: allowed
            c.execute(f"update account set balance = 1 where id = {a}")
            with pytest.raises(pymysql.err.MySQLError) as e:
                c.execute("set transaction_mode = 'multi'")
            assert e.value.args[0] == 1568
            c.execute("rollback")
    finally:
        conn.close()


def test_single_mode_refuses_a_second_shard_and_rolls_back(proxy: ProxyProcess, accounts) -> None:
    a, b = accounts
    conn = proxy.connect(KEYSPACE)
    try:
        with conn.cursor() as c:
            c.execute("set transaction_mode = 'single'")
            c.execute("begin")
            c.execute(f"update account set balance = balance - 10 where id = {a}")
            with pytest.raises(pymysql.err.MySQLError) as e:
                c.execute(f"update account set balance = balance + 10 where id = {b}")
            assert e.value.args[0] == 1317
            assert e.value.args[1].startswith("multi-db transaction attempted")
            c.execute("commit")  # the transaction was rolled back: nothing to commit
        assert balances(proxy, a, b) == [100, 100]
        with conn.cursor() as c:  # one shard is fine
            c.execute("begin")
            c.execute(f"update account set balance = balance - 10 where id = {a}")
            c.execute("commit")
        assert balances(proxy, a, b) == [90, 100]
    finally:
        conn.close()


def test_multi_mode_commits_every_shard_without_xa(proxy: ProxyProcess, cluster: LocalCluster, accounts) -> None:
    a, b = accounts
    conn = proxy.connect(KEYSPACE)
    try:
        transfer(conn, a, b, 30, "multi")
    finally:
        conn.close()
    assert balances(proxy, a, b) == [70, 130]
    assert nothing_prepared(cluster)


# -- twopc ---------------------------------------------------------------------------------------


def test_twopc_commit_across_two_shards(proxy: ProxyProcess, cluster: LocalCluster, accounts) -> None:
    a, b = accounts
    conn = proxy.connect(KEYSPACE)
    try:
        transfer(conn, a, b, 25, "twopc")
        assert balances(proxy, a, b) == [75, 125]
        with conn.cursor() as c:  # the session reads its own writes inside a 2PC transaction
            c.execute("begin")
            c.execute(f"update account set balance = balance + 1 where id in ({a}, {b})")
            c.execute(f"select balance from account where id in ({a}, {b}) order by balance")
            assert [r[0] for r in c.fetchall()] == [76, 126]
            c.execute("commit")
    finally:
        conn.close()
    assert balances(proxy, a, b) == [76, 126]
    assert nothing_prepared(cluster)
    wait_until(lambda: not [r for r in records(cluster) if r[1] == b"COMMIT"], 5, "decision records cleared")


def test_twopc_rollback_leaves_nothing_prepared(proxy: ProxyProcess, cluster: LocalCluster, accounts) -> None:
    a, b = accounts
    conn = proxy.connect(KEYSPACE)
    try:
        with conn.cursor() as c:
            c.execute("set transaction_mode = 'twopc'")
            c.execute("begin")
            c.execute(f"update account set balance = balance - 10 where id = {a}")
            c.execute(f"update account set balance = balance + 10 where id = {b}")
            c.execute("rollback")
    finally:
        conn.close()
    assert balances(proxy, a, b) == [100, 100]
    assert nothing_prepared(cluster)


def test_twopc_single_shard_transaction_commits_in_one_phase(proxy: ProxyProcess, cluster: LocalCluster) -> None:
    a1, a2 = LOW.pop(), LOW.pop()
    conn = proxy.connect(KEYSPACE)
    try:
        with conn.cursor() as c:
            c.execute("set transaction_mode = 'twopc'")
            c.execute("begin")
            c.execute(f"insert into account (id, balance) values ({a1}, 5), ({a2}, 6)")
            c.execute("commit")
    finally:
        conn.close()
    assert balances(proxy, a1, a2) == [5, 6]
    assert nothing_prepared(cluster)
    assert not records(cluster) or all(r[1] != b"COMMIT" for r in records(cluster))


def test_twopc_scattered_statement_is_atomic(cluster: LocalCluster, accounts, tmp_path: Path) -> None:
    """An autocommit UPDATE reaching both shards: a failure after the prepare leaves no shard changed."""
    a, b = accounts
    with running_proxy(cluster, tmp_path / "proxy.log", fault="after_prepare=fail") as p:
        conn = p.connect(KEYSPACE, autocommit=True)
        try:
            with conn.cursor() as c:
                c.execute("set transaction_mode = 'twopc'")
                with pytest.raises(pymysql.err.MySQLError):
                    c.execute(f"update account set balance = balance + 1000 where id in ({a}, {b})")
                c.execute(f"update account set balance = balance + 1 where id = {a}")  # one shard: no 2PC
        finally:
            conn.close()
        assert balances(p, a, b) == [101, 100]
        wait_until(lambda: nothing_prepared(cluster), 5, "the failed branches rolled back")


async def test_twopc_message_is_delivered_only_after_the_commit(cluster: LocalCluster, accounts, tmp_path: Path) -> None:
    """A message inserted in a 2PC transaction (on a participant that is prepared, not the
    MM) reaches a subscriber only once the transaction committed; a rolled-back one never."""
    import asyncio

    from tests.messaging.proxy_harness import ProxyStream

    a, b = accounts
    kept, dropped = HIGH.pop(), HIGH.pop()
    with running_proxy(cluster, tmp_path / "proxy.log", fault="after_prepare=pause:1.5") as p:
        stream = await ProxyStream.open(p, KEYSPACE, "stream * from bank_events")
        try:
            def rolled_back() -> None:
                conn = p.connect(KEYSPACE)
                with conn.cursor() as c:
                    c.execute("set transaction_mode = 'twopc'")
                    c.execute("begin")
                    c.execute(f"update account set balance = balance - 1 where id = {a}")
                    c.execute(f"insert into bank_events (id, message) values ({dropped}, '{{}}')")
                    c.execute("rollback")
                conn.close()

            def committed() -> None:
                conn = p.connect(KEYSPACE)
                with conn.cursor() as c:
                    c.execute("set transaction_mode = 'twopc'")
                    c.execute("begin")
                    c.execute(f"update account set balance = balance - 1 where id = {a}")  # MM: shard -80
                    c.execute(f"insert into bank_events (id, message) values ({kept}, '{{}}')")  # shard 80-
                    c.execute("commit")
                conn.close()

            await asyncio.to_thread(rolled_back)
            commit = asyncio.ensure_future(asyncio.to_thread(committed))
            await stream.nothing_for(1.2)  # prepared, decision pending: not deliverable
            await commit
            rows = await stream.rows(1, within=5)
            assert rows[0][0] == kept
            await stream.nothing_for(1.5)  # the rolled-back message never comes
        finally:
            await stream.close()


def test_twopc_shards_that_were_only_read_are_not_prepared(cluster: LocalCluster, accounts, tmp_path: Path) -> None:
    """Read on one shard, write on the other: one writer, no two-phase commit (the injected
    failure after the prepare never fires); writes on both: two-phase, and it fails whole."""
    a, b = accounts
    with running_proxy(cluster, tmp_path / "proxy.log", fault="after_prepare=fail") as p:
        conn = p.connect(KEYSPACE)
        try:
            with conn.cursor() as c:
                c.execute("set transaction_mode = 'twopc'")
                c.execute("begin")
                c.execute(f"select balance from account where id = {a} for update")
                c.execute(f"update account set balance = balance + 7 where id = {b}")
                c.execute("commit")
                with pytest.raises(pymysql.err.MySQLError):
                    transfer(conn, a, b, 1, "twopc")
        finally:
            conn.close()
        assert balances(p, a, b) == [100, 107]
        wait_until(lambda: nothing_prepared(cluster), 5, "the failed branches rolled back")


# -- recovery ------------------------------------------------------------------------------------


def _commit_until_killed(p: ProxyProcess, a: int, b: int) -> None:
    conn = p.connect(KEYSPACE)
    with pytest.raises(pymysql.err.OperationalError):  # the coordinator dies under the client
        transfer(conn, a, b, 40, "twopc")
    p.proc.wait(10)
    assert p.proc.returncode == -9


def test_resolver_commits_a_decided_transaction_whose_coordinator_died(
    proxy: ProxyProcess, cluster: LocalCluster, accounts, tmp_path: Path
) -> None:
    a, b = accounts
    with running_proxy(cluster, tmp_path / "dying.log", fault="after_decision=kill") as dying:
        _commit_until_killed(dying, a, b)
    # The decision (COMMIT) is on the MM; the other branch is left prepared, holding its row.
    conn = proxy.connect(KEYSPACE)  # the surviving proxy's resolver finishes it
    with conn.cursor() as c:
        c.execute("set transaction_mode = 'twopc'")
    conn.close()
    wait_until(lambda: nothing_prepared(cluster), 10, "the resolver to commit the prepared branch")
    assert balances(proxy, a, b) == [60, 140]


def test_resolver_rolls_back_an_undecided_transaction_whose_coordinator_died(
    proxy: ProxyProcess, cluster: LocalCluster, accounts, tmp_path: Path
) -> None:
    a, b = accounts
    with running_proxy(cluster, tmp_path / "dying.log", fault="after_prepare=kill") as dying:
        _commit_until_killed(dying, a, b)
    conn = proxy.connect(KEYSPACE)
    with conn.cursor() as c:
        c.execute("set transaction_mode = 'twopc'")
    conn.close()
    wait_until(lambda: nothing_prepared(cluster), 10, "the resolver to roll back the prepared branch")
    assert balances(proxy, a, b) == [100, 100]
    assert any(r[1] == b"ROLLBACK" for r in records(cluster))  # the tombstone a late coordinator would hit


def test_resolvers_of_several_processes_finish_each_transaction_once(
    proxy: ProxyProcess, cluster: LocalCluster, tmp_path: Path
) -> None:
    """In-doubt branches of a dead coordinator (made by hand): one decided COMMIT, one
    undecided; two proxies resolve at once, each transaction is finished one way."""
    a_commit, a_abort = HIGH.pop(), HIGH.pop()
    setup = proxy.connect(KEYSPACE, autocommit=True)
    with setup.cursor() as c:
        c.execute(f"insert into account (id, balance) values ({a_commit}, 0), ({a_abort}, 0)")
    setup.close()
    from proxy.twopc.xid import xid_sql

    dead = "0123456789ab"  # no process holds its liveness lock
    decided, undecided = f"{KEYSPACE}:-80:{dead}-1", f"{KEYSPACE}:-80:{dead}-2"
    # The "coordinator": alive (its liveness lock held on the MM) while it prepares and decides.
    mm = direct(cluster, "-80")
    with mm.cursor() as c:
        c.execute(f"select get_lock('shardgate_2pc_{dead}', 0)")
    for dtid, row in ((decided, a_commit), (undecided, a_abort)):
        rm = direct(cluster, "80-")
        x = xid_sql(dtid, (KEYSPACE, "80-"))
        with rm.cursor() as c:
            c.execute(f"xa start {x}")
            c.execute(f"update account set balance = 7 where id = {row}")
            c.execute(f"xa end {x}")
            c.execute(f"xa prepare {x}")
        rm.close()  # detached: only a resolver can finish it now
    with mm.cursor() as c:
        c.execute("create database if not exists _shardgate")
        c.execute("create table if not exists _shardgate.dt_state (dtid varbinary(64) primary key, "
                  "state varbinary(16) not null, participants varbinary(4096) not null, time_created datetime(6) not null)")
        c.execute(f"insert into _shardgate.dt_state values ('{decided}', 'COMMIT', 'bank:80-', utc_timestamp(6))")
    mm.close()  # ... and dies: its lock goes with the connection
    with running_proxy(cluster, tmp_path / "second.log") as second:
        def kick(p: ProxyProcess) -> None:
            conn = p.connect(KEYSPACE)
            with conn.cursor() as c:
                c.execute("set transaction_mode = 'twopc'")
            conn.close()

        threads = [threading.Thread(target=kick, args=(p,)) for p in (proxy, second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wait_until(lambda: nothing_prepared(cluster), 10, "both resolvers to finish")
        assert balances(proxy, a_commit, a_abort) == [7, 0]
        wait_until(lambda: (decided.encode(), b"COMMIT") not in records(cluster), 5, "the COMMIT record cleared")
        assert (undecided.encode(), b"ROLLBACK") in records(cluster)


def test_show_unresolved_transactions_and_transaction_status(
    cluster: LocalCluster, accounts, tmp_path: Path
) -> None:
    a, b = accounts
    with running_proxy(cluster, tmp_path / "slow.log", fault="after_decision=pause:2") as p:
        committer = p.connect(KEYSPACE)
        done = threading.Event()

        def commit() -> None:
            try:
                transfer(committer, a, b, 5, "twopc")
            finally:
                done.set()

        t = threading.Thread(target=commit)
        t.start()
        time.sleep(1.0)  # the commit is paused after its decision
        conn = p.connect(KEYSPACE)
        try:
            with conn.cursor() as c:
                c.execute("show unresolved transactions")
                assert [d[0] for d in c.description] == ["id", "state", "record_time", "participants"]
                rows = c.fetchall()
                assert len(rows) == 1
                dtid, state, record_time, participants = rows[0]
                assert dtid.startswith(f"{KEYSPACE}:-80:") and state == "COMMIT" and record_time
                assert participants == f"{KEYSPACE}:80-"
                c.execute(f"show unresolved transactions for {KEYSPACE}")
                assert len(c.fetchall()) == 1
                c.execute(f"show transaction status for '{dtid}'")
                assert c.fetchall() == ((dtid, "COMMIT", record_time, participants),)
                t.join()
                assert done.is_set()
                c.execute("show unresolved transactions")
                assert c.fetchall() == ()
        finally:
            conn.close()
            committer.close()
    assert balances_via(cluster, a, b) == [95, 105]


def balances_via(cluster: LocalCluster, a: int, b: int) -> list[int]:
    return [
        int(query_shard(cluster, s, f"select balance from account where id = {i}")[0][0])
        for s, i in (("-80", a), ("80-", b))
    ]


async def test_shard_down_during_commit_is_finished_when_back(
    cluster: LocalCluster, accounts, tmp_path: Path
) -> None:
    """The decision is COMMIT, then the other participant's mariadbd is killed before its
    XA COMMIT: the client gets OK; the branch survives the crash and is committed when the
    shard is back."""
    import asyncio

    a, b = accounts
    with running_proxy(cluster, tmp_path / "proxy.log", fault="after_decision=pause:1.5") as p:
        conn = p.connect(KEYSPACE)
        commit = asyncio.ensure_future(asyncio.to_thread(transfer, conn, a, b, 50, "twopc"))
        await asyncio.sleep(0.8)
        await cluster.stop_shard(KEYSPACE, "80-", kill=True)
        await commit  # OK: the decision was recorded before the crash
        conn.close()
        assert query_shard(cluster, "-80", f"select balance from account where id = {a}") == [(50,)]
        await cluster.start_shard(KEYSPACE, "80-")
        await asyncio.to_thread(wait_until, lambda: nothing_prepared(cluster), 15, "the branch committed after restart")
    assert balances_via(cluster, a, b) == [50, 150]


# -- the cluster file ----------------------------------------------------------------------------


def test_cluster_file_sets_the_default_transaction_mode(tmp_path: Path) -> None:
    from proxy.config import ConfigError, load_config

    (tmp_path / "vs.json").write_text('{"sharded": false, "tables": {}}')

    def cluster(extra: str) -> Path:
        path = tmp_path / "cluster.yaml"
        path.write_text("users: [{user: root, password: ''}]\n"
                        "keyspaces: {ks: {vschema: vs.json, shards: {'0': 'mysql://root@127.0.0.1:3306/ks'}}}\n" + extra)
        return path

    assert load_config(cluster("")).transaction_mode == "multi"
    config = load_config(cluster("transaction_mode: TWOPC\ntwopc: {resolver_interval_seconds: 0.5}\n"))
    assert config.transaction_mode == "twopc" and config.twopc.resolver_interval_seconds == 0.5
    with pytest.raises(ConfigError, match="transaction_mode"):
        load_config(cluster("transaction_mode: xa\n"))
    with pytest.raises(ConfigError, match="resolver_interval_seconds"):
        load_config(cluster("twopc: {resolver_interval_seconds: 0}\n"))
