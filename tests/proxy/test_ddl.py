"""DDL on a sharded keyspace reaches every shard of it."""

from __future__ import annotations

import uuid

import pymysql
import pytest


def _tables_on(proxy, shard: str) -> set[str]:
    conn = proxy.connect(f"commerce:{shard}")
    try:
        with conn.cursor() as c:
            c.execute("show tables")
            return {r[0] for r in c.fetchall()}
    finally:
        conn.close()


def test_create_and_drop_table_reach_every_shard(proxy) -> None:
    name = f"ddl_{uuid.uuid4().hex[:6]}"
    conn = proxy.connect("commerce", autocommit=True)
    try:
        with conn.cursor() as c:
            c.execute(f"create table {name} (id bigint primary key)")
        assert all(name in _tables_on(proxy, s) for s in ("-80", "80-"))
        with conn.cursor() as c:
            c.execute(f"drop table commerce.{name}")
        assert not any(name in _tables_on(proxy, s) for s in ("-80", "80-"))
    finally:
        conn.close()


def test_truncate_empties_every_shard(proxy) -> None:
    name = f"ddl_{uuid.uuid4().hex[:6]}"
    conn = proxy.connect("commerce", autocommit=True)
    try:
        with conn.cursor() as c:
            c.execute(f"create table {name} (id bigint primary key)")
            for shard in ("-80", "80-"):
                c.execute(f"use `commerce:{shard}`")
                c.execute(f"insert into {name} values (1), (2)")
            c.execute("use commerce")
            c.execute(f"truncate table {name}")
            for shard in ("-80", "80-"):
                c.execute(f"use `commerce:{shard}`")
                c.execute(f"select count(*) from {name}")
                assert c.fetchone()[0] == 0
            c.execute("use commerce")
            c.execute(f"drop table {name}")
    finally:
        conn.close()


def test_ddl_without_a_keyspace_is_1046(proxy) -> None:
    conn = proxy.connect()
    try:
        with pytest.raises(pymysql.err.MySQLError) as e, conn.cursor() as c:
            c.execute("create table nowhere (id int)")
        assert e.value.args[0] == 1046
    finally:
        conn.close()
