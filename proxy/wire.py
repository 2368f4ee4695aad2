"""MySQL packet payloads the proxy writes, built from engine ``Field``/``Row`` values.

mysql-mimic's own builders take its ``ResultColumn`` and Python values; the proxy
forwards shard metadata and text values untouched, so it builds these payloads
itself (with mimic's primitive encoders).
"""

from __future__ import annotations

from mysql_mimic.types import Capabilities, str_len, uint_1, uint_2, uint_4, uint_len

from proxy.engine.result import Field, Row

_DEF = str_len(b"def")
_NULL = b"\xfb"


def column_definition(f: Field) -> bytes:
    if f.raw:
        return f.raw
    return b"".join(
        (
            _DEF,
            str_len(f.db.encode()),
            str_len(f.table.encode()),
            str_len((f.org_table or f.table).encode()),
            str_len(f.name.encode()),
            str_len((f.org_name or f.name).encode()),
            b"\x0c",
            uint_2(f.charset),
            uint_4(f.length),
            uint_1(f.type),
            uint_2(f.flags),
            uint_1(f.decimals),
            b"\x00\x00",
        )
    )


def text_row(row: Row) -> bytes:
    parts = []
    for v in row:
        if v is None:
            parts.append(_NULL)
        else:
            n = len(v)
            parts.append(bytes((n,)) if n < 251 else uint_len(n))
            parts.append(v)
    return b"".join(parts)


def ok_packet(
    capabilities: int,
    status: int,
    affected_rows: int = 0,
    insert_id: int = 0,
    warnings: int = 0,
    info: str = "",
    eof_header: bool = False,
) -> bytes:
    parts = [b"\xfe" if eof_header else b"\x00", uint_len(affected_rows), uint_len(insert_id)]
    if capabilities & Capabilities.CLIENT_PROTOCOL_41:
        parts.append(uint_2(status))
        parts.append(uint_2(warnings))
    if info:
        parts.append(info.encode())
    return b"".join(parts)


def eof_packet(status: int, warnings: int = 0) -> bytes:
    return b"\xfe" + uint_2(warnings) + uint_2(status)


def error_packet(code: int, sqlstate: str, message: str) -> bytes:
    return b"\xff" + uint_2(code) + b"#" + sqlstate.encode()[:5].ljust(5, b"0") + message.encode(
        "utf-8", "replace"
    )
