"""Messages' rows encoded once when cached and framed per delivery (proxy/messaging/rows.py)."""

from __future__ import annotations

from proxy.engine.result import Result, split_packets
from proxy.messaging.rows import encode_columns, first_row_seq, frame
from proxy.wire import text_row


def test_rows_encoded_once_are_the_bytes_the_per_row_encoder_writes():
    columns = [[b"1", b"22", b"333"], [b"", b"x" * 250, b"7"], [b"{}", b"'", b"\xe2\x82\xac"]]
    assert encode_columns(columns) == [text_row(row) for row in zip(*columns, strict=True)]


def test_a_null_or_a_value_of_251_bytes_or_more_is_left_to_the_per_row_encoder():
    assert encode_columns([[b"1", None]]) is None
    assert encode_columns([[b"1", b"x" * 251]]) is None
    assert encode_columns([]) is None


def test_a_framed_delivery_numbers_its_packets_on_from_the_given_id_and_reads_back_as_its_rows():
    rows = [(str(i).encode(), b"{}") for i in range(300)]
    payloads = encode_columns([[r[0] for r in rows], [r[1] for r in rows]])
    assert payloads is not None
    block = frame(payloads, first_row_seq(3) + 250)  # past 255: the ids wrap
    assert (block.count, block.first_seq) == (300, 0)
    assert split_packets(block.data) == payloads
    seqs, pos = [], 0
    while pos < len(block.data):
        seqs.append(block.data[pos + 3])
        pos += 4 + int.from_bytes(block.data[pos : pos + 3], "little")
    assert seqs == [(256 + i) % 256 for i in range(300)]
    assert Result(block=block).rows == rows
