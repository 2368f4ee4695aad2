"""Topic admin and publishing over SQL: CREATE/ALTER/DROP TOPIC, SHOW TOPICS, placement, user
columns, errors with MySQL codes, append-only, a Python client."""

from __future__ import annotations

import pymysql
import pytest

from proxy.topics.client import TopicClient
from proxy.topics.names import place
from tests.topics.conftest import blocking_run, eventually, read_all

_sql = blocking_run


def _error(p, db: str, statement: str) -> int:
    with pytest.raises(pymysql.err.MySQLError) as e:
        _sql(p, db, statement)
    return int(e.value.args[0])


async def test_create_duplicate_invalid_ttl_show_alter_drop_and_unknown_topic_errors(topic_proxy):
    p = topic_proxy
    _sql(p, "commerce", "DROP TOPIC IF EXISTS adm_orders")
    _sql(p, "commerce", "CREATE TOPIC adm_orders WITH (ttl_seconds = 120, team = 'billing')")
    assert _error(p, "commerce", "CREATE TOPIC adm_orders") == 1050
    _sql(p, "commerce", "CREATE TOPIC IF NOT EXISTS adm_orders")
    assert _error(p, "commerce", "CREATE TOPIC adm_bad WITH (ttl_seconds = 0)") == 1231
    assert _error(p, "commerce", "CREATE TOPIC adm_bad WITH (ttl_seconds = 'soon')") == 1231
    assert _error(p, "commerce", "CREATE TOPIC customer") == 1050  # a vschema table's name
    rows = _sql(p, "commerce", "SHOW TOPICS LIKE 'adm_%'")
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [
        ("commerce", "adm_orders", place("commerce", ["-80", "80-"], True, "adm_orders"), 1, 120)]
    _sql(p, "commerce", "ALTER TOPIC adm_orders SET ttl_seconds = 60")
    assert _sql(p, "commerce", "SHOW TOPICS FROM commerce LIKE 'adm_orders'")[0][4] == 60
    assert _error(p, "commerce", "ALTER TOPIC adm_orders SET ttl_seconds = -1") == 1231
    assert _error(p, "commerce", "ALTER TOPIC adm_nope SET ttl_seconds = 5") == 1051
    _sql(p, "commerce", "DROP TOPIC adm_orders")
    assert _error(p, "commerce", "DROP TOPIC adm_orders") == 1051
    _sql(p, "commerce", "DROP TOPIC IF EXISTS adm_orders")
    assert _sql(p, "commerce", "SHOW TOPICS LIKE 'adm_%'") == ()
    assert _error(p, "commerce", "CREATE TOPIC `_tms_x`") == 1103


async def test_topics_spread_over_shards_and_show_where_they_live(topic_proxy):
    names = [f"adm_spread_{i}" for i in range(6)]
    try:
        for n in names:
            _sql(topic_proxy, "commerce", f"CREATE TOPIC IF NOT EXISTS {n}")
        rows = {r[1]: r[2] for r in _sql(topic_proxy, "commerce", "SHOW TOPICS LIKE 'adm_spread_%'")}
        assert rows == {n: place("commerce", ["-80", "80-"], True, n) for n in names}
        assert set(rows.values()) == {"-80", "80-"}
    finally:
        for n in names:
            _sql(topic_proxy, "commerce", f"DROP TOPIC IF EXISTS {n}")


async def test_user_columns_are_published_and_read_and_topics_are_append_only(topic_proxy, topics):
    name = await topics.create("commerce", spec="(order_id BIGINT, status VARCHAR(20), KEY (order_id)) WITH (ttl_seconds = 600)")
    _sql(topic_proxy, "commerce", f"INSERT INTO commerce.`{name}` (order_id, status, payload) VALUES (7, 'paid', 'p7')")
    _sql(topic_proxy, "lookup", f"INSERT INTO commerce.`{name}` (order_id, status) VALUES (8, 'new')")

    async def two() -> bool:
        return len(await read_all(topic_proxy, "commerce", name)) == 2

    await eventually(two)
    rows = _sql(topic_proxy, "commerce", f"SELECT order_id, status, payload FROM `{name}` ORDER BY message_id")
    assert rows == ((7, "paid", b"p7"), (8, "new", b""))
    assert _sql(topic_proxy, "commerce", f"SELECT COUNT(*) FROM `{name}` WHERE status = 'paid'") == ((1,),)
    fields = _sql(topic_proxy, "commerce", f"SELECT * FROM `{name}` WHERE 1 = 0")
    assert fields == ()
    for bad in (f"UPDATE `{name}` SET status = 'x'", f"DELETE FROM `{name}`", f"REPLACE INTO `{name}` (payload) VALUES ('x')"):
        assert _error(topic_proxy, "commerce", bad) == 1288, bad
    assert _error(topic_proxy, "commerce", f"INSERT INTO `{name}` (message_id, payload) VALUES ('0', 'x')") == 1906
    # publish_time is given with the id: a value for it is refused, never silently replaced
    # (one row: the deferred path; two: a direct publish; the fast path and the normal one alike).
    for bad in (f"INSERT INTO `{name}` (payload, publish_time) VALUES ('x', 5)",
                f"INSERT INTO `{name}` (`publish_time`, payload) VALUES (5, 'x'), (6, 'y')"):
        assert _error(topic_proxy, "commerce", bad) == 1235, bad
    # RETURNING would answer the row before its id (message_id NULL, publish_time 0; with * the
    # log table's columns): refused; the word in a payload is only text.
    for bad in (f"INSERT INTO `{name}` (payload) VALUES ('x') RETURNING message_id, publish_time",
                f"INSERT INTO `{name}` (payload) VALUES ('x'), ('y') RETURNING *",
                f"INSERT INTO `{name}` (payload) SELECT 'x' RETURNING message_id"):
        assert _error(topic_proxy, "commerce", bad) == 1235, bad
    conn = pymysql.connect(host="127.0.0.1", port=topic_proxy.port, user="root", password="", database="commerce")
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            with pytest.raises(pymysql.err.MySQLError) as e:
                cur.execute(f"INSERT INTO `{name}` (payload, publish_time) VALUES ('x', 5), ('y', 6)")
            assert e.value.args[0] == 1235
            cur.execute("COMMIT")
    finally:
        conn.close()
    _sql(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES ('returning 1 row')")

    async def three() -> bool:
        return len(await read_all(topic_proxy, "commerce", name)) == 3

    await eventually(three)
    assert bytes((await read_all(topic_proxy, "commerce", name))[-1][2]) == b"returning 1 row"


async def test_python_client_publishes_polls_and_follows_from_a_saved_position(topic_proxy, topics):
    name = await topics.create("commerce")
    async with TopicClient("127.0.0.1", topic_proxy.port, keyspace="commerce") as client:
        assert await client.publish(name, b"one", "two", b"three") == 3

        async def three() -> bool:
            return len(await client.poll(name)) == 3

        await eventually(three)
        first = await client.poll(name, limit=1)
        assert [m.payload for m in await client.poll(name, after=first[0].id)] == [b"two", b"three"]
        assert [m.payload for m in await client.poll(name, after=first[0].id, inclusive=True)] == [b"one", b"two", b"three"]
        assert [m.payload for m in await client.poll(name, from_time=first[0].publish_time)][0] == b"one"

        follower = client.follow(name)
        got = []
        async for message in follower:
            got.append(message.payload)
            if len(got) == 2:
                break
        saved = follower.position
        await follower.close()
        assert got == [b"one", b"two"] and saved is not None
        await client.publish(name, b"four")
        resumed = client.follow(name, after=saved)
        again = []
        async for message in resumed:
            again.append(message.payload)
            if len(again) == 2:
                break
        await resumed.close()
        assert again == [b"three", b"four"]


async def test_topic_statements_work_in_a_shard_targeted_session(topic_proxy):
    name = "adm_targeted"
    _sql(topic_proxy, "commerce:-80", f"DROP TOPIC IF EXISTS {name}")
    _sql(topic_proxy, "commerce:-80", f"CREATE TOPIC {name} WITH (ttl_seconds = 30)")
    try:
        shard = place("commerce", ["-80", "80-"], True, name)
        rows = _sql(topic_proxy, f"commerce:{shard}", "SHOW TOPICS LIKE 'adm_targeted'")
        assert [(r[1], r[2], r[4]) for r in rows] == [(name, shard, 30)]
        _sql(topic_proxy, f"commerce:{shard}", f"INSERT INTO {name} (payload) VALUES ('targeted')")

        async def visible() -> bool:
            return [bytes(r[2]) for r in await read_all(topic_proxy, "commerce", name)] == [b"targeted"]

        await eventually(visible)
    finally:
        _sql(topic_proxy, "commerce", f"DROP TOPIC IF EXISTS {name}")


async def test_show_tables_lists_every_topic_view_and_none_of_the_tables_behind_them(topic_proxy):
    names = [f"adm_list_{i}" for i in range(4)]
    shards = {n: place("commerce", ["-80", "80-"], True, n) for n in names}
    assert set(shards.values()) == {"-80", "80-"}  # the default shard answers SHOW TABLES: both kinds are needed
    try:
        for n in names:
            _sql(topic_proxy, "commerce", f"CREATE TOPIC IF NOT EXISTS {n}")
        plain = [r[0] for r in _sql(topic_proxy, "commerce", "SHOW TABLES")]
        assert set(names) <= set(plain) and {"customer", "corder"} <= set(plain)
        assert [t for t in plain if t.startswith("_tms_")] == [] and plain == sorted(plain)
        full = dict(_sql(topic_proxy, "commerce", "SHOW FULL TABLES"))
        assert {n: full[n] for n in names} == dict.fromkeys(names, "VIEW") and full["customer"] == "BASE TABLE"
        assert not any(t.startswith("_tms_") for t in full)
        assert [r[0] for r in _sql(topic_proxy, "lookup", "SHOW TABLES FROM commerce LIKE 'adm\\_list\\_%'")] == names
        # SHOW TOPICS reads LIKE as SHOW TABLES does: '\_' is an underscore, '_' any one character
        assert [r[1] for r in _sql(topic_proxy, "lookup", "SHOW TOPICS FROM commerce LIKE 'adm\\_list\\_%'")] == names
        assert [r[1] for r in _sql(topic_proxy, "commerce", "SHOW TOPICS LIKE 'ADM_LIST_3'")] == [names[3]]
        assert _sql(topic_proxy, "commerce", "SHOW TOPICS LIKE 'adm\\_list\\_'") == ()
        assert [r[0] for r in _sql(topic_proxy, "commerce", "SHOW TABLES LIKE 'adm_list_1'")] == ["adm_list_1"]
        # A shard-targeted session sees its shard as it is, log tables included.
        targeted = {r[0] for r in _sql(topic_proxy, "commerce:-80", "SHOW TABLES")}
        assert {n for n, s in shards.items() if s == "-80"} | {"_tms_topics"} <= targeted
        assert {n for n, s in shards.items() if s == "80-"} & targeted == set()
        _sql(topic_proxy, "commerce", f"DROP TOPIC {names[0]}")
        assert names[0] not in {r[0] for r in _sql(topic_proxy, "commerce", "SHOW TABLES")}
    finally:
        for n in names:
            _sql(topic_proxy, "commerce", f"DROP TOPIC IF EXISTS {n}")


async def test_create_topic_never_replaces_a_users_table_or_view_of_that_name(topic_proxy, local_cluster):
    """In an unsharded keyspace a view (or a table the vschema does not list) can have any
    name: CREATE TOPIC of that name is 1050 and leaves it as it was. A view the topic itself
    left behind (a drop cut short after its metadata row changed) is replaced."""
    _sql(topic_proxy, "lookup", "CREATE OR REPLACE VIEW adm_report AS SELECT sku FROM product")
    _sql(topic_proxy, "lookup", "CREATE TABLE IF NOT EXISTS adm_plain (a INT)")
    try:
        before = _sql(topic_proxy, "lookup", "SELECT COUNT(*) FROM adm_report")
        for name in ("adm_report", "adm_plain"):
            assert _error(topic_proxy, "lookup", f"CREATE TOPIC {name}") == 1050, name
        assert _sql(topic_proxy, "lookup", "SELECT COUNT(*) FROM adm_report") == before
        assert dict(_sql(topic_proxy, "lookup", "SHOW FULL TABLES LIKE 'adm\\_%'")) == {
            "adm_plain": "BASE TABLE", "adm_report": "VIEW"}
        assert _sql(topic_proxy, "lookup", "SHOW TOPICS FROM lookup LIKE 'adm\\_%'") == ()
    finally:
        _sql(topic_proxy, "lookup", "DROP VIEW IF EXISTS adm_report")
        _sql(topic_proxy, "lookup", "DROP TABLE IF EXISTS adm_plain")
    name = "adm_left_behind"
    _sql(topic_proxy, "lookup", f"DROP TOPIC IF EXISTS {name}")
    _sql(topic_proxy, "lookup", f"CREATE TOPIC {name}")
    e = local_cluster.endpoints[("lookup", "0")]
    shard = pymysql.connect(host=e.host, port=e.port, user=e.user, password=e.password, database=e.database,
                            autocommit=True)
    try:
        with shard.cursor() as cur:  # the drop's first step only: the view and the log stay
            cur.execute(f"UPDATE _tms_topics SET generation = -generation WHERE name = '{name}'")
    finally:
        shard.close()
    try:
        _sql(topic_proxy, "lookup", f"CREATE TOPIC {name}")
        shown = _sql(topic_proxy, "lookup", f"SHOW TOPICS FROM lookup LIKE '{name}'")
        assert [(r[1], r[3]) for r in shown] == [(name, 2)]
    finally:
        _sql(topic_proxy, "lookup", f"DROP TOPIC IF EXISTS {name}")


async def test_show_topics_lists_every_topic_when_one_view_cannot_be_read(topic_proxy):
    """A topic whose view is gone on its shard (renamed there by a shard-targeted session, or
    dropped since the listing read it) is listed without its times; the others as always."""
    names = ["adm_broken_view", "adm_whole_view"]
    for n in names:
        _sql(topic_proxy, "commerce", f"DROP TOPIC IF EXISTS {n}")
        _sql(topic_proxy, "commerce", f"CREATE TOPIC {n}")
    _sql(topic_proxy, "commerce", f"INSERT INTO {names[1]} (payload) VALUES ('a'), ('b')")
    shard = place("commerce", ["-80", "80-"], True, names[0])
    _sql(topic_proxy, f"commerce:{shard}", f"RENAME TABLE {names[0]} TO adm_broken_aside")
    try:
        rows = {r[1]: r for r in _sql(topic_proxy, "commerce", "SHOW TOPICS LIKE 'adm\\_%\\_view'")}
        assert set(rows) == set(names)
        assert rows[names[0]][7] is None and rows[names[0]][8] is None
        assert rows[names[1]][7] is not None and rows[names[1]][5] == 2
    finally:
        _sql(topic_proxy, f"commerce:{shard}", f"RENAME TABLE adm_broken_aside TO {names[0]}")
        for n in names:
            _sql(topic_proxy, "commerce", f"DROP TOPIC IF EXISTS {n}")
