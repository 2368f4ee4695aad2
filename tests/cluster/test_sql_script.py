"""Splitting schema files into statements like the mysql client does."""

from __future__ import annotations

import pytest

from proxy.cluster.sql_script import SqlScriptError, split_sql_statements


def test_statements_are_split_on_semicolons_and_trimmed() -> None:
    script = "CREATE TABLE a (x int);\n\n  INSERT INTO a VALUES (1) ;SELECT 1"
    assert split_sql_statements(script) == [
        "CREATE TABLE a (x int)",
        "INSERT INTO a VALUES (1)",
        "SELECT 1",
    ]


def test_semicolon_inside_single_double_and_backtick_quotes_does_not_split() -> None:
    script = """INSERT INTO t VALUES ('a;b', "c;d");CREATE TABLE `we;ird` (x int);"""
    assert split_sql_statements(script) == [
        """INSERT INTO t VALUES ('a;b', "c;d")""",
        "CREATE TABLE `we;ird` (x int)",
    ]


def test_escaped_and_doubled_quotes_stay_inside_the_string() -> None:
    script = r"INSERT INTO t VALUES ('it\'s; fine', 'O''Brien; too');SELECT 2"
    assert split_sql_statements(script) == [
        r"INSERT INTO t VALUES ('it\'s; fine', 'O''Brien; too')",
        "SELECT 2",
    ]


def test_semicolons_in_comments_do_not_split_and_comment_only_pieces_are_dropped() -> None:
    script = (
        "-- first; table\n"
        "CREATE TABLE a (x int); # trailing; comment\n"
        "/* block; comment */\n"
        "SELECT 1;\n"
        "-- nothing after this;\n"
    )
    assert split_sql_statements(script) == [
        "-- first; table\nCREATE TABLE a (x int)",
        "# trailing; comment\n/* block; comment */\nSELECT 1",
    ]


def test_double_dash_without_space_is_an_operator_not_a_comment() -> None:
    assert split_sql_statements("SELECT 5--1;SELECT 2") == ["SELECT 5--1", "SELECT 2"]


def test_executable_comment_counts_as_a_statement() -> None:
    assert split_sql_statements("/*!40101 SET NAMES utf8mb4 */;") == [
        "/*!40101 SET NAMES utf8mb4 */"
    ]


def test_delimiter_command_allows_semicolons_in_a_trigger_body() -> None:
    script = (
        "CREATE TABLE t (x int);\n"
        "DELIMITER $$\n"
        "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.x = 1; END$$\n"
        "DELIMITER ;\n"
        "SELECT 1;\n"
    )
    assert split_sql_statements(script) == [
        "CREATE TABLE t (x int)",
        "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.x = 1; END",
        "SELECT 1",
    ]


@pytest.mark.parametrize("script", ["SELECT 'open;", "SELECT 1 /* never closed;"])
def test_unterminated_string_or_comment_is_an_error(script: str) -> None:
    with pytest.raises(SqlScriptError):
        split_sql_statements(script)
