"""What every planning function needs: the vschema, the session keyspace, the list
bind variables of the normalised query and the source text (for templates that
reuse the client's own SQL text and column names)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from rewriter.dialect import DIALECT
from sqltext.lexer import QUOTES, comment_end, quoted_end
from vschema.tracked_schema import TrackedSchema

__all__ = ["DIALECT", "PlanContext", "select_item_texts", "to_sql"]


_LIST_MARK = re.compile(r" :(\w+)")


@dataclass(slots=True)
class PlanContext:
    vschema: Any
    keyspace: str | None
    list_vars: frozenset[str] = frozenset()
    source: str = ""  # the (normalised) statement text, placeholders ``:v``/``::v``
    schema: TrackedSchema | None = None  # the shards' columns (schema tracking)
    counter: list[int] = field(default_factory=lambda: [0])
    # Where result column names come from when ``source`` is not this statement's text
    # (the outer query of a pullout: its select list is the client's, its WHERE is not).
    names_from: str = ""

    @property
    def names_source(self) -> str:
        text = self.names_from or self.source
        if self.list_vars and " :" in text:
            # the planned text spells a list '::v' as ' :v' (sqlglot positions); a column
            # name carries the list as the client wrote it, so as '::v' (rendered '1, 2')
            text = _LIST_MARK.sub(lambda m: "::" + m.group(1) if m.group(1) in self.list_vars else m.group(0), text)
        return text

    def new_var(self, prefix: str) -> str:
        self.counter[0] += 1
        return f"{prefix}{self.counter[0]}"


def to_sql(e: exp.Expression) -> str:
    return e.sql(dialect=DIALECT)


_SELECT_MODIFIERS = frozenset({
    "distinct", "all", "distinctrow", "high_priority", "straight_join", "sql_small_result",
    "sql_big_result", "sql_buffer_result", "sql_no_cache", "sql_cache", "sql_calc_found_rows",
})
_LIST_END = frozenset({"from", "into", "where", "group", "having", "order", "limit", "union",
                       "window", "for", "lock", "procedure"})


def select_item_texts(source: str, count: int) -> list[str] | None:
    """The text of each top-level select item of ``source`` (a SELECT statement), as the
    client wrote it: MySQL names result columns after it. None when the text cannot
    be split into exactly ``count`` items."""
    n = len(source)
    i = 0
    words = 0
    items: list[str] = []
    start = -1
    depth = 0
    in_with = False
    while i < n:
        c = source[i]
        if c in " \t\r\n":
            i += 1
            continue
        if c in QUOTES:
            j = quoted_end(source, i)
            if start < 0:
                start = i
            i = n if j < 0 else j
            continue
        after = comment_end(source, i)
        if after is not None:
            i = n if after < 0 else after
            continue
        if c.isalpha() or c == "_":
            j = i
            while j < n and (source[j].isalnum() or source[j] in "_$"):
                j += 1
            word = source[i:j].lower()
            if words == 0:
                if word == "with" or (in_with and (word != "select" or depth != 0)):
                    in_with = True  # skip the WITH clause to the main select list
                    i = j
                    continue
                if word != "select":
                    return None
                words = 1
                i = j
                continue
            if depth == 0 and start < 0 and word in _SELECT_MODIFIERS:
                i = j
                continue
            if depth == 0 and word in _LIST_END and (i == 0 or not source[i - 1].isalnum()):
                break
            if start < 0:
                start = i
            i = j
            continue
        if words == 0:
            if not in_with:
                return None
            depth += 1 if c == "(" else -1 if c == ")" else 0
            i += 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            if start < 0:
                return None
            items.append(source[start:i].strip())
            start = -1
            i += 1
            continue
        if start < 0:
            start = i
        i += 1
    if start >= 0:
        items.append(source[start:i].strip())
    if len(items) != count:
        return None
    return items
