"""`STREAM * FROM [ks.]t [WHERE ...]` parsing and the subscriber predicate."""

from __future__ import annotations

import pytest

from proxy.engine.result import BINARY_CHARSET, Field
from proxy.errors import ProxyError
from proxy.messaging.statement import compile_predicate, parse_stream

COLUMNS = ["id", "tenant_id", "message"]
FIELDS = [Field("id", 8, BINARY_CHARSET), Field("tenant_id", 8, BINARY_CHARSET), Field("message", 252)]


def matcher(sql: str):
    st = parse_stream(sql)
    assert st.where is not None
    return compile_predicate(st.where, COLUMNS, FIELDS).matches


def test_stream_names_table_and_optional_keyspace():
    st = parse_stream("stream * from commerce.customer_events")
    assert (st.keyspace, st.table, st.where) == ("commerce", "customer_events", None)


def test_stream_accepts_comments_backticks_and_semicolon():
    st = parse_stream("STREAM /* x */ * FROM `vitess_message`;")
    assert (st.keyspace, st.table) == (None, "vitess_message")


def test_stream_without_from_is_a_syntax_error():
    with pytest.raises(ProxyError) as e:
        parse_stream("stream *")
    assert e.value.code == 1064


def test_stream_with_order_by_is_rejected():
    with pytest.raises(ProxyError) as e:
        parse_stream("stream * from t order by id")
    assert e.value.code == 1064


def test_equality_predicate_matches_only_that_tenant():
    m = matcher("stream * from t where tenant_id = 7")
    assert m((b"1", b"7", b"x")) and not m((b"2", b"8", b"x"))


def test_null_column_never_matches_a_comparison():
    assert not matcher("stream * from t where tenant_id <> 7")((b"1", None, b"x"))


def test_in_between_like_and_boolean_logic():
    m = matcher("stream * from t where (tenant_id in (1, 2) or id between 10 and 20) and message like 'he%'")
    assert m((b"1", b"2", b"hello"))
    assert m((b"15", b"9", b"HELP"))
    assert not m((b"15", b"9", b"nope"))
    assert not m((b"3", b"9", b"hello"))


def test_is_null_predicate():
    m = matcher("stream * from t where tenant_id is null")
    assert m((b"1", None, b"x")) and not m((b"1", b"1", b"x"))


def test_unknown_column_in_predicate_is_error_1054():
    st = parse_stream("stream * from t where priority = 1")
    with pytest.raises(ProxyError) as e:
        compile_predicate(st.where, COLUMNS, FIELDS)
    assert (e.value.code, e.value.message) == (1054, "Unknown column 'priority' in 'where clause'")


def test_predicate_sql_is_pushed_down_verbatim():
    st = parse_stream("stream * from t where tenant_id = 7")
    assert compile_predicate(st.where, COLUMNS, FIELDS).sql == "tenant_id = 7"


def test_functions_and_dates_in_a_predicate_are_mysqls():
    """The one evaluator's functions filter a stream: a DATETIME column is compared as a
    date, date functions and string functions answer as MySQL's."""
    columns = ["id", "created", "message"]
    fields = [Field("id", 8, BINARY_CHARSET), Field("created", 12, BINARY_CHARSET), Field("message", 252)]
    st = parse_stream("stream * from t where date(created) >= '2024-2-1' and month(created + interval 1 day) = 3 "
                      "and upper(left(message, 2)) = 'HE'")
    assert st.where is not None
    m = compile_predicate(st.where, columns, fields).matches
    assert m((b"1", b"2024-02-29 10:00:00", b"hello"))
    assert not m((b"2", b"2024-02-28 10:00:00", b"hello"))  # the next day is still February
    assert not m((b"3", b"2024-02-29 10:00:00", b"bye"))
    assert not m((b"4", None, b"hello"))


def test_a_non_deterministic_function_in_a_predicate_is_refused():
    st = parse_stream("stream * from t where id > unix_timestamp()")
    assert st.where is not None
    with pytest.raises(ProxyError) as e:
        compile_predicate(st.where, COLUMNS, FIELDS)
    assert e.value.code == 1235
