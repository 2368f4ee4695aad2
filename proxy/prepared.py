"""Server-side prepared statements: typed parameters bound as escaped SQL literals,
and text-protocol values re-encoded for the binary result protocol."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import io
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from mysql_mimic.results import NullBitmap
from mysql_mimic.types import (
    Capabilities,
    ColumnType,
    read_double,
    read_float,
    read_int_1,
    read_int_2,
    read_int_4,
    read_int_8,
    read_str_len,
    read_uint_1,
    read_uint_2,
    read_uint_4,
    read_uint_8,
    read_uint_len,
    uint_len,
)

from proxy.engine.result import Field
from proxy.errors import (
    ER_NOT_SUPPORTED_YET,
    ER_UNKNOWN_STMT_HANDLER,
    ER_WRONG_ARGUMENTS,
    ProxyError,
)
from rewriter.context import select_item_texts
from sqltext.lexer import code_chars, first_keyword
from sqltext.quoting import sql_literal

_STRING_TYPES = {
    ColumnType.VARCHAR,
    ColumnType.VAR_STRING,
    ColumnType.STRING,
    ColumnType.BLOB,
    ColumnType.TINY_BLOB,
    ColumnType.MEDIUM_BLOB,
    ColumnType.LONG_BLOB,
    ColumnType.JSON,
    ColumnType.ENUM,
    ColumnType.SET,
    ColumnType.GEOMETRY,
    ColumnType.BIT,
}


@dataclass
class PreparedStatement:
    stmt_id: int
    sql: str
    num_params: int
    param_buffers: dict[int, bytearray] | None = None
    param_types: list[tuple[int, bool]] = field(default_factory=list)
    cursor: Any = None


def count_placeholders(sql: str) -> int:
    return len(_placeholder_positions(sql))


@lru_cache(maxsize=1024)
def _placeholder_positions(sql: str) -> tuple[int, ...]:
    """Where the ``?`` of a statement are. Kept per statement text: every execute binds its
    statement again, and the scan costs ~6 µs for a short point select (measured)."""
    return tuple(i for i, c in code_chars(sql) if c == "?")


def bind_parameters(sql: str, params: list[Any]) -> str:
    positions = _placeholder_positions(sql)
    if len(positions) != len(params):
        raise ProxyError(ER_WRONG_ARGUMENTS, "Incorrect arguments to mysqld_stmt_execute")
    out, last = [], 0
    for pos, value in zip(positions, params, strict=True):
        out.append(sql[last:pos])
        out.append(sql_literal(value))
        last = pos + 1
    out.append(sql[last:])
    return "".join(out)


def _read_temporal(r: io.BytesIO, t: int) -> Any:
    n = read_uint_1(r)
    b = r.read(n)
    if t == ColumnType.TIME:
        if n == 0:
            return datetime.timedelta(0)
        neg, days, h, m, s = struct.unpack("<BIBBB", b[:8])
        us = struct.unpack("<I", b[8:12])[0] if n >= 12 else 0
        td = datetime.timedelta(days=days, hours=h, minutes=m, seconds=s, microseconds=us)
        return -td if neg else td
    if n == 0:
        return datetime.datetime(1, 1, 1) if t != ColumnType.DATE else datetime.date(1, 1, 1)
    y, mo, d = struct.unpack("<HBB", b[:4])
    if t == ColumnType.DATE:
        return datetime.date(y, mo, d)
    h = mi = s = us = 0
    if n >= 7:
        h, mi, s = b[4], b[5], b[6]
    if n >= 11:
        us = struct.unpack("<I", b[7:11])[0]
    return datetime.datetime(y, mo, d, h, mi, s, us)


def _read_value(r: io.BytesIO, t: int, unsigned: bool) -> Any:
    if t in _STRING_TYPES:
        raw = read_str_len(r)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    if t in (ColumnType.DECIMAL, ColumnType.NEWDECIMAL):
        return decimal.Decimal(read_str_len(r).decode())
    if t == ColumnType.TINY:
        return (read_uint_1 if unsigned else read_int_1)(r)
    if t in (ColumnType.SHORT, ColumnType.YEAR):
        return (read_uint_2 if unsigned else read_int_2)(r)
    if t in (ColumnType.LONG, ColumnType.INT24):
        return (read_uint_4 if unsigned else read_int_4)(r)
    if t == ColumnType.LONGLONG:
        return (read_uint_8 if unsigned else read_int_8)(r)
    if t == ColumnType.FLOAT:
        return read_float(r)
    if t == ColumnType.DOUBLE:
        return read_double(r)
    if t == ColumnType.NULL:
        return None
    if t in (ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP, ColumnType.TIME):
        return _read_temporal(r, t)
    raise ProxyError(ER_NOT_SUPPORTED_YET, f"unsupported parameter type {t}")


def read_execute(
    r: io.BytesIO, statements: dict[int, Any], capabilities: Capabilities
) -> tuple[PreparedStatement, list[Any]]:
    stmt_id = read_uint_4(r)
    stmt = statements.get(stmt_id)
    if stmt is None:
        raise ProxyError(ER_UNKNOWN_STMT_HANDLER, f"Unknown prepared statement handler ({stmt_id}) given to mysqld_stmt_execute")
    flags = read_uint_1(r)
    if flags & 0x01:
        raise ProxyError(ER_NOT_SUPPORTED_YET, "server-side cursors are not supported; execute without a cursor")
    read_uint_4(r)  # iteration count, always 1
    n = stmt.num_params
    if Capabilities.CLIENT_QUERY_ATTRIBUTES in capabilities and flags & 0x08:
        n = read_uint_len(r)
    params: list[Any] = []
    if n:
        nulls = NullBitmap.from_buffer(r, n)
        if read_uint_1(r):  # new params bound: types follow
            types = []
            for _ in range(n):
                t = read_uint_1(r)
                unsigned = bool(read_uint_1(r) & 0x80)
                if Capabilities.CLIENT_QUERY_ATTRIBUTES in capabilities:
                    read_str_len(r)
                types.append((t, unsigned))
            stmt.param_types = types
        if len(stmt.param_types) != n:
            raise ProxyError(ER_WRONG_ARGUMENTS, "Incorrect arguments to mysqld_stmt_execute")
        buffers = stmt.param_buffers or {}
        for i, (t, unsigned) in enumerate(stmt.param_types):
            if nulls.is_flipped(i):
                params.append(None)
            elif i in buffers:
                params.append(bytes(buffers[i]))
            else:
                params.append(_read_value(r, t, unsigned))
        stmt.param_buffers = None
    return stmt, params[: stmt.num_params]


class BinaryRowEncoder:
    """Text-protocol row values -> binary-protocol row packets for one result.

    ``prepared``/``bound``: the statement as prepared (with ``?``) and as run (values in
    place): a column MySQL names after its select-list text is named by the prepared text
    (``? + qty``, not ``1.5 + qty``)."""

    def __init__(self, prepared: str = "", bound: str = "") -> None:
        self.fields: list[Field] = []
        self.prepared, self.bound = prepared, bound

    def set_fields(self, fields: list[Field]) -> list[Field]:
        """Keep ``fields`` for encoding rows; returns them as the client is told them."""
        self.fields = fields
        return _named_as_prepared(fields, self.prepared, self.bound)

    def encode_row(self, row: tuple[bytes | None, ...]) -> bytes:
        bitmap = NullBitmap.new(len(row), offset=2)
        parts = []
        for i, v in enumerate(row):
            if v is None:
                bitmap.flip(i)
            else:
                parts.append(self._encode(self.fields[i], v))
        return b"\x00" + bytes(bitmap) + b"".join(parts)

    @staticmethod
    def _encode(f: Field, v: bytes) -> bytes:
        t = f.type
        u = f.unsigned
        if t == ColumnType.TINY:
            return struct.pack("<B" if u else "<b", int(v))
        if t in (ColumnType.SHORT, ColumnType.YEAR):
            return struct.pack("<H" if u else "<h", int(v))
        if t in (ColumnType.LONG, ColumnType.INT24):
            return struct.pack("<I" if u else "<i", int(v))
        if t == ColumnType.LONGLONG:
            return struct.pack("<Q" if u else "<q", int(v))
        if t == ColumnType.FLOAT:
            return struct.pack("<f", float(v))
        if t == ColumnType.DOUBLE:
            return struct.pack("<d", float(v))
        if t in (ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP):
            s = v.decode()
            date, _, time = s.partition(" ")
            y, mo, d = (int(x) for x in date.split("-"))
            if not time:
                return bytes((4,)) + struct.pack("<HBB", y, mo, d)
            hms, _, frac = time.partition(".")
            h, mi, sec = (int(x) for x in hms.split(":"))
            us = int(frac.ljust(6, "0")) if frac else 0
            return bytes((11,)) + struct.pack("<HBBBBBI", y, mo, d, h, mi, sec, us)
        if t == ColumnType.TIME:
            s = v.decode()
            neg = s.startswith("-")
            hms, _, frac = s.lstrip("-").partition(".")
            h, mi, sec = (int(x) for x in hms.split(":"))
            us = int(frac.ljust(6, "0")) if frac else 0
            return bytes((12,)) + struct.pack("<BIBBBI", neg, h // 24, h % 24, mi, sec, us)
        return uint_len(len(v)) + v


def names_items_by_parameters(prepared: str) -> bool:
    """Whether a column of ``prepared``'s result may be named after a select item holding a
    ``?`` (``? + qty``): its column definitions are then renamed (``_named_as_prepared``),
    so the shard's cannot be relayed as they are."""
    return first_keyword(prepared) == "select" and "?" in prepared[:_select_list_end(prepared)]


def _named_as_prepared(fields: list[Field], prepared: str, bound: str) -> list[Field]:
    if not prepared or not names_items_by_parameters(prepared):
        return fields
    texts = select_item_texts(prepared, len(fields))
    bound_texts = select_item_texts(bound, len(fields))
    if texts is None or bound_texts is None:
        return fields
    out = list(fields)
    for i, f in enumerate(fields):
        # a lone string parameter's column is named by its value ('lit'), not its text
        if texts[i] != bound_texts[i] and (f.name == bound_texts[i] or texts[i] == "?") and len(texts[i]) <= 256:
            out[i] = dataclasses.replace(f, name=texts[i])
    return out


def _select_list_end(sql: str) -> int:
    """Where the select list ends at the latest (its first FROM); the whole text if none."""
    at = sql.lower().find("from")
    return len(sql) if at < 0 else at
