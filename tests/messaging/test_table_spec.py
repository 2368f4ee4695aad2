"""Parsing a message table's comment and columns exactly as Vitess, plus our extra keys."""

from __future__ import annotations

import pytest

from proxy.messaging.errors import MessageTableError
from proxy.messaging.table import is_message_comment, parse_message_table

COLUMNS = ["id", "priority", "epoch", "time_next", "time_acked", "tenant_id", "message"]
BASE = "vitess_message,vt_ack_wait=30,vt_purge_after=120,vt_batch_size=1,vt_cache_size=10,vt_poller_interval=30"


def test_required_parameters_are_read_as_seconds_and_integers():
    spec = parse_message_table("t", BASE.replace("vt_poller_interval=30", "vt_poller_interval=0.5"), COLUMNS)
    assert (spec.ack_wait, spec.purge_after, spec.batch_size, spec.cache_size, spec.poller_interval) == (
        30.0, 120.0, 1, 10, 0.5,
    )  # fmt: skip


@pytest.mark.parametrize("key", ["vt_ack_wait", "vt_purge_after", "vt_batch_size", "vt_cache_size", "vt_poller_interval"])
def test_missing_required_parameter_names_it(key):
    comment = ",".join(p for p in BASE.split(",") if not p.startswith(key + "="))
    with pytest.raises(MessageTableError) as e:
        parse_message_table("t", comment, COLUMNS)
    assert e.value.message == f"attribute {key} not specified for message table"


def test_unparsable_float_gives_go_conversion_error():
    with pytest.raises(MessageTableError) as e:
        parse_message_table("t", BASE.replace("vt_ack_wait=30", "vt_ack_wait=abc"), COLUMNS)
    assert e.value.message == 'strconv.ParseFloat: parsing "abc": invalid syntax'


def test_unparsable_integer_gives_go_conversion_error():
    with pytest.raises(MessageTableError) as e:
        parse_message_table("t", BASE.replace("vt_batch_size=1", "vt_batch_size=1.5"), COLUMNS)
    assert e.value.message == 'strconv.Atoi: parsing "1.5": invalid syntax'


def test_keys_are_not_trimmed():
    with pytest.raises(MessageTableError) as e:
        parse_message_table("t", BASE.replace("vt_ack_wait=30", " vt_ack_wait=30"), COLUMNS)
    assert e.value.message == "attribute vt_ack_wait not specified for message table"


def test_min_backoff_defaults_to_ack_wait_and_max_backoff_to_no_cap():
    spec = parse_message_table("t", BASE, COLUMNS)
    assert (spec.min_backoff, spec.max_backoff) == (30.0, 0.0)


def test_min_and_max_backoff_are_read():
    spec = parse_message_table("t", BASE + ",vt_min_backoff=10,vt_max_backoff=100", COLUMNS)
    assert (spec.min_backoff, spec.max_backoff) == (10.0, 100.0)


def test_unparsable_optional_backoff_is_ignored():
    spec = parse_message_table("t", BASE + ",vt_min_backoff=x,vt_max_backoff=y", COLUMNS)
    assert (spec.min_backoff, spec.max_backoff) == (30.0, 0.0)


@pytest.mark.parametrize("missing", ["id", "priority", "time_next", "epoch", "time_acked"])
def test_missing_required_column_names_column_and_table(missing):
    with pytest.raises(MessageTableError) as e:
        parse_message_table("vitess_message", BASE, [c for c in COLUMNS if c != missing])
    assert e.value.message == f"{missing} missing from message table: vitess_message"


def test_streamed_columns_default_to_all_but_bookkeeping_in_table_order():
    spec = parse_message_table("t", BASE, ["tenant_id", "ID", "Priority", "epoch", "time_next", "time_acked", "message"])
    assert spec.streamed == ("tenant_id", "ID", "message")


def test_time_scheduled_and_time_created_are_ordinary_columns():
    spec = parse_message_table("t", BASE, COLUMNS + ["time_scheduled", "time_created"])
    assert spec.streamed == ("id", "tenant_id", "message", "time_scheduled", "time_created")


def test_message_cols_select_exactly_the_listed_columns_in_order():
    spec = parse_message_table("t", BASE + ",vt_message_cols=id| Message |tenant_id", COLUMNS)
    assert spec.streamed == ("id", "message", "tenant_id")


def test_message_cols_must_begin_with_id():
    with pytest.raises(MessageTableError) as e:
        parse_message_table("test_table", BASE + ",vt_message_cols=message|id", COLUMNS)
    assert e.value.message == "vt_message_cols must begin with id: test_table"


def test_message_cols_naming_an_unknown_column_is_missing():
    with pytest.raises(MessageTableError) as e:
        parse_message_table("test_table", BASE + ",vt_message_cols=id|nope", COLUMNS)
    assert e.value.message == "nope missing from message table: test_table"


def test_empty_message_cols_means_the_default():
    spec = parse_message_table("t", BASE + ",vt_message_cols=", COLUMNS)
    assert spec.streamed == ("id", "tenant_id", "message")


def test_sequence_marker_wins_over_message_marker():
    assert not is_message_comment("vitess_sequence,vitess_message")
    assert is_message_comment("x vitess_message,vt_ack_wait=1")


def test_beyond_vitess_keys_are_read():
    spec = parse_message_table(
        "t", BASE + ",vt_max_rate=50,vt_max_inflight=7,vt_max_attempts=3,vt_ordering_col=Tenant_ID", COLUMNS
    )
    assert (spec.max_rate, spec.max_inflight, spec.max_attempts, spec.ordering_col) == (50.0, 7, 3, "tenant_id")


def test_beyond_vitess_keys_default_to_off():
    spec = parse_message_table("t", BASE, COLUMNS)
    assert (spec.max_rate, spec.max_inflight, spec.max_attempts, spec.ordering_col) == (0.0, 0, 0, None)


def test_ordering_col_must_exist():
    with pytest.raises(MessageTableError) as e:
        parse_message_table("t", BASE + ",vt_ordering_col=customer", COLUMNS)
    assert e.value.message == "customer missing from message table: t"
