"""User variables written into statements as their values (proxy/user_variables.py)."""

from __future__ import annotations

import pytest

from proxy.errors import UnsupportedError
from proxy.user_variables import split_into_variables, with_user_variables


def test_a_read_is_written_as_the_value_and_a_select_item_keeps_its_name() -> None:
    assert with_user_variables("SELECT @a, @B", {"A": 1, "b": "x"}) == "SELECT (1) AS `@a`, 'x' AS `@B`"


def test_a_variable_never_set_is_null() -> None:
    assert with_user_variables("select * from t where x = @nope", {}) == "select * from t where x = NULL"


def test_system_variables_strings_and_user_at_host_are_left_alone() -> None:
    for sql in ("SELECT @@version", "SELECT '@a'", "SHOW GRANTS FOR 'root'@'%'", "SELECT `@a` FROM t"):
        assert with_user_variables(sql, {"a": 1, "version": 2}) == sql


def test_a_number_in_order_by_stays_a_value_not_a_position() -> None:
    assert with_user_variables("SELECT x FROM t ORDER BY @a", {"a": 1}) == "SELECT x FROM t ORDER BY (1)"


def test_an_assignment_inside_a_statement_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedError) as e:
        with_user_variables("SELECT @a := 1", {})
    assert e.value.code == 1235 and ":=" in e.value.message


def test_select_into_variables_is_split_into_the_select_and_the_names() -> None:
    sql, names = split_into_variables("SELECT id, name INTO @x, @y FROM t WHERE id = 1")  # type: ignore[misc]
    assert sql.split() == "SELECT id, name FROM t WHERE id = 1".split()
    assert names == ["x", "y"]
    assert split_into_variables("SELECT id FROM t") is None
