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
from proxy.messaging.rows import encode_columns

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
# INSERT INTO [`ks`.]t (cols) VALUES (v, ...), ... with v an integer, a string or NULL,
# perhaps after the proxy's own mark (proxy/messaging/own_mark.py: a comment, no row changes).
_HEADER = re.compile(
    r"\s*(?:/\*shardgate-own [0-9a-f]+ \w+\*/\s*)?insert\s+into\s+(?:(?:`[^`]+`|\w+)\s*\.\s*)?(?:`(?P<qt>[^`]+)`|(?P<t>\w+))\s*"
    r"\((?P<cols>[^()]*)\)\s*values?\s*",
    re.I,
)
# Possessive and unrolled: a 50-row statement is split in ~30 us (a backtracking alternation
# per character took ~140 us).
_VALUE = r"(-?\d++(?![\w.])|'[^'\\]*+(?:''[^'\\]*+)*+'|(?i:null)\b)"


@lru_cache(maxsize=64)
def _row_splitter(width: int) -> re.Pattern[str]:
    """Splits a VALUES list of rows of ``width`` values: empty text between rows, the values as groups."""
    return re.compile(r"\(\s*" + r"\s*,\s*".join([_VALUE] * width) + r"\s*\)(?:\s*,\s*|\s*;?\s*\Z)")


@dataclass(frozen=True, slots=True)
class ParsedInsert:
    """One INSERT as ``parse_insert`` splits it, with where its column list's names end."""

    table: str
    columns: list[str]  # lower case
    values: list[list[str]]  # per column, the raw literal text of every row
    head: str  # the statement up to its column list's last name (the mark and INSERT INTO included)


def parse_insert_at(sql: str) -> ParsedInsert | None:
    """``parse_insert``, keeping the statement's head (to write the same rows with more columns)."""
    m = _HEADER.match(sql)
    if m is None:
        return None
    cols = [c.strip().strip("`").lower() for c in m.group("cols").split(",")]
    if not all(cols):
        return None
    width = len(cols)
    pieces = _row_splitter(width).split(sql[m.end():])
    # Between (and around) the rows nothing may be left: "" every width + 1 pieces.
    if len(pieces) < width + 2 or any(pieces[0 :: width + 1]):
        return None
    columns = [pieces[i :: width + 1] for i in range(1, width + 1)]
    return ParsedInsert(m.group("qt") or m.group("t"), cols, columns, sql[: m.end("cols")])


def parse_insert(sql: str) -> tuple[str, list[str], list[list[str]]] | None:
    """(table, lower-case column names, per column the raw literal texts of every row), or
    None for any other shape."""
    parsed = parse_insert_at(sql)
    return None if parsed is None else (parsed.table, parsed.columns, parsed.values)


def _value(info: ColumnInfo, raw: str) -> tuple[bool, bytes | None]:
    """(known, the text-protocol value) of the literal ``raw`` written into the column."""
    first = raw[0]
    if first == "'":
        if info.kind != TEXT and info.kind != BINARY:
            return False, None
        text = raw[1:-1].replace("''", "'")
        try:
            data = text.encode()
        except UnicodeEncodeError:  # bytes that were not UTF-8 (kept as surrogates): not known
            return False, None
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


@lru_cache(maxsize=256)
def _canonical_ints(info: ColumnInfo) -> re.Pattern[str]:
    """Comma-joined integers written as the shard prints them, each surely within the column's range."""
    digits = len(str(min(info.max_value, -info.min_value if info.min_value else info.max_value))) - 1
    one = rf"(?:{'-?' if info.min_value < 0 else ''}[1-9]\d{{0,{max(digits - 1, 0)}}}|0)"
    return re.compile(rf"{one}(?:,{one})*")


def _column(info: ColumnInfo, raw: list[str]) -> list[bytes | None] | None:
    """Every row's value of one column (None: some value is not known exactly). The usual
    columns are converted whole, at C speed; others value by value."""
    if info.kind == INT:
        joined = ",".join(raw)
        if _canonical_ints(info).fullmatch(joined):
            return joined.encode().split(b",")  # type: ignore[return-value]  # list[bytes]
    elif info.kind:
        texts = [v[1:-1] for v in raw if v[0] == "'"]
        if len(texts) == len(raw):
            if "''" in "\0".join(texts):
                texts = [t.replace("''", "'") for t in texts]
            try:
                data = [t.encode() for t in texts]
            except UnicodeEncodeError:  # bytes that were not UTF-8 (kept as surrogates): not known
                return None
            if (info.kind != TEXT or info.max_chars is None or max(map(len, texts)) <= info.max_chars) and (
                info.max_octets is None or max(map(len, data)) <= info.max_octets
            ):
                return data  # type: ignore[return-value]  # list[bytes]
    out: list[bytes | None] = []
    for v in raw:
        known, value = _value(info, v)
        if not known:
            return None
        out.append(value)
    return out


BOOKKEEPING = ("priority", "time_next", "epoch", "time_acked")


def exact_messages(
    shape: InsertShape, table: str, streamed: tuple[str, ...], id_index: int, sql: str, now_ns: int
) -> list[CachedMessage] | None:
    """The messages ``sql`` (one INSERT into ``table`` as a shard ran it) committed, exactly as
    a poll would read them, if they are all due now; None when any value is not known exactly
    or any row is not due (the manager then polls: the poll also arms its timer)."""
    if not shape.exact:
        return None
    parsed = parse_insert_at(sql)
    if parsed is None:
        return None
    return exact_parsed(shape, table, streamed, id_index, parsed, now_ns)


def exact_parsed(
    shape: InsertShape, table: str, streamed: tuple[str, ...], id_index: int, parsed: ParsedInsert, now_ns: int
) -> list[CachedMessage] | None:
    """``exact_messages`` of an INSERT already parsed."""
    if not shape.exact or parsed.table.lower() != table.lower():
        return None
    cols, raw_columns = parsed.columns, parsed.values
    infos = {c.name: c for c in shape.columns}
    at = {c: i for i, c in enumerate(cols)}
    if len(at) != len(cols) or any(c not in infos for c in cols):
        return None
    count = len(raw_columns[0])
    # Per wanted column: every row's value (written, or the column's default).
    columns: list[list[bytes | None]] = []
    for name in [c.lower() for c in streamed] + list(BOOKKEEPING):
        info = infos.get(name)
        if info is None:
            return None
        if name in at:
            values = _column(info, raw_columns[at[name]])
            if values is None:
                return None
            columns.append(values)
        elif info.has_default:
            columns.append([info.default] * count)
        else:
            return None
    width = len(streamed)
    priorities, times, epochs, acked = columns[width:]
    if acked.count(None) != count or None in columns[id_index]:
        return None
    if len(set(priorities)) == 1 and len(set(times)) == 1 and len(set(epochs)) == 1:
        # As a rule the bookkeeping columns are left to their defaults: one check for all rows.
        rows = [(priorities[0], times[0], epochs[0])]
    else:
        rows = list(zip(priorities, times, epochs, strict=True))
    meta: list[tuple[int, int | None, int]] = []
    for p, t, e in rows:
        ep = 0 if e is None else int(e)
        tn = None if t is None else int(t)
        if not ((tn is None and ep == 0) or (tn is not None and tn <= now_ns)):
            return None  # not due (scheduled, or parked): the poll arms its timer
        meta.append((0 if p is None else int(p), tn, ep))
    if len(meta) == 1:
        meta *= count
    ids = columns[id_index]
    streamed_columns = columns[:width]
    payloads = encode_columns(streamed_columns)
    if payloads is None:
        return [
            CachedMessage(mid, p, tn, ep, row)  # type: ignore[arg-type]  # ids are never NULL (checked)
            for mid, (p, tn, ep), row in zip(ids, meta, zip(*streamed_columns, strict=True), strict=True)
        ]
    return [
        CachedMessage(mid, p, tn, ep, row, payload)  # type: ignore[arg-type]  # ids are never NULL (checked)
        for mid, (p, tn, ep), row, payload in zip(ids, meta, zip(*streamed_columns, strict=True), payloads, strict=True)
    ]
