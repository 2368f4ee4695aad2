"""Message ids (CDAP's publish-time + sequence layout) and topic statement parsing (pure)."""

from __future__ import annotations

import pytest

from proxy.errors import ProxyError
from proxy.topics import ids
from proxy.topics.names import place
from proxy.topics.routing import refuse_table_ddl
from proxy.topics.sequencer import TopicInfo
from proxy.topics.statement import (
    StartPosition,
    normalise_properties,
    parse_alter,
    parse_create,
    parse_drop,
    parse_show,
    stream_start,
)


def test_ids_sort_as_text_bytes_and_numbers_alike():
    pairs = [(0, 0), (1, 0), (1, 1), (1, 0xFFFF), (2, 0), (1_795_464_238_546, 7), (1_795_464_238_547, 0)]
    made = [ids.make_id(ms, seq) for ms, seq in pairs]
    assert all(len(i) == ids.ID_LENGTH for i in made)
    assert sorted(made) == made
    assert sorted(i.encode() for i in made) == [i.encode() for i in made]
    assert [ids.parse_id(i) for i in made] == pairs


def test_assign_is_strictly_increasing_and_never_goes_back_with_the_clock():
    got = ids.assign(last_ms=1000, last_seq=4, now_ms=900, count=3)
    assert got == [(1000, 5), (1000, 6), (1000, 7)]
    assert ids.assign(last_ms=1000, last_seq=4, now_ms=1500, count=2) == [(1500, 0), (1500, 1)]


def test_sequence_rolls_over_to_the_next_millisecond_after_65536_messages():
    got = ids.assign(last_ms=0, last_seq=-1, now_ms=10, count=65536 + 3)
    assert got[0] == (10, 0) and got[65535] == (10, 65535)
    assert got[65536:] == [(11, 0), (11, 1), (11, 2)]
    made = [ids.make_id(*p) for p in got]
    assert made == sorted(made) and len(set(made)) == len(made)


def test_a_time_start_is_the_first_id_of_that_millisecond():
    assert StartPosition.at_time(5).condition() == f"message_id >= '{ids.make_id(5, 0)}'"
    assert stream_start("publish_time > 5") == StartPosition.at_time(6)
    assert stream_start("message_id > '000001a20a0215d20001'") == StartPosition("000001a20a0215d20001", False)
    assert stream_start("`message_id` >= '000001A20A0215D20001'").inclusive
    assert stream_start(None) == StartPosition.beginning()
    with pytest.raises(ProxyError) as e:
        stream_start("payload = 'x'")
    assert e.value.code == 1235


def test_create_topic_reads_columns_and_ttl():
    c = parse_create("CREATE TOPIC IF NOT EXISTS commerce.`orders-1` (order_id BIGINT, status VARCHAR(20), KEY (order_id))"
                     " WITH (ttl_seconds = 60, owner = 'team a')")
    assert (c.keyspace, c.name, c.if_not_exists, c.ttl_seconds) == ("commerce", "orders-1", True, 60)
    assert c.user_columns == ["order_id", "status"] and len(c.user_definitions) == 3
    assert c.properties == {"ttl": "60", "owner": "team a"}
    assert parse_create("create topic t").ttl_seconds == 86400  # CDAP's default


@pytest.mark.parametrize("ttl", ["0", "-1", "abc", "1.5", "99999999999"])
def test_an_invalid_ttl_is_refused_with_1231(ttl):
    with pytest.raises(ProxyError) as e:
        parse_create(f"CREATE TOPIC t WITH (ttl_seconds = {ttl})")
    assert e.value.code == 1231
    with pytest.raises(ProxyError):
        normalise_properties({"ttl": ttl})


def test_reserved_column_names_and_bad_topic_names_are_refused():
    with pytest.raises(ProxyError) as e:
        parse_create("CREATE TOPIC t (message_id INT)")
    assert e.value.code == 1060
    for bad in ("`_tms_x`", "`-x`", "`" + "x" * 49 + "`", "`a b`"):
        with pytest.raises(ProxyError):
            parse_create(f"CREATE TOPIC {bad}")


def test_alter_drop_show_statements_parse():
    assert parse_alter("ALTER TOPIC ks.t SET ttl_seconds = 5").changes == {"ttl_seconds": "5"}
    assert parse_alter("alter topic t with (ttl = 7, x = 'y')").changes == {"ttl": "7", "x": "y"}
    d = parse_drop("DROP TOPIC IF EXISTS `t`")
    assert (d.keyspace, d.name, d.if_exists) == (None, "t", True)
    s = parse_show("SHOW TOPICS FROM commerce LIKE 'ord%'")
    assert (s.keyspace, s.like) == ("commerce", "ord%")


def test_topics_spread_over_the_shards_of_a_sharded_keyspace_by_name():
    placed = {place("commerce", ["-80", "80-"], True, f"topic{i}") for i in range(20)}
    assert placed == {"-80", "80-"}
    assert place("lookup", ["0"], False, "anything") == "0"
    assert place("commerce", ["-80", "80-"], True, "orders") == place("commerce", ["-80", "80-"], True, "orders")


def _lookup(keyspace: str | None, name: str) -> TopicInfo | None:
    if (keyspace, name) in (("commerce", "events"), ("lookup", "audit")):
        return TopicInfo(keyspace, name, "-80", 1, 60, {}, [], 0)
    return None


@pytest.mark.parametrize(("sql", "code"), [
    ("RENAME TABLE events TO old_events", 1235),
    ("RENAME TABLE customer TO c2, `events` TO e2", 1235),
    ("RENAME TABLE lookup.audit TO lookup.a2", 1235),
    ("CREATE TRIGGER tr BEFORE INSERT ON events FOR EACH ROW SET @a = 1", 1235),
    ("DROP TABLE IF EXISTS x, events", 1235),
    ("TRUNCATE events", 1235),
    ("CREATE TABLE events (a INT)", 1050),
    ("create or replace view `events` as select 1", 1050),
    ("CREATE TABLE copy LIKE events", 1235),
])
def test_table_ddl_naming_a_topic_is_refused_by_name_wherever_it_stands(sql, code):
    with pytest.raises(ProxyError) as e:
        refuse_table_ddl(sql, sql.split()[0].lower(), "commerce", _lookup)
    assert e.value.code == code and ("events" in e.value.message or "audit" in e.value.message)


@pytest.mark.parametrize("sql", [
    "RENAME TABLE customer TO events_old",
    "CREATE TABLE t (a INT COMMENT 'events') /* events */",
    "ALTER TABLE customer ADD COLUMN events INT",
    "RENAME TABLE audit TO a2",  # commerce has no topic audit
    "DROP TABLE lookup.events",
])
def test_table_ddl_that_names_no_topic_passes(sql):
    refuse_table_ddl(sql, sql.split()[0].lower(), "commerce", _lookup)
