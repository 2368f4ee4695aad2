"""KILL QUERY stops a client's statement at the shards and keeps its session; KILL closes
the client's connection and rolls its transaction back."""

from __future__ import annotations

import time
import uuid

import pymysql
import pytest

from tests.proxy.sessions_support import (
    commerce_endpoints,
    one_customer_per_commerce_shard,
    query,
    run_in_thread,
    shard_connection,
    shard_threads_running,
    sleeping_scatter,
    wait_for,
)


def _tag() -> str:
    return f"kill_{uuid.uuid4().hex[:10]}"


def test_kill_query_stops_the_scatter_on_every_shard(proxy, local_cluster) -> None:
    tenant = one_customer_per_commerce_shard(local_cluster)
    tag = _tag()
    victim, killer = proxy.connect("commerce"), proxy.connect("commerce")
    try:
        outcome = run_in_thread(victim, sleeping_scatter(tenant, 30, tag))
        assert wait_for(lambda: all(shard_threads_running(local_cluster, tag).values())), "the scatter never started"
        killed_at = time.monotonic()
        assert query(killer, f"kill query {victim.thread_id()}") == ()
        assert outcome.done.wait(10)
        answered_after = time.monotonic() - killed_at
        assert isinstance(outcome.error, pymysql.err.OperationalError)
        assert outcome.error.args == (1317, "Query execution was interrupted")
        assert answered_after < 5, answered_after  # it sleeps 30 s (the bound was 1 s)
        # No shard runs it any more.
        assert wait_for(lambda: not any(shard_threads_running(local_cluster, tag).values())), (
            shard_threads_running(local_cluster, tag)
        )
        # The victim's session goes on.
        assert query(victim, f"select count(*) from customer where tenant_id = {tenant}") == ((2,),)
    finally:
        victim.close()
        killer.close()


def test_kill_query_inside_a_transaction_keeps_the_transaction(proxy, local_cluster) -> None:
    tenant = one_customer_per_commerce_shard(local_cluster)
    tag = _tag()
    customer_id = 92_000_000 + uuid.uuid4().int % 1_000_000
    victim, killer = proxy.connect("commerce"), proxy.connect("commerce")
    try:
        query(victim, "begin")
        query(victim, f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, 'kept', {tenant})")
        outcome = run_in_thread(victim, sleeping_scatter(tenant, 30, tag))
        assert wait_for(lambda: all(shard_threads_running(local_cluster, tag).values()))
        query(killer, f"kill query {victim.thread_id()}")
        assert outcome.done.wait(10)
        assert isinstance(outcome.error, pymysql.err.OperationalError) and outcome.error.args[0] == 1317
        assert not any(shard_threads_running(local_cluster, tag).values())
        # As in MySQL, KILL QUERY aborted the statement, not the transaction.
        query(victim, "commit")
        assert query(killer, f"select email from customer where customer_id = {customer_id}") == ((b"kept",),)
    finally:
        query(killer, f"delete from customer where customer_id = {customer_id}")
        victim.close()
        killer.close()


def test_kill_closes_the_victims_connection_and_rolls_back_its_transaction(proxy, local_cluster) -> None:
    customer_id = 93_000_000 + uuid.uuid4().int % 1_000_000
    victim, killer = proxy.connect("commerce"), proxy.connect("commerce")
    try:
        query(victim, "begin")
        query(victim, f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, 'gone', 1)")
        victim_id = victim.thread_id()
        assert query(killer, f"kill {victim_id}") == ()
        with pytest.raises(pymysql.err.OperationalError) as e:
            query(victim, "commit")
        assert e.value.args[0] in (2006, 2013)  # the server closed the connection
        assert query(killer, f"select count(*) from customer where customer_id = {customer_id}") == ((0,),)
        # The row lock went with the rollback: a shard takes the same key at once.
        for endpoint in commerce_endpoints(local_cluster):
            direct = shard_connection(endpoint)
            try:
                query(direct, "set innodb_lock_wait_timeout = 1")
                query(direct, f"insert into customer(customer_id, tenant_id) values ({customer_id}, 1)")
                query(direct, f"delete from customer where customer_id = {customer_id}")
            finally:
                direct.close()
        assert wait_for(lambda: all(r[0] != victim_id for r in query(killer, "show processlist")))
    finally:
        victim.close()
        killer.close()


def test_kill_connection_stops_a_running_scatter_too(proxy, local_cluster) -> None:
    tenant = one_customer_per_commerce_shard(local_cluster)
    tag = _tag()
    victim, killer = proxy.connect("commerce"), proxy.connect("commerce")
    try:
        outcome = run_in_thread(victim, sleeping_scatter(tenant, 30, tag))
        assert wait_for(lambda: all(shard_threads_running(local_cluster, tag).values()))
        query(killer, f"kill connection {victim.thread_id()}")
        assert outcome.done.wait(10)
        assert isinstance(outcome.error, pymysql.err.OperationalError)
        assert outcome.error.args[0] in (1317, 2006, 2013)
        assert wait_for(lambda: not any(shard_threads_running(local_cluster, tag).values()))
        with pytest.raises((pymysql.err.OperationalError, pymysql.err.InterfaceError)):
            query(victim, "select 1")  # the connection is gone (the client may know already)
    finally:
        victim.close()
        killer.close()


def test_kill_of_an_unknown_id_is_1094(proxy) -> None:
    conn = proxy.connect()
    try:
        with pytest.raises(pymysql.err.OperationalError) as e:
            query(conn, "kill 4000000000")
        assert e.value.args == (1094, "Unknown thread id: 4000000000")
        with pytest.raises(pymysql.err.OperationalError) as e:
            query(conn, "kill query 999999")
        assert e.value.args == (1094, "Unknown thread id: 999999")
        assert query(conn, "select 1") == ((1,),)
    finally:
        conn.close()


def test_kill_query_of_an_idle_session_leaves_it_working(proxy) -> None:
    idle, killer = proxy.connect("commerce"), proxy.connect("commerce")
    try:
        assert query(killer, f"kill query {idle.thread_id()}") == ()
        assert query(idle, "select 2") == ((2,),)
    finally:
        idle.close()
        killer.close()


def test_kill_of_its_own_connection_drops_it_and_kill_query_of_itself_is_ok(proxy) -> None:
    conn = proxy.connect()
    try:
        assert query(conn, f"kill query {conn.thread_id()}") == ()
        assert query(conn, "select 1") == ((1,),)
        with pytest.raises(pymysql.err.OperationalError) as e:
            query(conn, f"kill {conn.thread_id()}")
        assert e.value.args[0] == 2013
    finally:
        conn.close()
