"""Pre-split SQL templates and MySQL literal escaping.

A plan stores each query it sends as a ``SqlTemplate``: the literal text pieces and
the bind variable names between them, so rendering per execution is one ``join``
of text and escaped values (no parsing, no regex).

Values render through ``sqltext.quoting.sql_literal``, the one literal renderer (re-exported
here with the identifier quoter for the planner's modules).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqltext.lexer import QUOTES, quoted_end
from sqltext.quoting import escape_string, quote_identifier, sql_literal

# Re-exported for the planner's modules (and code written before sqltext): one implementation.
__all__ = ["MissingBindVariable", "SqlTemplate", "escape_string", "parse_template", "quote_identifier", "sql_literal"]

# normalize's bind variables (rewriter.normalize), the only placeholders looked for
# inside a quoted identifier
_BIND_MARK = re.compile(r"(?<![\w:])::?(vtg\d+)(?![\w])")
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")


class MissingBindVariable(KeyError):
    pass


@dataclass(frozen=True, slots=True)
class SqlTemplate:
    """``parts[0] + lit(names[0]) + parts[1] + ... + parts[-1]``."""

    parts: tuple[str, ...]
    names: tuple[str, ...]
    # positions in ``names`` of placeholders inside a quoted identifier: a column alias
    # naming an expression as the client wrote it (``AS `concat(a, :vtg1)` ``) renders the
    # literal's text there, backquotes doubled
    in_identifier: frozenset[int] = frozenset()

    @property
    def is_constant(self) -> bool:
        return not self.names

    def render(self, bindvars: Mapping[str, Any]) -> str:
        names = self.names
        if not names:
            return self.parts[0]
        parts = self.parts
        out = [parts[0]]
        append = out.append
        idents = self.in_identifier
        try:
            for i, name in enumerate(names):
                if idents and i in idents:
                    append(sql_literal(bindvars[name]).replace("`", "``"))
                else:
                    append(sql_literal(bindvars[name]))
                append(parts[i + 1])
        except KeyError as e:
            raise MissingBindVariable(f"missing bind var {e.args[0]}") from None
        return "".join(out)

    def text(self) -> str:
        """The template with ``:name`` placeholders, for display (VEXPLAIN)."""
        out = [self.parts[0]]
        for i, name in enumerate(self.names):
            out.append(":" + name)
            out.append(self.parts[i + 1])
        return "".join(out)


def parse_template(sql: str) -> SqlTemplate:
    """Split SQL text with ``:name`` / ``::name`` placeholders into a template.

    Quoted strings and identifiers are skipped, so a ``:`` inside them stays text.
    """
    parts: list[str] = []
    names: list[str] = []
    in_identifier: set[int] = set()
    n = len(sql)
    i = 0
    start = 0
    while i < n:
        c = sql[i]
        if c in QUOTES:
            end = quoted_end(sql, i)
            stop = n if end < 0 else end
            if c == "`":
                for m in _BIND_MARK.finditer(sql, i + 1, stop - 1):
                    parts.append(sql[start:m.start()])
                    in_identifier.add(len(names))
                    names.append(m.group(1))
                    start = m.end()
            i = stop
            continue
        if c == ":" and i + 1 < n:
            j = i + 1
            if sql[j] == ":":
                j += 1
            k = j
            while k < n and sql[k] in _IDENT_CHARS:
                k += 1
            if k > j and not (i > 0 and sql[i - 1] in _IDENT_CHARS):
                parts.append(sql[start:i])
                names.append(sql[j:k])
                i = k
                start = k
                continue
        i += 1
    parts.append(sql[start:])
    return SqlTemplate(tuple(parts), tuple(names), frozenset(in_identifier))
