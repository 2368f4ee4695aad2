"""Row packets -> Arrow, specified on hand-built MySQL text-protocol bytes (no Spark, no server)."""

from __future__ import annotations

import io
from datetime import datetime
from decimal import Decimal

import pyarrow as pa
import pymysql
import pytest

from proxy.spark.column_types import ColumnSpec, arrow_type_of
from proxy.spark.text_rows import RowDecodeError, TextRowDecoder, read_row_blocks

EOF_PACKET = b"\xfe\x00\x00\x02\x00"


def column(name: str, mysql_type: str) -> ColumnSpec:
    return ColumnSpec(name, mysql_type, True, arrow_type_of(mysql_type))


def lenenc(value: bytes | None) -> bytes:
    if value is None:
        return b"\xfb"
    n = len(value)
    if n < 251:
        return bytes([n]) + value
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little") + value
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little") + value
    return b"\xfe" + n.to_bytes(8, "little") + value


def packets(payloads: list[bytes]) -> bytes:
    out = bytearray()
    for seq, payload in enumerate(payloads):
        while True:  # payloads of 16 MiB or more continue in the next packet
            part, payload = payload[:0xFFFFFF], payload[0xFFFFFF:]
            out += len(part).to_bytes(3, "little") + bytes([seq % 256]) + part
            if len(part) < 0xFFFFFF:
                break
    return bytes(out)


def row(*values: bytes | None) -> bytes:
    return b"".join(lenenc(v) for v in values)


class Trickle(io.RawIOBase):
    """A socket-like reader that returns at most `size` bytes per read."""

    def __init__(self, data: bytes, size: int) -> None:
        self.data, self.size = data, size

    def read1(self, n: int = -1) -> bytes:
        chunk, self.data = self.data[: self.size], self.data[self.size :]
        return chunk


def decode_all(columns: list[ColumnSpec], rows: list[bytes], block_rows: int = 1000, chunk: int = 1 << 20) -> pa.Table:
    stream = Trickle(packets([*rows, EOF_PACKET]), chunk)
    decoder = TextRowDecoder(columns)
    batches = [decoder.decode(block, starts) for block, starts in read_row_blocks(stream, block_rows)]
    return pa.Table.from_batches(batches, schema=decoder.schema)


def test_columns_are_parsed_to_their_types_with_nulls_kept() -> None:
    columns = [column("id", "bigint(20)"), column("name", "varchar(10)"), column("amount", "decimal(12,2)"),
               column("at", "datetime(6)"), column("raw", "varbinary(8)")]
    table = decode_all(columns, [
        row(b"1", b"ann", b"10.25", b"2026-11-22 10:00:00.000001", b"\x00\xff"),
        row(b"-2", None, None, None, None),
        row(b"3", b"", b"0.00", b"0000-00-00 00:00:00", b""),
    ])
    assert table.to_pylist() == [
        {"id": 1, "name": "ann", "amount": Decimal("10.25"), "at": datetime(2026, 11, 22, 10, 0, 0, 1), "raw": b"\x00\xff"},
        {"id": -2, "name": None, "amount": None, "at": None, "raw": None},
        # MySQL's zero date has no Spark value: NULL, as Connector/J's convertToNull.
        {"id": 3, "name": "", "amount": Decimal("0.00"), "at": None, "raw": b""},
    ]


def test_values_with_two_and_three_byte_lengths_are_cut_exactly() -> None:
    columns = [column("a", "text"), column("b", "blob"), column("n", "int(11)")]
    table = decode_all(columns, [row(b"x" * 300, b"y" * 70_000, b"7"), row(b"s", None, b"8")])
    assert [len(v) for v in table.column("a").to_pylist()] == [300, 1]
    assert table.column("b").to_pylist() == [b"y" * 70_000, None]
    assert table.column("n").to_pylist() == [7, 8]


def test_rows_are_handed_over_in_blocks_and_packets_split_across_reads_are_joined() -> None:
    columns = [column("id", "int(11)"), column("label", "varchar(20)")]
    stream = Trickle(packets([*(row(str(i).encode(), b"label-%d" % i) for i in range(25)), EOF_PACKET]), 7)
    blocks = list(read_row_blocks(stream, 10))
    assert [len(starts) for _, starts in blocks] == [10, 10, 5]
    decoder = TextRowDecoder(columns)
    ids = [v for block, starts in blocks for v in decoder.decode(block, starts).column("id").to_pylist()]
    assert ids == list(range(25))


def test_a_row_longer_than_one_packet_is_joined_and_decoded() -> None:
    columns = [column("id", "int(11)"), column("body", "longblob")]
    big = b"z" * (0xFFFFFF + 100)
    table = decode_all(columns, [row(b"1", b"a"), row(b"2", big), row(b"3", b"c")])
    assert table.column("id").to_pylist() == [1, 2, 3]
    assert [len(v) for v in table.column("body").to_pylist()] == [1, len(big), 1]


def test_an_error_packet_is_raised_as_the_server_error() -> None:
    error = b"\xff" + (1317).to_bytes(2, "little") + b"#70100Query execution was interrupted"
    stream = Trickle(packets([row(b"1"), error]), 1 << 20)
    with pytest.raises(pymysql.err.OperationalError) as raised:
        list(read_row_blocks(stream, 1000))
    assert raised.value.args[0] == 1317


def test_a_connection_closed_mid_result_is_a_lost_connection() -> None:
    stream = Trickle(packets([row(b"1")]), 1 << 20)
    with pytest.raises(pymysql.err.OperationalError) as raised:
        list(read_row_blocks(stream, 1000))
    assert raised.value.args[0] == 2013


def test_rows_that_do_not_match_the_columns_are_refused() -> None:
    columns = [column("a", "int(11)"), column("b", "int(11)")]
    with pytest.raises(RowDecodeError):
        decode_all(columns, [row(b"1", b"2"), row(b"3")])
    with pytest.raises(RowDecodeError):
        decode_all(columns, [row(b"1", b"2", b"3")])
