"""Recognising enqueue INSERTs and ack UPDATEs the front end reports to the service."""

from __future__ import annotations

from proxy.messaging.dml import MessageDml, message_dml


def test_insert_names_its_table():
    assert message_dml("INSERT INTO customer_events (id) VALUES (1)") == MessageDml("insert", None, "customer_events")


def test_qualified_and_quoted_insert_names_keyspace_and_table():
    assert message_dml("insert ignore into `commerce`.`customer_events` values (1)") == MessageDml(
        "insert", "commerce", "customer_events"
    )


def test_ack_by_id_list_names_ids():
    dml = message_dml("update t set time_acked = 123, time_next = null where id in (1, 4) and time_acked is null")
    assert dml == MessageDml("ack", None, "t", (1, 4))
    assert message_dml("UPDATE t SET time_acked = 1 WHERE id IN ( -3 ,5,007 )") == MessageDml("ack", None, "t", (-3, 5, 7))


def test_ack_by_single_id_and_string_ids():
    assert message_dml("UPDATE ks.t SET time_acked=1 WHERE id = 'a-1'") == MessageDml("ack", "ks", "t", ("a-1",))


def test_update_not_setting_time_acked_is_not_an_ack():
    assert message_dml("update t set priority = 1 where id in (1) and time_acked is null") is None


def test_ack_without_id_condition_is_not_reported():
    assert message_dml("update t set time_acked = 1 where tenant_id = 3") is None


def test_select_is_ignored():
    assert message_dml("select * from t") is None


def test_ack_with_or_in_where_is_parsed_fully():
    dml = message_dml("update t set time_acked = 1 where id in (1, 2) or tenant_id = 3")
    assert dml == MessageDml("ack", None, "t", (1, 2))


def test_fast_and_parsed_acks_agree():
    text = "UPDATE `ks`.`t` SET time_acked = 5, time_next = NULL WHERE id IN (7, 'x') AND time_acked IS NULL"
    assert message_dml(text) == MessageDml("ack", "ks", "t", (7, "x"))
