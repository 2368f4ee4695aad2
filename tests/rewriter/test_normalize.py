"""The normaliser: literals become bind variables, the shape is stable across values."""

from __future__ import annotations

from decimal import Decimal

import pytest

from rewriter.normalize import normalize, normalize_cached


def test_integer_literal_becomes_bind_variable():
    assert normalize("select * from t where id = 42") == ("select * from t where id = :vtg1", {"vtg1": 42})


def test_decimal_literal_keeps_its_scale():
    shape, bv = normalize("select * from t where price = 1.50")
    assert shape == "select * from t where price = :vtg1"
    assert bv == {"vtg1": Decimal("1.50")} and str(bv["vtg1"]) == "1.50"


def test_string_escapes_are_resolved():
    shape, bv = normalize(r"select * from t where a = 'it''s \n\t\\ \' \"q\" \Z \0 \%'")
    assert shape == "select * from t where a = :vtg1"
    assert bv["vtg1"] == "it's \n\t\\ ' \"q\" \x1a \0 \\%"


def test_double_quoted_string_is_a_literal():
    assert normalize('select * from t where a = "x"')[1] == {"vtg1": "x"}


def test_hex_string_literal_becomes_bytes():
    assert normalize("select * from t where b = X'0aff'")[1] == {"vtg1": b"\x0a\xff"}


def test_negative_number_after_operator_is_one_value():
    shape, bv = normalize("select * from t where a = -5 and b - 2 > 0")
    assert shape == "select * from t where a = :vtg1 and b - :vtg2 > :vtg3"
    assert bv == {"vtg1": -5, "vtg2": 2, "vtg3": 0}


def test_in_list_becomes_one_list_bind_variable():
    shape, bv = normalize("select * from t where id in (1, 2, 3)")
    assert shape == "select * from t where id in (::vtg1)"
    assert bv == {"vtg1": [1, 2, 3]}


def test_in_lists_of_different_lengths_share_a_shape():
    assert normalize("select * from t where id in (1)")[0] == normalize("select * from t where id in (4, 5, 6, 7)")[0]


def test_in_subquery_is_not_a_list():
    shape, _ = normalize("select * from t where id in (select id from u where x = 1)")
    assert shape == "select * from t where id in (select id from u where x = :vtg1)"


def test_comments_are_dropped_and_whitespace_folded():
    shape, _ = normalize("select  /* hi */ a\n\tfrom t -- trailing\n where b = 1 # more")
    assert shape == "select a from t where b = :vtg1"


def test_optimizer_hints_and_versioned_comments_are_kept():
    shape, _ = normalize("select /*+ MAX_EXECUTION_TIME(1) */ a from t /*!40001 SQL_NO_CACHE */")
    assert "/*+ MAX_EXECUTION_TIME(1) */" in shape and "/*!40001 SQL_NO_CACHE */" in shape


def test_equal_literals_share_a_bind_variable():
    shape, bv = normalize("select * from t where a = 7 and b = 7 and c = '7'")
    assert shape == "select * from t where a = :vtg1 and b = :vtg1 and c = :vtg2"
    assert bv == {"vtg1": 7, "vtg2": "7"}


def test_order_by_and_group_by_positions_stay_literal():
    shape, bv = normalize("select a, count(*) from t where x = 3 group by 1 order by 2 desc, 1 limit 5")
    assert shape == "select a, count(*) from t where x = :vtg1 group by 1 order by 2 desc, 1 limit :vtg2"
    assert bv == {"vtg1": 3, "vtg2": 5}


def test_type_arguments_stay_literal():
    shape, _ = normalize("select cast(a as decimal(10,2)), convert(b, char(3)) from t")
    assert shape == "select cast(a as decimal(10,2)), convert(b, char(3)) from t"


@pytest.mark.parametrize("sql", [
    "select * from t where d > date '2020-01-01'",
    "select * from t where s = _utf8mb4'x'",
    "select date_add(d, interval 3 day) from t",
    "select * from t where f = 1e3",
    "select * from t where h = 0x1F",
])
def test_syntax_literals_are_kept(sql):
    assert normalize(sql) == (sql, {})


def test_quoted_identifiers_are_not_touched():
    assert normalize("select `1`, `a b` from `t`") == ("select `1`, `a b` from `t`", {})


def test_insert_values_are_normalized():
    shape, bv = normalize("insert into t (a, b) values (1, 'x'), (2, 'y')")
    assert shape == "insert into t (a, b) values (:vtg1, :vtg2), (:vtg3, :vtg4)"
    assert bv == {"vtg1": 1, "vtg2": "x", "vtg3": 2, "vtg4": "y"}


def test_unterminated_string_is_an_error():
    with pytest.raises(ValueError):
        normalize("select 'abc")


@pytest.mark.parametrize("sql", ["select N'abc' from t", "select b'0101' from t"])
def test_prefixed_string_literals_are_kept(sql):
    assert normalize(sql) == (sql, {})


# normalize_cached: the same answers as normalize, whatever the statement's literals.
_TEMPLATES_TO_VARY = [
    "select customer_id, email from customer where customer_id = {a}",
    "insert into customer(customer_id, email, tenant_id) values ({a}, '{s}', {b})",
    "select * from t where a = '{s}' and b = {a} order by {c} limit {b}",
    "select a from t where a = -{a} and b = {a}.5 and c = 1e{c}",
    "select a from t where d > date '2020-01-0{c}' and x in ({a}, {b}) and y = '{s}'",
    "select a + interval {c} day from t where n = '{s}' and m = {a}",
    "select cast(a as decimal({c}, 2)) from t where z = 0x1{c}",
    "select `col {a}` from t where q = _utf8mb4'{s}' and r = N'{s}' and s = {b} /* {a} */ -- {c}",
    "select a from t where a = '{s}' '{s}' and b={a}",
    "select {a}, '{s}', {a}, '{a}' from dual",
    "update t set a = {a} where b = '{s}' and c = {c} for update wait {c}",
    "select a from t group by {c} order by {c} desc",
    "select a from t where b = 'x{s}' and c = \"{s}\" and d = {b}",
    # IN lists (a messaging ack), with scalars equal to their elements, strings, signs, nesting
    "update customer_events set time_acked = {a}, time_next = null where id in ({a}, {b}, {c}) and time_acked is null",
    "select * from t where a in ('{s}', {b}, '{s}') and b = '{s}' and c in ({b})",
    "select * from t where a in ({a}) and b in ({b}, {c}) and c = {c} and d in ({c}, {a})",
    "select * from t where a in (-{a}, {b}) and b in ({c}, {b}.5) and c in ({a}, 0x{b})",
    "select * from t where a in (\"{s}\", '{s}') and b not in ({a},{a})",
    "select * from t where (a, b) in (({a}, {b}), ({c}, {a})) and c in (select {a} from dual)",
    # a number written with a leading zero equals the one without it
    "insert into t (a, b, c) values (0{a}, {a}, 0), ({b}, 00{b}, 00), (0, '0{s}', {c})",
]


@pytest.mark.parametrize("template", _TEMPLATES_TO_VARY)
def test_normalize_cached_answers_as_normalize_for_any_literals(template):
    values = [
        dict(a=a, b=b, c=c, s=s)
        for a in (1, 2, 7, 12345) for b in (1, 2, 10) for c in (1, 2, 3) for s in ("x", "1", "a b", "", "2")
    ]
    for v in values + values:  # the second time through, from the templates kept
        sql = template.format(**v)
        shape, bindvars = normalize_cached(sql)
        assert (shape, bindvars) == normalize(sql), sql
        assert {k: type(x) for k, x in bindvars.items()} == {k: type(x) for k, x in normalize(sql)[1].items()}, sql
        assert {k: [type(e) for e in x] for k, x in bindvars.items() if isinstance(x, list)} == \
            {k: [type(e) for e in x] for k, x in normalize(sql)[1].items() if isinstance(x, list)}, sql


def test_normalize_cached_reports_a_syntax_error_as_normalize_does():
    with pytest.raises(ValueError) as cached:
        normalize_cached("select 'unterminated from t where a = 1")
    with pytest.raises(ValueError) as plain:
        normalize("select 'unterminated from t where a = 1")
    assert str(cached.value) == str(plain.value)


@pytest.mark.parametrize("first, then", [
    # normalize folds a sign into its number: -0 is 0, so the first statement alone cannot tell
    ("select * from t where id = -0 and b = 1e1", "select * from t where id = -5 and b = 1e1"),
    ("select * from t where a = -0 and b = 0", "select * from t where a = -3 and b = 3"),
    # 00 is a bind variable the template's split does not see, equal to the kept GROUP BY 0
    ("select * from t where id = 00 group by 0", "select * from t where id = 00 group by 2"),
    ("select * from t where id = 00 + interval 0 day", "select * from t where id = 00 + interval 2 day"),
])
def test_normalize_cached_is_not_misled_by_a_first_statement_whose_values_coincide(first, then):
    assert normalize_cached(first) == normalize(first)
    assert normalize_cached(then) == normalize(then)


def test_normalize_cached_never_takes_another_statements_template_for_a_nul_in_its_text():
    # the parts around the literals join with NUL: the same joined text from other parts
    first = "select `c \0 d` from t where a = 5 and b = 6"
    then = "select `c 5 d` from t where a = \0 and b = 6"
    assert normalize_cached(first) == normalize(first)
    assert normalize_cached(then) == normalize(then)
