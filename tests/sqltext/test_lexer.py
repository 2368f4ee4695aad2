"""The one quote-aware lexer: every split respects MySQL's quoting (backslash escapes in
strings, doubled quotes, backquoted identifiers) and comments."""

from __future__ import annotations

from sqltext.lexer import (
    comment_end,
    executable_comment_statement,
    first_keyword,
    masked_code,
    quoted_end,
    reads_tables,
    split_parenthesised,
    split_statements,
    split_top_level,
)


def test_a_quoted_string_ends_past_its_escapes_and_doubled_quotes() -> None:
    text = r"'it\'s' 'a''b' `x``y` 'open"
    assert text[: quoted_end(text, 0)] == r"'it\'s'"
    assert text[8 : quoted_end(text, 8)] == "'a''b'"
    assert text[15 : quoted_end(text, 15)] == "`x``y`"
    assert quoted_end(text, 23) == -1


def test_a_backslash_does_not_escape_in_a_backquoted_identifier() -> None:
    text = "`a\\` rest"
    assert text[: quoted_end(text, 0)] == "`a\\`"


def test_comments_end_at_the_line_end_or_their_close() -> None:
    text = "-- x\n# y\n/* z */--not"
    assert comment_end(text, 0) == 4
    assert comment_end(text, 5) == 8
    assert text[9 : comment_end(text, 9)] == "/* z */"
    assert comment_end(text, 16) is None  # "--" needs a blank after it
    assert comment_end("/* open", 0) == -1


def test_statements_split_only_on_semicolons_outside_quotes_and_comments() -> None:
    sql = "select ';'; select `a;b` from t -- c;\n; select 'x\\';' ; /* ; */ select 2;"
    assert split_statements(sql) == [
        "select ';'", "select `a;b` from t -- c;", "select 'x\\';'", "/* ; */ select 2",
    ]


def test_top_level_lists_keep_parentheses_and_quotes_together() -> None:
    assert split_top_level("a, 'b,c', f(d, e), 'it\\'s, x'") == ["a", "'b,c'", "f(d, e)", "'it\\'s, x'"]
    assert split_top_level("a int, /* b, c */ d int") == ["a int", "/* b, c */ d int"]


def test_the_parenthesised_head_ends_at_its_matching_parenthesis_past_escaped_quotes() -> None:
    assert split_parenthesised("(body varchar(9) default 'a\\')', id int) with (x = 1)") == (
        "body varchar(9) default 'a\\')', id int", "with (x = 1)")
    assert split_parenthesised("(a int, b varchar(3)") is None


def test_the_first_keyword_skips_comments() -> None:
    assert first_keyword("/* hint */ -- c\n  SELECT 1") == "select"
    assert first_keyword("/*!40101 set x = 1 */") == ""


def test_the_first_keyword_of_a_parenthesised_query_expression_is_inside_the_parentheses() -> None:
    assert first_keyword("(select id from t limit 2) union (select 1)") == "select"
    assert first_keyword(" ( /* c */ (SELECT 1))") == "select"
    assert first_keyword("(with a as (select 1) select * from a)") == "with"
    assert first_keyword("(") == ""


def test_a_statement_in_an_executable_comment_is_its_code_when_the_version_allows() -> None:
    assert executable_comment_statement("/*!40101 SET NAMES utf8mb4 */", 80031).split() == ["SET", "NAMES", "utf8mb4"]
    assert executable_comment_statement("  /*! SET x = 1 */;", 80031).split() == ["SET", "x", "=", "1", ";"]
    assert executable_comment_statement("/*!99999 SET x = 1 */", 80031).strip() == ""
    assert executable_comment_statement("/*M!100100 SET x = 1 */", 80031) == "/*M!100100 SET x = 1 */"
    assert executable_comment_statement("SELECT /*!40101 1 */", 80031) == "SELECT /*!40101 1 */"


def test_masked_code_blanks_strings_identifiers_and_comments_keeping_offsets() -> None:
    sql = "select '@a', `@b`, @c /* @d */ -- @e"
    masked = masked_code(sql)
    assert len(masked) == len(sql)
    assert "@c" in masked and "@a" not in masked and "@b" not in masked and "@d" not in masked
    assert "@e" not in masked


def test_a_from_clause_is_found_in_code_only_and_from_dual_names_no_table() -> None:
    assert reads_tables("select id from t where id = 1")
    assert reads_tables("select id\nFROM t")
    assert reads_tables("set @a = (select count(*) from t)")
    assert reads_tables("select 'x', (select 1 from t) as y")  # a FROM after a quote
    assert reads_tables("select 1 from dual union select 2 from t")
    assert not reads_tables("select 'rows from t'")
    assert not reads_tables("select 1 /* from t */, 2 -- from t")
    assert not reads_tables("select `from` + 1")
    assert not reads_tables("select 1 from dual")
    assert not reads_tables("select from_days(1), row_count()")
