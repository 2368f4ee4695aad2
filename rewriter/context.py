"""What every planning function needs: the vschema, the session keyspace, the list
bind variables of the normalised query and the source text (for templates that
reuse the client's own SQL text and column names)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from rewriter.sqltemplate import SqlTemplate, parse_template

DIALECT = "mysql"


@dataclass(slots=True)
class PlanContext:
    vschema: Any
    keyspace: str | None
    list_vars: frozenset[str] = frozenset()
    source: str = ""  # the (normalised) statement text, placeholders ``:v``/``::v``
    counter: list[int] = field(default_factory=lambda: [0])

    def new_var(self, prefix: str) -> str:
        self.counter[0] += 1
        return f"{prefix}{self.counter[0]}"

    def expr_text(self, e: exp.Expression) -> str:
        """The client's own text of an expression when positions are known (MySQL
        names result columns after it), else the generated SQL."""
        text = source_text(self.source, e)
        return text if text is not None else e.sql(dialect=DIALECT)


def to_sql(e: exp.Expression) -> str:
    return e.sql(dialect=DIALECT)


def to_template(e: exp.Expression) -> SqlTemplate:
    return parse_template(to_sql(e))


def source_text(source: str, e: exp.Expression) -> str | None:
    """The slice of ``source`` an expression was parsed from, if sqlglot kept positions."""
    if not source:
        return None
    starts: list[int] = []
    ends: list[int] = []
    for node in e.walk():
        meta = node.meta if hasattr(node, "_meta") and node._meta else None
        if meta and "start" in meta and "end" in meta:
            starts.append(meta["start"])
            ends.append(meta["end"])
    if not starts:
        return None
    start, end = min(starts), max(ends) + 1
    # placeholders are parsed from ':name' with the colon before the recorded start
    while start > 0 and source[start - 1] == ":":
        start -= 1
    text = source[start:end]
    # a function's closing parentheses come after the last recorded token
    opens = text.count("(") - text.count(")")
    while opens > 0 and end < len(source):
        c = source[end]
        end += 1
        if c == ")":
            opens -= 1
        elif c not in " \t\r\n":
            return None
    text = source[start:end]
    if text.count("(") != text.count(")"):
        return None
    return text
