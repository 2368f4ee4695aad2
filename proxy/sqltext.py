"""Lexical helpers over raw SQL text that the front end needs before any parsing:
splitting multi-statement text and reading leading keywords, respecting quotes and
comments. Kept tiny and regex-free on the hot path."""

from __future__ import annotations

import re

_QUOTES = "'\"`"


def split_statements(sql: str) -> list[str]:
    """Split on top-level ``;``, ignoring those in quotes or comments. Empty pieces dropped."""
    if ";" not in sql:
        s = sql.strip()
        return [s] if s else []
    out: list[str] = []
    start = 0
    i = 0
    n = len(sql)
    while i < n:
        c = sql[i]
        if c in _QUOTES:
            i += 1
            while i < n:
                if sql[i] == "\\" and c != "`":
                    i += 2
                    continue
                if sql[i] == c:
                    if i + 1 < n and sql[i + 1] == c:
                        i += 2
                        continue
                    break
                i += 1
        elif c == "-" and sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] in " \t\r\n"):
            j = sql.find("\n", i)
            i = n if j < 0 else j
        elif c == "#":
            j = sql.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 1
        elif c == ";":
            piece = sql[start:i].strip()
            if piece:
                out.append(piece)
            start = i + 1
        i += 1
    piece = sql[start:].strip()
    if piece:
        out.append(piece)
    return out


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses and quotes; parts stripped, a trailing empty one dropped."""
    parts: list[str] = []
    depth, quote, start, i = 0, "", 0, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote != "`":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in _QUOTES:
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
        i += 1
    last = text[start:].strip()
    if last:
        parts.append(last)
    return parts


_LEADING_COMMENT = re.compile(r"^(?:\s+|/\*(?!!).*?\*/|--[ \t][^\n]*\n?|#[^\n]*\n?)+", re.S)
_WORD = re.compile(r"[A-Za-z_]+")


def strip_leading_comments(sql: str) -> str:
    m = _LEADING_COMMENT.match(sql)
    return sql[m.end():] if m else sql


def first_keyword(sql: str) -> str:
    """The first word of the statement, lower-cased ('' if none)."""
    m = _WORD.match(strip_leading_comments(sql))
    return m.group(0).lower() if m else ""


def split_parenthesised(text: str) -> tuple[str, str] | None:
    """Split ``(inner) rest`` at the parenthesis matching the first one (quotes
    respected); None when it is unbalanced."""
    depth, quote = 0, ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in _QUOTES:
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return text[1:i], text[i + 1 :].strip()
    return None
