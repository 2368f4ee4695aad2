"""Results as the engine passes them around.

Values stay in MySQL's *text protocol* form (``bytes`` or ``None``), exactly as a
shard sent them, the way Vitess keeps ``sqltypes.Value`` as type + raw bytes: a
single-shard route forwards rows untouched, and only primitives that must compare
or compute (MemorySort, aggregates, joins) decode values, through ``decode_value``.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mysql_mimic.types import ColumnType

from sqltext import temporal
from sqltext.quoting import TextValueKind, double_text

Row = tuple[bytes | None, ...]

BINARY_CHARSET = 63
UTF8MB4_GENERAL_CI = 45

# Column flags (include/mysql_com.h)
NOT_NULL_FLAG = 1
PRI_KEY_FLAG = 2
UNSIGNED_FLAG = 32
BINARY_FLAG = 128
NUM_FLAG = 32768


@dataclass(slots=True)
class Field:
    """One column definition, as in a MySQL ColumnDefinition41 packet."""

    name: str
    type: int = ColumnType.VAR_STRING
    charset: int = UTF8MB4_GENERAL_CI
    length: int = 0
    flags: int = 0
    decimals: int = 0
    table: str = ""
    org_table: str = ""
    db: str = ""
    org_name: str = ""
    # The shard's own packet for this column, forwarded as is. Not an __init__
    # argument, so ``dataclasses.replace`` (a renamed or derived column) drops it.
    raw: bytes = field(default=b"", init=False, repr=False, compare=False)

    @property
    def unsigned(self) -> bool:
        return bool(self.flags & UNSIGNED_FLAG)

    @property
    def is_binary(self) -> bool:
        """A binary *string* (BINARY, VARBINARY, BLOB): numbers and temporal values carry
        the binary charset too, but are not bytes to keep as they are."""
        return self.charset == BINARY_CHARSET and self.type not in _NOT_BYTES


def decode_text_row(data: bytes) -> Row:
    """One text-protocol row packet -> its values (``bytes`` or ``None``)."""
    out: list[bytes | None] = []
    pos, end = 0, len(data)
    while pos < end:
        c = data[pos]
        if c < 251:
            pos += 1
        elif c == 251:
            out.append(None)
            pos += 1
            continue
        elif c == 252:
            c = data[pos + 1] | data[pos + 2] << 8
            pos += 3
        elif c == 253:
            c = data[pos + 1] | data[pos + 2] << 8 | data[pos + 3] << 16
            pos += 4
        else:
            c = int.from_bytes(data[pos + 1 : pos + 9], "little")
            pos += 9
        out.append(data[pos : pos + c])
        pos += c
    return tuple(out)


def split_packets(block: bytes) -> list[bytes]:
    """Payloads of the MySQL packets in ``block`` (headers included), joining the
    continuation packets of a payload of 16 MiB or more."""
    out: list[bytes] = []
    pos, end = 0, len(block)
    big = b""
    while pos < end:
        n = block[pos] | block[pos + 1] << 8 | block[pos + 2] << 16
        payload = block[pos + 4 : pos + 4 + n]
        pos += 4 + n
        if n == 0xFFFFFF:
            big += payload
            continue
        if big:
            payload, big = big + payload, b""
        out.append(payload)
    return out


@dataclass(frozen=True, slots=True)
class PacketBlock:
    """Row packets exactly as a shard sent them, headers included: ``count`` packets
    whose sequence ids start at ``first_seq``. Forwarded in one piece when the
    client's sequence numbering lines up."""

    data: bytes
    count: int
    first_seq: int


class Result:
    """A complete (or one chunk of a streamed) result.

    For streamed results the first chunk carries ``fields`` and later chunks only
    ``rows``. DML results carry ``affected_rows``/``insert_id`` and no fields.

    A shard's rows may arrive as a raw ``PacketBlock``: they are decoded only if
    something reads ``rows`` (which then owns them); untouched, they go to the client
    byte for byte.
    """

    __slots__ = ("fields", "_rows", "_block", "affected_rows", "insert_id", "info", "warnings")

    def __init__(
        self,
        fields: list[Field] | None = None,
        rows: list[Row] | None = None,
        affected_rows: int = 0,
        insert_id: int = 0,
        info: str = "",
        warnings: int = 0,
        block: PacketBlock | None = None,
    ) -> None:
        self.fields = fields if fields is not None else []
        self._rows = rows if rows is not None else []
        self._block = block
        self.affected_rows = affected_rows
        self.insert_id = insert_id
        self.info = info
        self.warnings = warnings

    @property
    def rows(self) -> list[Row]:
        if self._block is not None:
            self._rows = [decode_text_row(r) for r in split_packets(self._block.data)]
            self._block = None
        return self._rows

    @rows.setter
    def rows(self, value: list[Row]) -> None:
        self._rows = value
        self._block = None

    @property
    def block(self) -> PacketBlock | None:
        """The shard's row packets, if nothing has decoded them."""
        return self._block

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Result):
            return NotImplemented
        return (self.fields, self.rows, self.affected_rows, self.insert_id, self.info, self.warnings) == (
            other.fields, other.rows, other.affected_rows, other.insert_id, other.info, other.warnings,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Result(fields={self.fields!r}, rows={self.rows!r}, affected_rows={self.affected_rows}, "
            f"insert_id={self.insert_id})"
        )


ResultStream = AsyncIterator[Result]

_INT_TYPES = {
    ColumnType.TINY,
    ColumnType.SHORT,
    ColumnType.LONG,
    ColumnType.LONGLONG,
    ColumnType.INT24,
    ColumnType.YEAR,
}
INT_TYPES = frozenset(_INT_TYPES)
_FLOAT_TYPES = {ColumnType.FLOAT, ColumnType.DOUBLE}
_DECIMAL_TYPES = {ColumnType.DECIMAL, ColumnType.NEWDECIMAL}
DECIMAL_TYPES = frozenset(_DECIMAL_TYPES)
_TEMPORAL_TYPES = {ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP, ColumnType.TIME,
                   ColumnType.NEWDATE, ColumnType.YEAR}
_NOT_BYTES = _INT_TYPES | _FLOAT_TYPES | _DECIMAL_TYPES | _TEMPORAL_TYPES


def is_numeric(f: Field) -> bool:
    return f.type in _INT_TYPES or f.type in _FLOAT_TYPES or f.type in _DECIMAL_TYPES


def literal_kind(f: Field) -> TextValueKind:
    """How ``f``'s text-protocol values are written back as SQL literals
    (sqltext.quoting.text_value_literal)."""
    if is_numeric(f):
        return TextValueKind.NUMBER
    if f.charset == BINARY_CHARSET or f.type == ColumnType.BIT:
        return TextValueKind.BYTES
    return TextValueKind.STRING


def decode_value(f: Field, raw: bytes | None) -> Any:
    """Text-protocol bytes -> a Python value that compares the way MySQL orders.

    Strings stay ``str`` (binary collations stay ``bytes``); dates and times stay
    as their text, whose lexical order equals chronological order for MySQL's
    fixed-width formats.
    """
    if raw is None:
        return None
    t = f.type
    if t in _INT_TYPES:
        return int(raw)
    if t in _DECIMAL_TYPES:
        return decimal.Decimal(raw.decode())
    if t in _FLOAT_TYPES:
        return float(raw)
    if f.charset == BINARY_CHARSET and t not in _TEMPORAL_TYPES:
        return raw
    return raw.decode("utf-8", "surrogateescape")


_DATE_TYPES = {ColumnType.DATE, ColumnType.NEWDATE}
_DATETIME_TYPES = {ColumnType.DATETIME, ColumnType.TIMESTAMP}


def evaluator_value(f: Field, raw: bytes | None) -> Any:
    """A value for the proxy's expression evaluator (``rewriter.evaluate``): as
    ``decode_value``, but DATE, DATETIME/TIMESTAMP and TIME columns as ``datetime.date``,
    ``datetime.datetime`` and ``datetime.timedelta``, so date functions and arithmetic
    know them from strings (``d + 1`` is 20240201 for a DATE, 2025 for the string
    '2024-01-31'). A zero date (``0000-00-00``), which Python cannot hold, stays text."""
    value = decode_value(f, raw)
    if value is None or f.type not in _TEMPORAL_TYPES or f.type == ColumnType.YEAR:
        return value
    text = value if isinstance(value, str) else value.decode("utf-8", "replace")
    if f.type in _DATE_TYPES:
        try:  # MariaDB's own text: ISO (C parser, ~10x faster than the general one); a zero date fails
            return datetime.date.fromisoformat(text)
        except ValueError:
            return value
    if f.type in _DATETIME_TYPES:
        try:
            return datetime.datetime.fromisoformat(text)
        except ValueError:
            return value
    if len(text) == 8 and text[2] == ":" and text[5] == ":":  # HH:MM:SS, the common TIME
        try:
            return datetime.timedelta(hours=int(text[:2]), minutes=int(text[3:5]), seconds=int(text[6:]))
        except ValueError:
            pass
    parsed = temporal.to_time(text)
    return parsed if parsed is not None else value


def encode_value(value: Any) -> bytes | None:
    """A Python value -> text-protocol bytes, as MySQL would print it."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool):
        return b"1" if value else b"0"
    if isinstance(value, float):
        return double_text(value).encode()
    if isinstance(value, decimal.Decimal):
        return format(value, "f").encode()
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ").encode()
    if isinstance(value, datetime.timedelta):
        total = int(value.total_seconds())
        sign, total = ("-" if total < 0 else ""), abs(total)
        return f"{sign}{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}".encode()
    if isinstance(value, (dict, list)):  # JSON documents (e.g. decoded from a binlog)
        return json.dumps(value, separators=(", ", ": ")).encode()
    return str(value).encode()


def local_result(names: Sequence[str], rows: Sequence[Sequence[Any]], types: Sequence[int] | None = None) -> Result:
    """A result the proxy answers itself (SHOW VITESS_*, @@variables, ...)."""
    fields = []
    for i, name in enumerate(names):
        t = types[i] if types else ColumnType.VAR_STRING
        numeric = t in _INT_TYPES or t in _DECIMAL_TYPES or t in _FLOAT_TYPES
        fields.append(
            Field(
                name=name,
                type=t,
                charset=BINARY_CHARSET if numeric else UTF8MB4_GENERAL_CI,
                length=21 if numeric else 1024,
                flags=(BINARY_FLAG | NUM_FLAG) if numeric else 0,
            )
        )
    return Result(fields=fields, rows=[tuple(encode_value(v) for v in row) for row in rows])
