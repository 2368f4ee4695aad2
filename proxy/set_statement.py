"""Parsing of ``SET`` statements into assignments, before (and without) sqlglot.

sqlglot cannot parse several forms clients send (``SET WORKLOAD = OLAP``, the
JDBC driver's ``sql_mode = concat(@@sql_mode, ...)`` with session tracking), so SET
is split lexically: each assignment keeps its raw value text for forwarding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqltext.lexer import split_top_level

_ASSIGN = re.compile(
    r"""^\s*(?:(?P<scope_kw>session|global|local|persist)\s+|@@(?P<scope_at>session|global|local)\.|(?P<at2>@@))?
        (?P<name>@?`?[A-Za-z_][\w.$]*`?)\s*(?::=|=)\s*(?P<value>.+?)\s*$""",
    re.I | re.S | re.X,
)
_TX = re.compile(
    r"^\s*set\s+(?:(?P<scope>session|global|local)\s+)?transaction\s+(?P<rest>.+?)\s*;?\s*$", re.I | re.S
)
_NAMES = re.compile(r"^\s*set\s+(?:names|character\s+set|charset)\s+(?P<rest>.+?)\s*;?\s*$", re.I | re.S)


@dataclass(slots=True)
class Assignment:
    scope: str  # "session" | "global" | "user"
    name: str  # lower-cased, without @ / @@ / scope
    value_sql: str  # raw SQL text of the value

    @property
    def literal(self) -> object:
        """The value as a Python literal, or ``Ellipsis`` if it is an expression."""
        return literal_value(self.value_sql)


@dataclass(slots=True)
class SetStatement:
    assignments: list[Assignment]
    transaction: str | None = None  # e.g. "isolation level read uncommitted" / "read only"
    transaction_scope: str = "next"
    names: str | None = None


def literal_value(text: str) -> object:
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1].replace("\\'", "'").replace("''", "'")
    low = t.lower()
    if low in ("on", "true"):
        return 1
    if low in ("off", "false"):
        return 0
    if low == "null":
        return None
    if re.fullmatch(r"-?\d+", t):
        return int(t)
    if re.fullmatch(r"-?\d+\.\d*", t):
        return float(t)
    if re.fullmatch(r"[A-Za-z_]\w*", t):
        return t  # bare words: SET workload = olap
    return ...


def parse_set(sql: str) -> SetStatement:
    m = _TX.match(sql)
    if m:
        scope = (m.group("scope") or "next").lower()
        return SetStatement([], transaction=" ".join(m.group("rest").lower().split()), transaction_scope=scope)
    m = _NAMES.match(sql)
    if m:
        return SetStatement([], names=m.group("rest"))
    body = re.sub(r"^\s*set\s+", "", sql.strip().rstrip(";"), flags=re.I)
    out: list[Assignment] = []
    for piece in split_top_level(body):
        a = _ASSIGN.match(piece)
        if not a:
            raise ValueError(f"cannot parse assignment: {piece.strip()!r}")
        name = a.group("name").strip("`")
        if name.startswith("@") and not a.group("at2"):
            scope = "user"
            name = name[1:]
        else:
            scope = (a.group("scope_kw") or a.group("scope_at") or "session").lower()
            if scope == "local":
                scope = "session"
        out.append(Assignment(scope=scope, name=name.lower(), value_sql=a.group("value")))
    return SetStatement(out)
