"""The quote-aware lexer over raw SQL text: where a quoted string or identifier ends, where a
comment ends, and the splits built on them (statements, top-level lists, a parenthesised
head). Quotes follow MySQL's default sql_mode: a backslash escapes the next character in
strings (not in backquoted identifiers) and a doubled quote stands for itself. Kept small and
regex-free on the hot path."""

from __future__ import annotations

import re
from collections.abc import Iterator

QUOTES = "'\"`"


def quoted_end(text: str, i: int) -> int:
    """The index just past the quoted string or identifier opening at ``text[i]``; -1 when
    it is not closed."""
    quote = text[i]
    j = i + 1
    n = len(text)
    while j < n:
        ch = text[j]
        if ch == "\\" and quote != "`":
            j += 2
            continue
        if ch == quote:
            if j + 1 < n and text[j + 1] == quote:  # a doubled quote stands for itself
                j += 2
                continue
            return j + 1
        j += 1
    return -1


def comment_end(text: str, i: int) -> int | None:
    """The index just past the comment starting at ``text[i]`` (``-- ``, ``#`` to the end of
    the line, without the newline; ``/* */``), -1 for an unclosed ``/*``; None when no
    comment starts there."""
    ch = text[i]
    if ch == "#" or (ch == "-" and text.startswith("--", i) and (i + 2 >= len(text) or text[i + 2] in " \t\r\n")):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if ch == "/" and text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return -1 if end < 0 else end + 2
    return None


def code_chars(text: str) -> Iterator[tuple[int, str]]:
    """Each character of ``text`` outside quoted strings, quoted identifiers and comments,
    with its index: what every split below (and the prepared statements' ``?``) reads."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in QUOTES:
            end = quoted_end(text, i)
            i = n if end < 0 else end
            continue
        if c in "-#/":
            past = comment_end(text, i)
            if past is not None:
                i = n if past < 0 else past
                continue
        yield i, c
        i += 1


def split_statements(sql: str) -> list[str]:
    """Split on top-level ``;``, ignoring those in quotes or comments. Empty pieces dropped."""
    if ";" not in sql:
        s = sql.strip()
        return [s] if s else []
    out: list[str] = []
    start = 0
    for i, c in code_chars(sql):
        if c == ";":
            piece = sql[start:i].strip()
            if piece:
                out.append(piece)
            start = i + 1
    piece = sql[start:].strip()
    if piece:
        out.append(piece)
    return out


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses, quotes and comments; parts stripped, a trailing
    empty one dropped."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, c in code_chars(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    if last:
        parts.append(last)
    return parts


def split_parenthesised(text: str) -> tuple[str, str] | None:
    """Split ``(inner) rest`` at the parenthesis matching the first one (quotes and
    comments respected); None when it is unbalanced."""
    depth = 0
    for i, ch in code_chars(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return text[1:i], text[i + 1 :].strip()
    return None


_LEADING_COMMENT = re.compile(r"^(?:\s+|/\*(?!!).*?\*/|--[ \t][^\n]*\n?|#[^\n]*\n?)+", re.S)
_WORD = re.compile(r"[A-Za-z_]+")


def strip_leading_comments(sql: str) -> str:
    m = _LEADING_COMMENT.match(sql)
    return sql[m.end():] if m else sql


def first_keyword(sql: str) -> str:
    """The first word of the statement, lower-cased ('' if none). A query expression may
    open with parentheses (``(SELECT ...) UNION (SELECT ...)``): its word is inside them."""
    text = strip_leading_comments(sql)
    while text.startswith("("):
        text = strip_leading_comments(text[1:])
    m = _WORD.match(text)
    return m.group(0).lower() if m else ""


_VERSION_DIGITS = re.compile(r"\d{5,6}")


def executable_comment_statement(sql: str, version: int) -> str:
    """A statement that opens with MySQL's executable comment ``/*!NNNNN code */`` (what
    mysqldump writes: ``/*!40101 SET NAMES utf8mb4 */;``) as the code MySQL runs: ``code``
    when NNNNN is absent or <= ``version``, else nothing (the comment is ignored). Any
    other statement comes back unchanged. MariaDB's ``/*M!`` is a plain comment to MySQL."""
    text = sql.lstrip()
    if not text.startswith("/*!"):
        return sql
    end = comment_end(text, 0)
    if end is None or end < 0:
        return sql
    body = text[3:end - 2]
    m = _VERSION_DIGITS.match(body)
    if m is not None:
        if int(m.group(0)) > version:
            body = ""
        else:
            body = body[m.end():]
    return body + " " + text[end:]


def masked_code(text: str) -> str:
    """``text`` with quoted strings, quoted identifiers and comments blanked (same length,
    same offsets): for patterns that must only match code."""
    out = [" "] * len(text)
    for i, c in code_chars(text):
        out[i] = c
    return "".join(out)


# A FROM clause (``FROM DUAL`` names no table), and what may open text that is not code.
_FROM_TABLE = re.compile(r"\bfrom\b(?!\s+dual\b)", re.I)
_MAYBE_NOT_CODE = re.compile(r"['\"`#]|/\*|--")


def reads_tables(sql: str) -> bool:
    """Whether ``sql``'s code has a FROM clause (a subquery's too) other than ``FROM DUAL``: what
    MariaDB's "a statement that uses tables" comes to for a SELECT, SET or DO. A FROM before any
    quote or comment is code for sure (0.9 us for a 90-character SELECT, where masking it all
    costs 8 us); after one, the masked code decides (``'rows from x'`` is no FROM, a FROM after
    a newline is)."""
    m = _FROM_TABLE.search(sql)
    if m is None:
        return False
    if _MAYBE_NOT_CODE.search(sql, 0, m.start()) is None:
        return True
    return _FROM_TABLE.search(masked_code(sql)) is not None


_IDENTIFIER = re.compile(r"[A-Za-z0-9_$]+")


def qualified_identifiers(sql: str) -> list[tuple[str | None, str]]:
    """Every identifier of ``sql``'s code (outside strings and comments; backquoted ones
    unquoted), with the qualifier before a dot: ``ks.t`` -> ``("ks", "t")``."""
    words: list[str] = []
    dotted: list[bool] = []  # whether words[i] is followed by a dot
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            end = quoted_end(sql, i)
            i = n if end < 0 else end
            continue
        if c in "-#/":
            past = comment_end(sql, i)
            if past is not None:
                i = n if past < 0 else past
                continue
        if c == "`":
            end = quoted_end(sql, i)
            end = n if end < 0 else end
            words.append(sql[i + 1 : end - 1].replace("``", "`"))
            dotted.append(False)
            i = end
            continue
        m = _IDENTIFIER.match(sql, i)
        if m is not None:
            words.append(m.group())
            dotted.append(False)
            i = m.end()
            continue
        if c == "." and dotted:
            dotted[-1] = True
        i += 1
    out: list[tuple[str | None, str]] = []
    for k, word in enumerate(words):
        if k > 0 and dotted[k - 1]:
            out.append((words[k - 1], word))
        elif not dotted[k]:
            out.append((None, word))
    return out


__all__ = [
    "QUOTES",
    "code_chars",
    "comment_end",
    "executable_comment_statement",
    "first_keyword",
    "masked_code",
    "qualified_identifiers",
    "reads_tables",
    "quoted_end",
    "split_parenthesised",
    "split_statements",
    "split_top_level",
    "strip_leading_comments",
]
