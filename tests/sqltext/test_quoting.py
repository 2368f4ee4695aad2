"""The one identifier quoter and literal renderer (also behind the Spark source's literals)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from proxy.spark.sql_literals import sql_literal as spark_literal
from sqltext.quoting import (
    TextValueKind,
    double_text,
    escape_string,
    quote_identifier,
    sql_literal,
    text_value_literal,
)


def test_identifiers_are_backquoted_with_backquotes_doubled() -> None:
    assert quote_identifier("a`b") == "`a``b`"


def test_strings_use_mysqls_backslash_escapes() -> None:
    assert sql_literal("it's \\ \0 \n \x1a") == "'it\\'s \\\\ \\0 \\n \\Z'"
    assert escape_string('"') == '\\"'


def test_values_of_each_kind_render_as_mysql_reads_them() -> None:
    assert sql_literal(None) == "NULL"
    assert sql_literal(True) == "1"
    assert sql_literal(Decimal("1.50")) == "1.50"
    assert sql_literal(b"\x00\xff") == "X'00ff'"
    assert sql_literal([1, "a"]) == "1, 'a'"
    assert sql_literal(datetime.timedelta(hours=-1, seconds=1)) == "'-0:59:59.000000'"


def test_an_aware_datetime_is_written_in_utc() -> None:
    paris = datetime.timezone(datetime.timedelta(hours=2))
    assert sql_literal(datetime.datetime(2026, 1, 2, 12, 0, tzinfo=paris)) == "'2026-01-02 10:00:00'"


def test_a_float_mysql_cannot_read_is_refused() -> None:
    for value in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="no literal"):
            sql_literal(value)


def test_the_spark_source_renders_through_the_same_renderer_json_for_documents() -> None:
    assert spark_literal("it's\n") == sql_literal("it's\n")
    assert spark_literal({"a": [1]}) == sql_literal('{"a": [1]}')


def test_text_protocol_values_render_by_their_columns_kind() -> None:
    assert text_value_literal(None, TextValueKind.STRING) == "NULL"
    assert text_value_literal(b"-12.50", TextValueKind.NUMBER) == "-12.50"
    assert text_value_literal(b"it's\n", TextValueKind.STRING) == "'it\\'s\\n'"
    assert text_value_literal("é".encode(), TextValueKind.STRING) == "'é'"
    assert text_value_literal(b"\x00\xff", TextValueKind.BYTES) == "X'00ff'"
    assert text_value_literal(b"", TextValueKind.BYTES) == "''"



@pytest.mark.parametrize(("value", "text"), [
    # each as MariaDB 10.11 sends SELECT <value> (a DOUBLE result)
    (1e14, "100000000000000"), (1e15, "1e15"), (1.5e15, "1.5e15"), (1e16, "1e16"),
    (123456789012345678e0, "1.2345678901234568e17"), (1.2345678901234567e15, "1234567890123456.8"),
    (1e-5, "0.00001"), (1e-15, "0.000000000000001"), (1.5e-20, "1.5e-20"), (1.23456789e-7, "0.000000123456789"),
    (1.5e-100, "1.5e-100"), (1e100, "1e100"), (1.7976931348623157e308, "1.7976931348623157e308"),
    (0.1 + 0.2, "0.30000000000000004"), (-1.5e-9, "-0.0000000015"), (-2250.0, "-2250"), (0.125, "0.125"),
])
def test_a_double_reads_as_mariadb_prints_it(value, text):
    assert double_text(value) == text


def test_a_float_renders_as_a_double_literal() -> None:
    # MySQL types '1.5' DECIMAL and '1.5e0' DOUBLE: a DOUBLE parameter keeps its type
    assert sql_literal(1.5) == "1.5e0"
    assert sql_literal(-3.0) == "-3.0e0"
    assert sql_literal(1e20) == "1e+20"
