"""Transactions spanning several shards: pinned connections, commit and rollback on each."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture(scope="module")
def probe_table(proxy):
    name = f"tx_probe_{uuid.uuid4().hex[:6]}"
    conn = proxy.connect()
    with conn.cursor() as c:
        for shard in ("-80", "80-"):
            c.execute(f"use `commerce:{shard}`")
            c.execute(f"create table {name} (id bigint primary key, v int)")
    conn.close()
    yield name
    conn = proxy.connect()
    with conn.cursor() as c:
        for shard in ("-80", "80-"):
            c.execute(f"use `commerce:{shard}`")
            c.execute(f"drop table {name}")
    conn.close()


def _count(proxy, table: str, shard: str) -> int:
    conn = proxy.connect(f"commerce:{shard}")
    try:
        with conn.cursor() as c:
            c.execute(f"select count(*) from {table}")
            return int(c.fetchone()[0])
    finally:
        conn.close()


def test_rollback_undoes_writes_on_every_shard(proxy, probe_table) -> None:
    conn = proxy.connect()
    try:
        with conn.cursor() as c:
            c.execute("begin")
            c.execute("use `commerce:-80`")
            c.execute(f"insert into {probe_table} values (1, 1)")
            c.execute("use `commerce:80-`")
            c.execute(f"insert into {probe_table} values (2, 2)")
            # not visible from other sessions before commit
            assert _count(proxy, probe_table, "-80") == 0
            c.execute("rollback")
        assert _count(proxy, probe_table, "-80") == 0
        assert _count(proxy, probe_table, "80-") == 0
    finally:
        conn.close()


def test_commit_applies_writes_on_every_shard(proxy, probe_table) -> None:
    conn = proxy.connect()
    try:
        with conn.cursor() as c:
            c.execute("start transaction")
            c.execute("use `commerce:-80`")
            c.execute(f"insert into {probe_table} values (10, 1)")
            c.execute("use `commerce:80-`")
            c.execute(f"insert into {probe_table} values (20, 2)")
            c.execute("commit")
        assert _count(proxy, probe_table, "-80") == 1
        assert _count(proxy, probe_table, "80-") == 1
    finally:
        conn.close()


def test_autocommit_off_holds_writes_until_commit(proxy, probe_table) -> None:
    before = _count(proxy, probe_table, "-80")
    conn = proxy.connect("commerce:-80")
    try:
        conn.autocommit(False)
        with conn.cursor() as c:
            c.execute(f"insert into {probe_table} values (30, 3)")
        assert _count(proxy, probe_table, "-80") == before
        conn.rollback()
        assert _count(proxy, probe_table, "-80") == before
        with conn.cursor() as c:
            c.execute(f"insert into {probe_table} values (31, 3)")
        conn.commit()
        assert _count(proxy, probe_table, "-80") == before + 1
    finally:
        conn.close()


def test_disconnect_mid_transaction_rolls_back(proxy, probe_table) -> None:
    conn = proxy.connect("commerce:80-")
    before = _count(proxy, probe_table, "80-")
    with conn.cursor() as c:
        c.execute("begin")
        c.execute(f"insert into {probe_table} values (40, 4)")
    conn.close()
    assert _count(proxy, probe_table, "80-") == before


def test_first_statement_error_keeps_the_transaction_open(proxy, probe_table) -> None:
    """A transaction's BEGIN travels with its first statement on a shard (one round trip):
    when that statement fails, the transaction is still open there (later writes roll back
    with it) and a syntax error still names line 1."""
    import pymysql

    conn = proxy.connect()
    try:
        with conn.cursor() as c:
            c.execute("use `commerce:-80`")
            c.execute("begin")
            with pytest.raises(pymysql.err.ProgrammingError) as e:
                c.execute(f"selec * from {probe_table}")
            assert e.value.args[0] == 1064 and "at line 1" in e.value.args[1]
            c.execute(f"insert into {probe_table} values (11, 1)")
            with pytest.raises(pymysql.err.IntegrityError):
                c.execute(f"insert into {probe_table} values (11, 2)")
            c.execute(f"insert into {probe_table} values (12, 2)")
            c.execute("rollback")
            c.execute(f"select count(*) from {probe_table} where id in (11, 12)")
            assert c.fetchone()[0] == 0
    finally:
        conn.close()


def test_first_statement_of_a_transaction_reads_rows(proxy, probe_table) -> None:
    """A SELECT carrying the transaction's BEGIN answers its rows as any other."""
    conn = proxy.connect()
    try:
        with conn.cursor() as c:
            c.execute("use `commerce:80-`")
            c.execute(f"insert into {probe_table} values (21, 7), (22, 8)")
            c.execute("begin")
            c.execute(f"select id, v from {probe_table} where id in (21, 22) order by id")
            assert c.fetchall() == ((21, 7), (22, 8))
            c.execute(f"delete from {probe_table} where id in (21, 22)")
            c.execute("commit")
            c.execute(f"select count(*) from {probe_table} where id in (21, 22)")
            assert c.fetchone()[0] == 0
    finally:
        conn.close()
