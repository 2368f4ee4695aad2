"""Pre-split SQL templates and MySQL literal escaping.

A plan stores each query it sends as a ``SqlTemplate``: the literal text pieces and
the bind variable names between them, so rendering per execution is one ``join``
of text and escaped values (no parsing, no regex).

``sql_literal(value)`` is the one place that turns a Python value into MySQL literal
text: ``None -> NULL``, ints/Decimals as digits, ``str`` quoted with MySQL's backslash
escapes (``\\0 \\' \\" \\b \\n \\r \\t \\Z \\\\``), ``bytes`` as ``X'..'``, lists as
comma-separated literals (for ``IN (::list)``).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

_ESCAPE_TABLE = str.maketrans(
    {
        "\0": "\\0",
        "'": "\\'",
        '"': '\\"',
        "\b": "\\b",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\x1a": "\\Z",
        "\\": "\\\\",
    }
)
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")


def quote_identifier(name: str) -> str:
    """A MySQL identifier in backquotes, for any name."""
    return "`" + name.replace("`", "``") + "`"


def escape_string(s: str) -> str:
    """The body of a MySQL single-quoted string literal for ``s``."""
    return s.translate(_ESCAPE_TABLE)


def sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    t = type(value)
    if t is int:
        return str(value)
    if t is str:
        return "'" + value.translate(_ESCAPE_TABLE) + "'"
    if t is bool:
        return "1" if value else "0"
    if t is Decimal:
        return format(value, "f")
    if t is float:
        return repr(value)
    if t is bytes or t is bytearray or t is memoryview:
        return "X'" + bytes(value).hex() + "'"
    if t is list or t is tuple:
        return ", ".join(sql_literal(v) for v in value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return "'" + value.isoformat(sep=" ") + "'" if isinstance(value, datetime.datetime) else "'" + value.isoformat() + "'"
    if isinstance(value, datetime.timedelta):
        us = value // datetime.timedelta(microseconds=1)
        sign, us = ("-" if us < 0 else ""), abs(us)
        secs, us = divmod(us, 1_000_000)
        return f"'{sign}{secs // 3600}:{secs % 3600 // 60:02d}:{secs % 60:02d}.{us:06d}'"
    if isinstance(value, int):
        return str(int(value))
    raise TypeError(f"cannot render {t.__name__} as a SQL literal")


class MissingBindVariable(KeyError):
    pass


@dataclass(frozen=True, slots=True)
class SqlTemplate:
    """``parts[0] + lit(names[0]) + parts[1] + ... + parts[-1]``."""

    parts: tuple[str, ...]
    names: tuple[str, ...]

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
        try:
            for i, name in enumerate(names):
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
    n = len(sql)
    i = 0
    start = 0
    while i < n:
        c = sql[i]
        if c in "'\"`":
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
            i += 1
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
    return SqlTemplate(tuple(parts), tuple(names))
