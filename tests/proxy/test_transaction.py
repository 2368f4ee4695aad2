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
