"""Table statements that name a topic: those about its definition (``SHOW CREATE TABLE``,
``DESCRIBE``, ``SHOW [FULL] COLUMNS``, ``SHOW INDEX``) answer from the topic's shard, whichever
it is; table DDL naming a topic is refused and changes nothing on any shard; ``STREAM`` of a
topic with a column list is refused rather than answered with other columns."""

from __future__ import annotations

import pymysql
import pytest

from proxy.topics.names import place
from tests.topics.conftest import (
    blocking_connect,
    blocking_run,
    eventually,
    read_all,
    run,
    shard_conn,
)

SHARDS = ["-80", "80-"]


def _sql(p, statement: str, db: str = "commerce") -> tuple:
    return blocking_run(p, db, statement)


def _error(p, statement: str) -> tuple[int, str]:
    with pytest.raises(pymysql.err.MySQLError) as e:
        _sql(p, statement)
    return int(e.value.args[0]), str(e.value.args[1])


async def _topic_on_each_shard(topics) -> dict[str, str]:
    """shard -> a topic placed there (names tried in order: placement is md5 of the name)."""
    on: dict[str, str] = {}
    for i in range(64):
        shard = place("commerce", SHARDS, True, topics.prefix + f"_{i}")
        if shard not in on:
            on[shard] = await topics.create("commerce", f"_{i}")
        if len(on) == len(SHARDS):
            return on
    raise AssertionError("no name placed on every shard")


async def test_show_create_describe_and_columns_of_a_topic_answer_from_its_shard(topic_proxy, topics):
    on = await _topic_on_each_shard(topics)
    for name in on.values():
        created = _sql(topic_proxy, f"SHOW CREATE TABLE `{name}`")
        assert created[0][0] == name and f"VIEW `{name}`" in created[0][1]
        assert _sql(topic_proxy, f"SHOW CREATE TABLE commerce.`{name}`")[0][0] == name
        view_columns = ["message_id", "publish_time", "payload", "ttl_seconds"]
        assert [r[0] for r in _sql(topic_proxy, f"DESCRIBE `{name}`")] == view_columns
        assert [r[0] for r in _sql(topic_proxy, f"SHOW COLUMNS FROM `{name}` LIKE 'pay%'")] == ["payload"]
        assert [r[0] for r in _sql(topic_proxy, f"SHOW FULL COLUMNS FROM `{name}` FROM commerce")] == view_columns
        assert _sql(topic_proxy, f"SHOW INDEX FROM `{name}`") == ()
    # A table of the keyspace is still asked about on its first shard.
    assert _sql(topic_proxy, "SHOW CREATE TABLE customer")[0][0] == "customer"


async def test_sqlalchemy_reflects_a_topic_of_either_shard_and_publishes_and_reads_through_it(topic_proxy, topics):
    sa = pytest.importorskip("sqlalchemy")
    on = await _topic_on_each_shard(topics)
    engine = sa.create_engine(f"mysql+pymysql://root@127.0.0.1:{topic_proxy.port}/commerce")
    try:
        for name in on.values():
            with engine.begin() as conn:
                table = sa.Table(name, sa.MetaData(), autoload_with=conn)
                assert [c.name for c in table.columns] == ["message_id", "publish_time", "payload", "ttl_seconds"]
                assert sa.inspect(conn).has_table(name)
                conn.execute(table.insert(), [{"payload": b"one"}, {"payload": b"two"}])
            with engine.connect() as conn:
                rows = conn.execute(sa.select(table.c.message_id, table.c.payload)
                                    .where(table.c.message_id > "").order_by(table.c.message_id)).fetchall()
            assert [r.payload for r in rows] == [b"one", b"two"]
    finally:
        engine.dispose()


@pytest.mark.parametrize("template", [
    "RENAME TABLE `{t}` TO `{t}_renamed`",
    "ALTER TABLE `{t}` ADD COLUMN extra INT",
    "ALTER TABLE commerce.`{t}` RENAME TO `{t}_renamed`",
    "TRUNCATE TABLE `{t}`",
    "DROP TABLE `{t}`",
    "DROP TABLE IF EXISTS customer_missing, `{t}`",
    "DROP VIEW IF EXISTS `{t}`",
    "CREATE TABLE `{t}_copy` AS SELECT * FROM `{t}`",
    "CREATE INDEX by_payload ON `{t}` (payload(10))",
    "CREATE OR REPLACE VIEW `{t}_v` AS SELECT payload FROM `{t}`",
])
async def test_table_ddl_naming_a_topic_is_refused_and_changes_no_shard(topic_proxy, topics, template):
    on = await _topic_on_each_shard(topics)
    for name in on.values():
        await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES ('kept')")

        async def visible(name: str = name) -> bool:  # a one-row publish is visible at its pass, not at its OK
            return len(await read_all(topic_proxy, "commerce", name)) == 1

        await eventually(visible, what="the message's pass")
        code, message = _error(topic_proxy, template.format(t=name))
        assert code == 1235 and name in message and "TOPIC" in message
        # The topic is whole on its shard: readable, publishable, listed; no shard got a copy.
        assert [bytes(r[2]) for r in await read_all(topic_proxy, "commerce", name)] == [b"kept"]
        shown = _sql(topic_proxy, f"SHOW TOPICS FROM commerce LIKE '{name}'")
        assert [(r[1], r[2]) for r in shown] == [(name, place("commerce", SHARDS, True, name))]
        for shard in SHARDS:
            tables = {r[0] for r in _sql(topic_proxy, "SHOW TABLES", db=f"commerce:{shard}")}
            assert not {f"{name}_renamed", f"{name}_copy", f"{name}_v"} & tables


async def test_create_table_with_a_topics_name_is_1050_and_ddl_only_mentioning_it_in_text_runs(topic_proxy, topics):
    on = await _topic_on_each_shard(topics)
    for name in on.values():
        code, message = _error(topic_proxy, f"CREATE TABLE `{name}` (a INT)")
        assert code == 1050 and name in message
        # The name in a comment or a string is no reference to the topic.
        _sql(topic_proxy, f"CREATE TABLE tbl_ddl_probe (a INT COMMENT '{name}') /* {name} */")
        try:
            assert "tbl_ddl_probe" in {r[0] for r in _sql(topic_proxy, "SHOW TABLES")}
        finally:
            _sql(topic_proxy, "DROP TABLE tbl_ddl_probe")


async def test_a_shard_targeted_session_keeps_its_ddl(topic_proxy, topics):
    """A session on one shard sees (and changes) the shard as it is: no topic refusal there."""
    on = await _topic_on_each_shard(topics)
    name = on["-80"]
    _sql(topic_proxy, f"CREATE TABLE `{name}_side` (a INT)", db="commerce:80-")
    try:
        assert f"{name}_side" in {r[0] for r in _sql(topic_proxy, "SHOW TABLES", db="commerce:80-")}
    finally:
        _sql(topic_proxy, f"DROP TABLE `{name}_side`", db="commerce:80-")


async def test_stream_of_a_topic_with_a_column_list_is_refused(topic_proxy, topics):
    name = await topics.create("commerce")
    conn = pymysql.connect(host="127.0.0.1", port=topic_proxy.port, user="root", password="", database="commerce",
                           autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SET WORKLOAD = OLAP")
            with pytest.raises(pymysql.err.MySQLError) as e:
                cur.execute(f"STREAM message_id, payload FROM `{name}`")
            assert e.value.args[0] == 1235 and "STREAM *" in e.value.args[1]
    finally:
        conn.close()


async def test_a_publish_whose_log_table_is_gone_names_the_topic_and_never_its_log_table(
        topic_proxy, local_cluster, topics) -> None:
    """What a publish racing DROP TOPIC meets (the log table dropped under it), made lasting by
    dropping the log table on the shard: every way a publish goes names the topic, as MariaDB
    names the table a client wrote."""
    topic = await topics.create("commerce")
    shard = await shard_conn(local_cluster, topic_proxy, topic)
    try:
        async with shard.cursor() as cur:
            await cur.execute(f"DROP TABLE `_tms_{topic}`")
    finally:
        shard.close()
    conn = blocking_connect(topic_proxy, "commerce")
    try:
        with conn.cursor() as cur:
            cur.execute("SET @p = 'by variable'")  # "@p" in a statement: the normal path
            for statement in (f"INSERT INTO `{topic}` (payload) VALUES ('one')",  # fast path, deferred
                              f"INSERT INTO `{topic}` (payload) VALUES ('a'), ('b')",  # direct (direct_min_rows 2)
                              f"INSERT INTO `{topic}` (payload) VALUES (@p)"):
                with pytest.raises(pymysql.err.MySQLError) as e:
                    cur.execute(statement)
                code, message = e.value.args
                assert code == 1146 and f"commerce.{topic}'" in message and "_tms_" not in message, (statement, message)
    finally:
        conn.close()
