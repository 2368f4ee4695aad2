"""The issue's read and publish forms through the clients users have: mysqlclient (binary
payloads that are not UTF-8), mysql-connector (prepared statements, the id a parameter),
PyMySQL (the natural shapes: ``SELECT *``, ``COUNT(*)``, ``BETWEEN``, the newest by
``ORDER BY message_id DESC LIMIT 1``) and the ``mariadb --quick`` command line."""

from __future__ import annotations

import asyncio
import shutil

import pymysql
import pytest

from tests.topics.conftest import eventually, read_all, run

# Bytes that are no UTF-8 text: a client sends them as they are (mysqlclient: _binary'...').
BINARY = [b"\x00\xff\xfe", b"\x80\x81", b"plain", b"\xc3\x28 broken utf-8"]


async def test_mysqlclient_publishes_bytes_that_are_not_utf8_and_reads_them_back_exactly(topic_proxy, topics):
    MySQLdb = pytest.importorskip("MySQLdb")
    name = await topics.create("commerce")
    conn = MySQLdb.connect(host="127.0.0.1", port=topic_proxy.port, user="root", passwd="", db="commerce",
                           autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute(f"INSERT INTO `{name}` (payload) VALUES (%s)", (BINARY[0],))  # one message: a pass gives its id
        cur.execute(f"INSERT INTO `{name}` (payload) VALUES (%s), (%s), (%s)", tuple(BINARY[1:]))  # ids in the write

        async def all_four() -> bool:
            return len(await read_all(topic_proxy, "commerce", name)) == 4

        await eventually(all_four)
        cur.execute(f"SELECT payload FROM `{name}` WHERE message_id > %s ORDER BY message_id", ("",))
        assert [bytes(r[0]) for r in cur.fetchall()] == BINARY
        cur.execute(f"SELECT COUNT(*) FROM `{name}` WHERE payload = %s", (BINARY[0],))
        assert cur.fetchall() == ((1,),)
    finally:
        conn.close()


async def test_mysql_connector_prepared_statements_read_by_id_and_time_and_publish(topic_proxy, topics):
    connector = pytest.importorskip("mysql.connector")
    name = await topics.create("commerce")
    await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES ('a'), ('b'), ('c')")
    rows = await read_all(topic_proxy, "commerce", name)
    ids = [r[0] for r in rows]
    conn = connector.connect(host="127.0.0.1", port=topic_proxy.port, user="root", password="", database="commerce",
                             autocommit=True)
    try:
        cur = conn.cursor(prepared=True)
        sql = f"SELECT message_id, publish_time, payload FROM `{name}` WHERE message_id > %s ORDER BY message_id LIMIT %s"
        cur.execute(sql, (ids[0], 10))
        assert [bytes(r[2]) for r in cur.fetchall()] == [b"b", b"c"]
        cur.execute(f"SELECT payload FROM `{name}` WHERE message_id >= %s ORDER BY message_id LIMIT 1", (ids[1],))
        assert [bytes(r[0]) for r in cur.fetchall()] == [b"b"]
        cur.execute(f"SELECT message_id FROM `{name}` WHERE publish_time >= %s ORDER BY message_id", (rows[0][1],))
        assert [r[0] for r in cur.fetchall()] == ids
        cur.execute(f"INSERT INTO `{name}` (payload) VALUES (%s)", (b"prepared",))
        cur.close()
    finally:
        conn.close()

    async def four() -> bool:
        return len(await read_all(topic_proxy, "commerce", name)) == 4

    await eventually(four)
    assert bytes((await read_all(topic_proxy, "commerce", name))[-1][2]) == b"prepared"


async def test_natural_read_shapes_answer_as_the_log_holds(topic_proxy, topics):
    name = await topics.create("commerce")
    await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES ('a'), ('b'), ('c'), ('d')")
    ids = [r[0] for r in await read_all(topic_proxy, "commerce", name)]
    conn = pymysql.connect(host="127.0.0.1", port=topic_proxy.port, user="root", password="", database="commerce",
                           autocommit=True)
    try:
        with conn.cursor() as cur:
            def q(sql: str) -> list[tuple]:
                cur.execute(sql)
                return list(cur.fetchall())

            star = q(f"SELECT * FROM `{name}`")
            assert [d[0] for d in cur.description] == ["message_id", "publish_time", "payload", "ttl_seconds"]
            assert [r[0] for r in star] == ids
            assert q(f"SELECT COUNT(*) FROM `{name}`") == [(4,)]
            assert [r[0] for r in q(f"SELECT message_id FROM `{name}` WHERE message_id BETWEEN '{ids[1]}' AND"
                                    f" '{ids[2]}' ORDER BY message_id")] == ids[1:3]
            assert q(f"SELECT message_id, payload FROM `{name}` ORDER BY message_id DESC LIMIT 1") == [(ids[3], b"d")]
            assert q(f"SELECT MAX(message_id) FROM commerce.`{name}`") == [(ids[3],)]
            assert [r[0] for r in q(f"SELECT message_id FROM `{name}` WHERE message_id > '{ids[1].upper()}'"
                                    " ORDER BY message_id")] == ids[2:]
    finally:
        conn.close()


async def test_the_mariadb_command_line_reads_a_topic_quick(topic_proxy, topics):
    if shutil.which("mariadb") is None:
        pytest.skip("no mariadb command line")
    name = await topics.create("commerce")
    await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES ('x1'), ('x2'), ('x3')")
    ids = [r[0] for r in await read_all(topic_proxy, "commerce", name)]
    cli = await asyncio.create_subprocess_exec(
        "mariadb", "--quick", "--batch", "--skip-column-names", "-h127.0.0.1", f"-P{topic_proxy.port}", "-uroot",
        "commerce", "-e", f"SELECT message_id, payload FROM `{name}` WHERE message_id > '{ids[0]}'"
                          " ORDER BY message_id LIMIT 10",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(cli.communicate(), 60)
    assert cli.returncode == 0, err
    assert out.decode().splitlines() == [f"{ids[1]}\tx2", f"{ids[2]}\tx3"]
