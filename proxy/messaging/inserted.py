"""Messages inserted through this proxy, known exactly from the INSERT's own values.

Vitess's messager before vstreams added the rows a vttablet inserted to its cache at commit,
from the statement's values, without reading them back. We do the same where the values a poll
would return are known *exactly*, byte for byte, in the text protocol:

* an integer literal into an integer column (no ZEROFILL, within the column's range),
* a string literal (no backslash: its bytes do not depend on ``NO_BACKSLASH_ESCAPES``) into a
  utf8mb4 VARCHAR / TEXT column (MariaDB's JSON is such a column: stored as written) or a
  VARBINARY / BLOB column, within its length,
* NULL into a nullable column,
* a column left out whose default is NULL or an integer.

Anything else (an expression, a CHAR column that strips trailing spaces, a MySQL JSON column
that normalises its text, a table with triggers, ``INSERT IGNORE`` / ``ON DUPLICATE KEY``...)
makes ``exact_messages`` answer None and the manager polls as before. Every message table's
columns are read once with the table (``proxy.messaging.schema``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from proxy.messaging.cache import CachedMessage

# Kinds of column whose text-protocol value a literal determines exactly.
INT, TEXT, BINARY = "int", "text", "binary"

_INT_RANGES = {
    "tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64,
}  # fmt: skip
_TEXT_TYPES = frozenset({"varchar", "tinytext", "text", "mediumtext", "longtext"})
_BINARY_TYPES = frozenset({"varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_INT_DEFAULT = re.compile(r"^-?\d+$")


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """What a literal written into one column reads back as (``kind`` "" : never known)."""

    name: str  # lower case
    kind: str
    nullable: bool
    # Left out of an INSERT, the column holds ``default`` (text-protocol bytes or None for NULL),
    # if ``has_default``; otherwise leaving it out makes the row's values unknown.
    has_default: bool
    default: bytes | None = None
    min_value: int = 0
    max_value: int = 0
    max_chars: int | None = None
    max_octets: int | None = None


def column_info(
    name: str,
    data_type: str,
    column_type: str,
    nullable: bool,
    default: str | None,
    charset: str | None,
    max_chars: int | None,
    max_octets: int | None,
    extra: str,
) -> ColumnInfo:
    """One column as ``information_schema.COLUMNS`` (MariaDB) describes it."""
    dt, ct, extra = data_type.lower(), column_type.lower(), extra.lower()
    kind = ""
    lo = hi = 0
    if dt in _INT_RANGES and "zerofill" not in ct:
        kind, bits = INT, _INT_RANGES[dt]
        lo, hi = (0, 2**bits - 1) if "unsigned" in ct else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    elif dt in _TEXT_TYPES and (charset or "").lower() == "utf8mb4":
        kind = TEXT
    elif dt in _BINARY_TYPES:
        kind = BINARY
    computed = any(word in extra for word in ("auto_increment", "virtual", "stored", "persistent", "generated"))
    if computed:
        kind = ""
    has_default, value = False, None
    if not computed:
        if default is None or default.upper() == "NULL":
            # No default on a nullable column, or DEFAULT NULL: NULL (MariaDB shows both ways).
            has_default = nullable
        elif kind == INT and _INT_DEFAULT.match(default) and lo <= int(default) <= hi:
            has_default, value = True, str(int(default)).encode()
    return ColumnInfo(name.lower(), kind, nullable, has_default, value, lo, hi, max_chars, max_octets)


@dataclass(frozen=True, slots=True)
class InsertShape:
    """A message table's columns as ``exact_messages`` needs them (``exact``: no triggers)."""

    columns: tuple[ColumnInfo, ...]
    exact: bool = True


# One INSERT statement into a message table, as the proxy sends it to a shard:
# INSERT INTO [`ks`.]t (cols) VALUES (v, ...), ... with v an integer, a string or NULL.
_HEADER = re.compile(
    r"\s*insert\s+into\s+(?:(?:`[^`]+`|\w+)\s*\.\s*)?(?:`(?P<qt>[^`]+)`|(?P<t>\w+))\s*"
    r"\((?P<cols>[^()]*)\)\s*values?\s*",
    re.I,
)
_VALUE_BARE = r"(?:-?\d+(?![\w.])|'(?:[^'\\]|'')*'|null\b)"


@lru_cache(maxsize=64)
def _rows_pattern(width: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(every row of ``width`` values up to the end, one row with its values as groups)."""
    row = r"\(\s*" + r"\s*,\s*".join([f"({_VALUE_BARE})"] * width) + r"\s*\)"
    bare = r"\(\s*" + r"\s*,\s*".join([_VALUE_BARE] * width) + r"\s*\)"
    return re.compile(rf"{bare}(?:\s*,\s*{bare})*\s*;?\s*", re.I), re.compile(row, re.I)


def parse_insert(sql: str) -> tuple[str, list[str], list[tuple[str, ...]]] | None:
    """(table, lower-case column names, rows of raw literal texts), or None for any other shape."""
    m = _HEADER.match(sql)
    if m is None:
        return None
    cols = [c.strip().strip("`").lower() for c in m.group("cols").split(",")]
    if not all(cols):
        return None
    whole, one = _rows_pattern(len(cols))
    if whole.fullmatch(sql, m.end()) is None:
        return None
    rows = one.findall(sql, m.end())
    if len(cols) == 1:
        rows = [(r,) for r in rows]
    return (m.group("qt") or m.group("t")), cols, rows


def _value(info: ColumnInfo, raw: str) -> tuple[bool, bytes | None]:
    """(known, the text-protocol value) of the literal ``raw`` written into the column."""
    first = raw[0]
    if first == "'":
        if info.kind != TEXT and info.kind != BINARY:
            return False, None
        text = raw[1:-1].replace("''", "'")
        data = text.encode()
        if info.kind == TEXT and info.max_chars is not None and len(text) > info.max_chars:
            return False, None
        if info.max_octets is not None and len(data) > info.max_octets:
            return False, None
        return True, data
    if first in "nN":
        return info.nullable, None
    if info.kind != INT:
        return False, None
    n = int(raw)
    if not info.min_value <= n <= info.max_value:
        return False, None
    return True, str(n).encode()


_BOOKKEEPING = ("priority", "time_next", "epoch", "time_acked")


def exact_messages(
    shape: InsertShape, table: str, streamed: tuple[str, ...], id_index: int, sql: str, now_ns: int
) -> list[CachedMessage] | None:
    """The messages ``sql`` (one INSERT into ``table`` as a shard ran it) committed, exactly as
    a poll would read them, if they are all due now; None when any value is not known exactly
    or any row is not due (the manager then polls: the poll also arms its timer)."""
    if not shape.exact:
        return None
    parsed = parse_insert(sql)
    if parsed is None or parsed[0].lower() != table.lower():
        return None
    _, cols, rows = parsed
    infos = {c.name: c for c in shape.columns}
    at = {c: i for i, c in enumerate(cols)}
    if len(at) != len(cols) or any(c not in infos for c in cols):
        return None
    # Per wanted column: the value's position in a row, or its default.
    wanted = [c.lower() for c in streamed] + list(_BOOKKEEPING)
    plan: list[tuple[int, ColumnInfo] | bytes | None] = []
    for name in wanted:
        info = infos.get(name)
        if info is None:
            return None
        if name in at:
            plan.append((at[name], info))
        elif info.has_default:
            plan.append(info.default)
        else:
            return None
    width = len(streamed)
    out: list[CachedMessage] = []
    for raw_row in rows:
        values: list[bytes | None] = []
        for step in plan:
            if isinstance(step, tuple):
                known, v = _value(step[1], raw_row[step[0]])
                if not known:
                    return None
                values.append(v)
            else:
                values.append(step)
        priority, time_next, epoch, time_acked = values[width:]
        ep = int(epoch) if epoch is not None else 0
        tn = int(time_next) if time_next is not None else None
        due = (tn is None and ep == 0) or (tn is not None and tn <= now_ns)
        mid = values[id_index]
        if time_acked is not None or not due or mid is None:
            return None
        out.append(CachedMessage(
            id=mid, priority=int(priority) if priority is not None else 0, time_next=tn, epoch=ep,
            row=tuple(values[:width]),
        ))  # fmt: skip
    return out
