"""Messages' rows in the text protocol: encoded once when cached, framed once per delivery.

A message cached from an INSERT's values (``proxy.messaging.inserted``) gets its row's
text-protocol payload there, for the whole INSERT at once (``encode_columns``: per column,
length byte + value, then the columns joined per row by one ``map``). A
delivery of such messages then reaches its subscriber's connection as one ``PacketBlock``
(``frame``): the connection appends it to its buffer as it stands when the block's first
sequence id is the one it would write next (``ProxyConnection._write_rows``), which the
subscription knows (``first_row_seq``). Before, each delivered row was encoded
(``wire.text_row``) and framed (``write_many``) one at a time: 50 rows of bench_messaging's
took 56-62 us of proxy CPU, against 12-15 us to encode them at commit and 6-15 us to frame
them (micro, same process and load, BENCHMARKS.md msgproxy). A block whose sequence ids do
not line up (a client that asked for CLIENT_DEPRECATE_EOF, a STREAM behind other results)
is split and framed again by the connection: slower, never wrong. The streamed values carry nothing per delivery (Vitess
streams the row's columns only), so one encoding serves every delivery of a message.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from proxy.engine.result import PacketBlock

# A value shorter than 251 bytes is written after one length byte; longer ones and NULL
# (rare in a message's columns) are left to the per-row encoder at send time.
_SHORT = 251
_LENGTH_BYTE = [bytes((n,)) for n in range(_SHORT)]
_HEADER = struct.Struct("<I").pack


def encode_columns(columns: Sequence[Sequence[bytes | None]]) -> list[bytes] | None:
    """Per row, the text-protocol payload of its values (given column by column, every
    column as long); None when some value is NULL or 251 bytes or longer."""
    if not columns or not columns[0]:
        return None
    try:
        # A NULL fails len(), a long value the length table: either is the rare case.
        prefixed = [[_LENGTH_BYTE[len(v)] + v for v in values] for values in columns]  # type: ignore[arg-type,operator]
    except (TypeError, IndexError):
        return None
    return list(map(b"".join, zip(*prefixed, strict=True)))


def first_row_seq(fields: int) -> int:
    """The sequence id of a result's first row packet after the header the proxy writes for
    ``fields`` columns: the column count (1), the definitions, the EOF (the proxy does not
    offer CLIENT_DEPRECATE_EOF)."""
    return (fields + 3) & 0xFF


def frame(payloads: list[bytes], first_seq: int) -> PacketBlock:
    """The row packets of ``payloads`` (each shorter than 251 x the columns, far below a
    packet's 16 MiB), numbered from ``first_seq``."""
    data = b"".join([_HEADER(len(p) | (s & 0xFF) << 24) + p for s, p in enumerate(payloads, first_seq)])
    return PacketBlock(data, len(payloads), first_seq & 0xFF)
