"""SQL templates and MySQL literal escaping."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from rewriter.sqltemplate import MissingBindVariable, parse_template
from sqltext.quoting import sql_literal


@pytest.mark.parametrize(("value", "text"), [
    (None, "NULL"),
    (5, "5"),
    (-7, "-7"),
    (Decimal("1.50"), "1.50"),
    (True, "1"),
    (0.25, "0.25e0"),  # a DOUBLE literal: "0.25" is a DECIMAL
    ("plain", "'plain'"),
    ("\0'\"\b\n\r\t\x1a\\", "'\\0\\'\\\"\\b\\n\\r\\t\\Z\\\\'"),
    (b"\x00\xffA", "X'00ff41'"),
    ([1, "a", None], "1, 'a', NULL"),
    (datetime.date(2024, 2, 29), "'2024-02-29'"),
])
def test_sql_literal(value, text):
    assert sql_literal(value) == text


def test_template_renders_values_between_text_parts():
    tpl = parse_template("select * from t where a = :v1 and b in (:v2)")
    assert tpl.names == ("v1", "v2")
    assert tpl.render({"v1": "x'y", "v2": [1, 2]}) == "select * from t where a = 'x\\'y' and b in (1, 2)"


def test_colons_inside_quotes_are_text():
    tpl = parse_template("select ':notavar', `a:b` from t where c = :v")
    assert tpl.names == ("v",)
    assert tpl.render({"v": 1}) == "select ':notavar', `a:b` from t where c = 1"


def test_list_marker_is_accepted():
    assert parse_template("x in (::lst)").render({"lst": ["a"]}) == "x in ('a')"


def test_missing_bind_variable_is_reported():
    with pytest.raises(MissingBindVariable):
        parse_template("select :nope").render({})


def test_template_without_variables_is_constant():
    tpl = parse_template("select 1")
    assert tpl.is_constant and tpl.render({}) == "select 1"


def test_escape_string_is_the_body_of_a_quoted_literal():
    from sqltext.quoting import escape_string

    assert escape_string("a'b\\c\n") == "a\\'b\\\\c\\n"


def test_a_bind_variable_inside_a_quoted_alias_renders_the_literals_text() -> None:
    # a column named as the client wrote it, literals included, from a cached plan
    t = parse_template("SELECT CONCAT(a, :vtg1) AS `concat(a, :vtg1)`, b IN (::vtg2) AS `b in (::vtg2)` FROM t")
    assert t.render({"vtg1": "x`y", "vtg2": [1, 2]}) == (
        "SELECT CONCAT(a, 'x`y') AS `concat(a, 'x``y')`, b IN (1, 2) AS `b in (1, 2)` FROM t")
    assert parse_template("SELECT 1 FROM `ks:-80`.t").render({}) == "SELECT 1 FROM `ks:-80`.t"
