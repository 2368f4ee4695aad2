"""User-defined variables (``@v``) of a session, kept by the proxy as Vitess's vtgate
keeps them: ``SET @v = ...`` stores the value in the session, and a statement reading
``@v`` is sent with the value written in its place (so the shards, whose connections
are pooled and shared, never need the variable, and the plan cache sees a literal).

Assigning a user variable inside another statement (``SELECT @v := x``, ``SELECT ...
INTO @v``) would set it on one pooled shard connection, where the session never reads
it back: refused (1235) by name instead of a wrong answer later."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from proxy.errors import UnsupportedError
from sqltext.lexer import masked_code
from sqltext.quoting import quote_identifier, sql_literal

# @name not part of @@name or of 'user'@'host' / user@host (a quote or a word character before)
_VAR = re.compile(r"(?<![@\w'\"`])@([A-Za-z0-9_$.]+)")
_ASSIGN = re.compile(r"\s*:=")
_INTO = re.compile(r"\binto\s+(?:@[A-Za-z0-9_$.]+\s*,\s*)*$", re.I)


_INTO_VARS = re.compile(
    r"\binto\s+(?P<vars>@[A-Za-z0-9_$.]+(?:\s*,\s*@[A-Za-z0-9_$.]+)*)\s*(?=from\b|where\b|for\b|lock\b|;|$)",
    re.I)


def split_into_variables(sql: str) -> tuple[str, list[str]] | None:
    """``SELECT ... INTO @a, @b ...`` -> (the SELECT without its INTO clause, [a, b]);
    None for any other statement."""
    if "@" not in sql:
        return None
    code = masked_code(sql).rstrip()
    m = _INTO_VARS.search(code)
    if m is None:
        return None
    names = [v.strip()[1:] for v in m.group("vars").split(",")]
    return sql[:m.start()] + " " + sql[m.end():], names


_ITEM_END = re.compile(r"\s*(?:,|\bfrom\b|\binto\b|\blimit\b|\bunion\b|\bwhere\b|\border\b|;|$)", re.I)
_ITEM_START = re.compile(r"(?:\bselect(?:\s+(?:all|distinct))?|,)\s*$", re.I)
_CLAUSE = re.compile(r"\b(?:from|where|group|order|having|limit|set|values|into|on|using)\b", re.I)
_SELECT = re.compile(r"\bselect\b", re.I)


def is_select_item(code: str, m: re.Match[str]) -> bool:
    """Whether the variable is a whole item of the outermost select list, unaliased."""
    head = code[:m.start()]
    if not _ITEM_START.search(head) or not _ITEM_END.match(code, m.end()):
        return False
    if head.count("(") != head.count(")"):
        return False
    selects = list(_SELECT.finditer(head))
    return bool(selects) and _CLAUSE.search(head, selects[-1].end()) is None


def with_user_variables(sql: str, values: dict[str, Any]) -> str:
    """``sql`` with each user variable read replaced by its value's literal (NULL when
    never set); raises UnsupportedError for an assignment inside the statement."""
    if "@" not in sql:  # the common case, checked first: this runs for every statement
        return sql
    code = masked_code(sql)
    found = list(_VAR.finditer(code))
    if not found:
        return sql
    lowered = {k.lower(): v for k, v in values.items()}
    out: list[str] = []
    at = 0
    for m in found:
        if _ASSIGN.match(code, m.end()):
            raise UnsupportedError("user variable assignment (:=) inside a statement is not supported "
                                   "through the proxy; use SET")
        if _INTO.search(code, 0, m.start()):
            raise UnsupportedError("SELECT ... INTO user variables is not supported through the proxy")
        out.append(sql[at:m.start()])
        value = lowered.get(m.group(1).lower())
        literal = sql_literal(value)
        # a bare number in ORDER BY / GROUP BY would be a column position: (n) is a value
        out.append(f"({literal})" if isinstance(value, int | float | Decimal) else literal)
        if is_select_item(code, m):  # MySQL names the column by the client's text: @v
            out.append(" AS " + quote_identifier(sql[m.start():m.end()]))
        at = m.end()
    out.append(sql[at:])
    return "".join(out)


__all__ = ["is_select_item", "split_into_variables", "with_user_variables"]
