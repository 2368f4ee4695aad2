"""MySQL text-protocol row packets -> Arrow record batches, with no Python object per value.

A driver hands each row over as a tuple of Python values: about a microsecond per row before
Arrow sees them, most of what a shard read costs the Python worker. Here the data source reads
the row packets off the socket itself. The only Python loop is over packet headers (to find
where each row starts and where the result ends); numpy then cuts a whole block of rows into
columns, one column at a time across all rows:

* a value is a length-encoded string: a prefix byte (< 0xFB: the length; 0xFB: NULL;
  0xFC/0xFD/0xFE: a 2/3/8-byte length follows) then the bytes, so the start of column c+1
  in every row is computed from column c's prefixes in one vectorised step;
* the values' (start, end) pairs, interleaved, are the offsets of one Arrow binary array over
  the block's bytes, zero-copy: even elements are the values, odd ones the headers and
  prefixes between them; ``take`` of every column's elements copies them out contiguously;
* each column is then parsed by one Arrow cast to its type, which is exact for DECIMAL.

A row longer than one packet (16 MiB) arrives as several; its payloads are joined and it is
decoded as a block of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pymysql

from proxy import pymysql_internals, row_packets
from proxy.errors import CR_SERVER_LOST
from proxy.row_packets import Stop
from proxy.spark.column_types import ColumnSpec

READ_SIZE = 1024 * 1024


class RowDecodeError(pymysql.err.InternalError):
    """The row packets do not have the shape of the columns they were read for."""


class TextRowDecoder:
    """Decodes blocks of text-protocol row packets of `columns` into Arrow record batches."""

    def __init__(self, columns: Sequence[ColumnSpec]) -> None:
        self.columns = list(columns)
        self.schema = pa.schema([pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in self.columns])

    def decode(self, block: bytes, starts: Sequence[int]) -> pa.RecordBatch:
        """``block``: whole row packets; ``starts``: the offset of each one (of its header)."""
        n_rows, n_cols = len(starts), len(self.columns)
        if not n_rows:
            return pa.RecordBatch.from_arrays([pa.array([], type=c.arrow_type) for c in self.columns], schema=self.schema)
        data = np.frombuffer(block, dtype=np.uint8)
        first = np.asarray(starts, dtype=np.int64) + 4  # payloads
        row_ends = np.empty(n_rows, dtype=np.int64)
        row_ends[:-1] = first[1:] - 4
        row_ends[-1] = len(block)
        bounds = np.empty((n_rows, n_cols, 2), dtype=np.int64)
        nulls = np.zeros((n_rows, n_cols), dtype=bool)
        pos = first
        try:
            for c in range(n_cols):
                value_start, value_end, null = _column_bounds(data, pos)
                bounds[:, c, 0] = value_start
                bounds[:, c, 1] = value_end
                if null is not None:
                    nulls[:, c] = null
                pos = value_end
        except IndexError as exc:
            raise RowDecodeError(f"a row is shorter than its {n_cols} columns") from exc
        if not np.array_equal(pos, row_ends):
            raise RowDecodeError(f"a row does not hold exactly {n_cols} columns")
        values = _interleaved_binary(block, bounds, nulls)
        stride = 2 * n_cols
        arrays = []
        for c, spec in enumerate(self.columns):
            raw = values.take(pa.array(np.arange(2 * c, stride * n_rows, stride)))
            arrays.append(column_array(spec, raw.cast(raw_type(spec.arrow_type))))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def raw_type(target: pa.DataType) -> pa.DataType:
    """The Arrow type a column's raw wire text is first loaded as, before its cast to `target`.

    Arrow casts binary straight to numbers and decimals (no UTF-8 check needed); dates and
    times parse only from strings."""
    if pa.types.is_string(target) or pa.types.is_timestamp(target) or pa.types.is_date32(target):
        return pa.string()
    return pa.binary()


def column_array(spec: ColumnSpec, raw: pa.Array) -> pa.Array:
    target = spec.arrow_type
    if raw.type == target:
        return raw
    if pa.types.is_timestamp(target) or pa.types.is_date32(target):
        # MySQL's zero date (allowed outside strict mode) has no Spark value: read it as NULL,
        # as Connector/J does with zeroDateTimeBehavior=convertToNull.
        raw = pc.if_else(pc.starts_with(raw, "0000-00-00"), pa.scalar(None, pa.string()), raw)
    return raw.cast(target)


def _column_bounds(data: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(value start, value end, is-NULL or None) of the length-encoded strings at ``pos``."""
    prefix = data[pos]
    if int(prefix.max()) < 0xFB:  # every value shorter than 251 bytes: the common case
        start = pos + 1
        return start, start + prefix, None
    length = prefix.astype(np.int64)
    start = pos + 1
    null = prefix == 0xFB
    length[null] = 0
    for marker, width in ((0xFC, 2), (0xFD, 3), (0xFE, 8)):
        rows = np.flatnonzero(prefix == marker)
        if rows.size:
            at = pos[rows] + 1
            n = np.zeros(rows.size, dtype=np.int64)
            for i in range(width):
                n |= data[at + i].astype(np.int64) << (8 * i)
            length[rows] = n
            start[rows] += width
    return start, start + length, null if null.any() else None


def _interleaved_binary(block: bytes, bounds: np.ndarray, nulls: np.ndarray) -> pa.Array:
    """One binary array over ``block``: element 2k is value k (row-major), 2k+1 the bytes
    between value k and value k+1."""
    offsets = bounds.reshape(-1).astype(np.int32)
    count = len(offsets) - 1
    validity = None
    if nulls.any():
        valid = np.ones(count, dtype=bool)
        valid[0::2] = ~nulls.reshape(-1)
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), count, [validity, pa.py_buffer(offsets), pa.py_buffer(block)])


def read_row_blocks(rfile: Any, block_rows: int) -> Iterator[tuple[bytes, list[int]]]:
    """The row packets waiting on ``rfile`` (a result's column definitions already read), in
    blocks of about ``block_rows`` rows: (the packets' bytes, each packet's offset in them).
    Ends after the result's EOF packet; an error packet is raised as the server's error."""
    buf = bytearray()
    starts: list[int] = []
    pos = 0
    while True:
        chunk = rfile.read1(READ_SIZE)
        if not chunk:
            raise pymysql.err.OperationalError(CR_SERVER_LOST, "Lost connection to MySQL server during query")
        buf += chunk
        while True:
            pos, stop = row_packets.scan(buf, pos, starts)
            if stop is Stop.EOF:
                if starts:
                    yield bytes(buf[:pos]), starts
                return
            if stop is Stop.ERROR:
                pymysql.err.raise_mysql_exception(bytes(buf[pos + 4 : pos + 4 + row_packets.payload_length(buf, pos)]))
            if stop is Stop.LONG_ROW:
                joined = row_packets.long_row(buf, pos)
                if joined is not None:
                    # Hand over the rows before it, then the row alone with its payloads joined
                    # (decode wants each row contiguous).
                    packets, end = joined
                    payload = b"".join(buf[p + 4 : p + 4 + row_packets.payload_length(buf, p)] for p in packets)
                    if starts:
                        yield bytes(buf[:pos]), starts
                    yield b"\0\0\0\0" + payload, [0]
                    del buf[:end]
                    pos = 0
                    starts = []
                    continue
            break  # more bytes needed
        if len(starts) >= block_rows:
            yield bytes(buf[:pos]), starts
            del buf[:pos]
            pos = 0
            starts = []


def query_record_batches(conn: pymysql.Connection, sql: str, columns: Sequence[ColumnSpec], block_rows: int) -> Iterator[pa.RecordBatch]:
    """Runs ``sql`` (selecting exactly ``columns``) on a PyMySQL connection and yields its rows
    as record batches, read straight off the connection's socket."""
    decoder = TextRowDecoder(columns)
    conn.query(sql, unbuffered=True)
    result = pymysql_internals.unbuffered_result(conn)
    if result is None or not result.unbuffered_active:
        return  # not a result set (an OK packet): no rows
    if result.field_count != len(columns):
        raise RowDecodeError(f"the query returned {result.field_count} columns, expected {len(columns)}")
    # PyMySQL read the column definitions; the rows are ours. Its buffered reader may already
    # hold some of them, so read through it rather than the raw socket.
    try:
        for block, starts in read_row_blocks(pymysql_internals.buffered_reader(conn), block_rows):
            yield decoder.decode(block, starts)
    finally:
        # The rows are consumed (or abandoned, and the caller closes the connection): PyMySQL
        # must not try to read them again.
        result.unbuffered_active = False
