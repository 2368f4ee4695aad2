"""Splitting a SQL script (a keyspace's schema file) into statements, as the mysql client does.

A `;` ends a statement only outside quotes ('...', "...", `...`) and comments (`-- `, `#`,
`/* */`). Backslash escapes inside quoted strings are honoured, as is the client's
`DELIMITER xx` command for scripts defining triggers or procedures. Executable comments
(`/*! ... */`, `/*M! ... */`) are statement text; statements made only of comments are dropped.
"""

from __future__ import annotations

import re

from sqltext.lexer import quoted_end

_DELIMITER_COMMAND = re.compile(r"[ \t]*delimiter[ \t]+(\S+)[ \t]*(?:\r?\n|$)", re.IGNORECASE)


class SqlScriptError(ValueError):
    """The script ends inside a quoted string or a block comment."""


def split_sql_statements(script: str) -> list[str]:
    statements: list[str] = []
    delimiter = ";"
    start = 0  # start of the current statement's text
    has_code = False  # the current statement has something besides comments and blanks
    i = 0
    n = len(script)
    while i < n:
        # The DELIMITER command is only recognised at the start of a statement's line.
        if not has_code and (i == 0 or script[i - 1] == "\n"):
            match = _DELIMITER_COMMAND.match(script, i)
            if match:
                delimiter = match.group(1)
                i = match.end()
                start = i
                continue
        ch = script[i]
        if script.startswith(delimiter, i):
            if has_code:
                statements.append(script[start:i].strip())
            i += len(delimiter)
            start = i
            has_code = False
            continue
        if ch in ("'", '"', "`"):
            i = _skip_quoted(script, i)
            has_code = True
            continue
        if ch == "#" or (script.startswith("--", i) and (i + 2 >= n or script[i + 2] in " \t\r\n")):
            end = script.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if script.startswith("/*", i):
            end = script.find("*/", i + 2)
            if end < 0:
                raise SqlScriptError(f"unterminated /* comment starting at offset {i}")
            if script.startswith("/*!", i) or script.startswith("/*M!", i):
                has_code = True
            i = end + 2
            continue
        if not ch.isspace():
            has_code = True
        i += 1
    if has_code:
        statements.append(script[start:].strip())
    return statements


def _skip_quoted(script: str, i: int) -> int:
    """Index just past the quoted string/identifier opening at `i`."""
    end = quoted_end(script, i)
    if end < 0:
        raise SqlScriptError(f"unterminated {script[i]} quote starting at offset {i}")
    return end
