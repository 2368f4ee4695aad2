"""User-defined variables (``@v``) of a session, kept by the proxy as Vitess's vtgate
keeps them: ``SET @v = ...`` stores the value in the session, and a statement reading
``@v`` is sent with the value written in its place (so the shards, whose connections
are pooled and shared, never need the variable, and the plan cache sees a literal).

Assigning a user variable inside another statement (``SELECT @v := x``, ``SELECT ...
INTO @v``) would set it on one pooled shard connection, where the session never reads
it back: refused (1235) by name instead of a wrong answer later."""

from __future__ import annotations

import re
from typing import Any

from proxy.errors import UnsupportedError
from sqltext.lexer import masked_code
from sqltext.quoting import sql_literal

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
        out.append(sql_literal(lowered.get(m.group(1).lower())))
        at = m.end()
    out.append(sql[at:])
    return "".join(out)


__all__ = ["split_into_variables", "with_user_variables"]
