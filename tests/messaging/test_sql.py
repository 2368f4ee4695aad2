"""The statements a manager sends (Vitess's ack, postpone and purge, plus our claim and poll)."""

from __future__ import annotations

from proxy.engine.result import BINARY_CHARSET, Field
from proxy.messaging import sql
from proxy.messaging.cache import CachedMessage
from proxy.messaging.table import parse_message_table

COLUMNS = ["id", "priority", "epoch", "time_next", "time_acked", "message"]
COMMENT = "vitess_message,vt_ack_wait=1,vt_purge_after=3,vt_batch_size=2,vt_cache_size=10,vt_poller_interval=1"
INT_FIELD = Field("id", type=8, charset=BINARY_CHARSET)


def spec(extra: str = "", id_field: Field = INT_FIELD):
    fields = {"id": id_field, "message": Field("message", type=252)}
    return parse_message_table("msg", COMMENT + extra, COLUMNS, {**fields, **{c: Field(c, 8) for c in COLUMNS[1:5]}})


def test_ack_sets_time_acked_and_clears_time_next_of_unacked_ids():
    assert sql.ack_sql(spec(), [b"1", b"2"], 123) == (
        "UPDATE `msg` SET time_acked = 123, time_next = NULL WHERE id IN (1, 2) AND time_acked IS NULL"
    )


def test_purge_deletes_acked_rows_before_cutoff_500_at_a_time():
    assert sql.purge_sql(spec(), 99) == "DELETE FROM `msg` WHERE time_acked < 99 LIMIT 500"


def test_postpone_increments_epoch_and_sets_each_rows_next_time():
    assert sql.postpone_sql(spec(), {b"1": 10, b"2": None}) == (
        "UPDATE `msg` SET epoch = epoch + 1, time_next = CASE id WHEN 1 THEN 10 WHEN 2 THEN NULL END"
        " WHERE id IN (1, 2) AND time_acked IS NULL"
    )


def test_poll_reads_due_rows_including_never_sent_null_time_next_in_vitess_order_then_the_next_due_time():
    assert sql.poll_sql(spec(), 5) == (
        "(SELECT 0, priority, time_next, epoch, `id`, `message` FROM `msg` WHERE time_acked IS NULL"
        " AND (time_next <= 5 OR (time_next IS NULL AND epoch = 0)) ORDER BY priority, time_next DESC LIMIT 10)"
        " UNION ALL (SELECT 1, NULL, MIN(time_next), NULL, NULL, NULL FROM `msg` WHERE time_acked IS NULL AND time_next > 5)"
    )


def test_poll_with_ordering_column_reads_only_each_keys_oldest_unacked_message():
    q = sql.poll_sql(spec(",vt_ordering_col=message"), 5)
    assert "NOT EXISTS (SELECT 1 FROM `msg` AS o WHERE o.`message` = `msg`.`message` AND o.time_acked IS NULL AND o.id < `msg`.id)" in q


def test_claim_locks_candidate_rows():
    assert sql.claim_read_sql(spec(), [b"3"]) == (
        "SELECT epoch, time_next, `id`, `message` FROM `msg` WHERE id IN (3) AND time_acked IS NULL FOR UPDATE"
    )


def test_text_ids_are_escaped_strings():
    s = spec(id_field=Field("id", type=253))
    assert "id IN ('it''s', 'a\\\\b')" in sql.ack_sql(s, [b"it's", b"a\\b"], 1).replace("\\'", "''")


def test_binary_ids_are_hex_literals():
    s = spec(id_field=Field("id", type=253, charset=BINARY_CHARSET))
    assert "id IN (X'00ff')" in sql.ack_sql(s, [b"\x00\xff"], 1)


def test_a_claim_names_each_id_as_a_literal_of_its_column_in_every_place():
    ids = [b"7", b"12", b"not-a-number"]  # the last: a value the client wrote, never bare
    batch = [CachedMessage(id=i, priority=0, time_next=None, epoch=n, row=()) for n, i in enumerate(ids)]
    q = sql.conditional_postpone_sql(spec(), batch, {i: 100 + n for n, i in enumerate(ids)}, 5)
    assert q == (
        "UPDATE `msg` SET epoch = epoch + 1, time_next = CASE id WHEN 7 THEN 100 WHEN 12 THEN 101"
        " WHEN 'not-a-number' THEN 102 END WHERE id IN (7, 12, 'not-a-number') AND time_acked IS NULL"
        " AND epoch = CASE id WHEN 7 THEN 0 WHEN 12 THEN 1 WHEN 'not-a-number' THEN 2 END"
        " AND (time_next <= 5 OR (time_next IS NULL AND epoch = 0))"
    )
    assert sql.id_literals(spec(), ids) == [sql.literal(i, INT_FIELD) for i in ids]
    text = spec(id_field=Field("id", type=253))
    assert sql.id_literals(text, ids) == ["'7'", "'12'", "'not-a-number'"]
    # All numbers (checked at once), and one holding a comma: never split into two numbers.
    assert sql.id_literals(spec(), [b"7", b"-12", b"3.5"]) == ["7", "-12", "3.5"]
    assert sql.id_literals(spec(), [b"7", b"1,2"]) == ["7", "'1,2'"]


def test_a_claim_of_messages_at_one_epoch_and_next_time_needs_no_case():
    batch = [CachedMessage(id=i, priority=0, time_next=None, epoch=0, row=()) for i in (b"7", b"12")]
    q = sql.conditional_postpone_sql(spec(), batch, {b"7": 100, b"12": 100}, 5)
    assert q == (
        "UPDATE `msg` SET epoch = epoch + 1, time_next = 100 WHERE id IN (7, 12) AND time_acked IS NULL"
        " AND epoch = 0 AND (time_next <= 5 OR (time_next IS NULL AND epoch = 0))"
    )
