"""The row-packet walk shared by the relay and the data source, on hand-built packets."""

from __future__ import annotations

from proxy.row_packets import MAX_PAYLOAD, Stop, long_row, scan


def packet(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


ROW_A = packet(1, b"\x01a")
ROW_B = packet(2, b"\x02bb")
EOF = packet(3, b"\xfe\x00\x00\x02\x00")


def test_rows_are_taken_up_to_the_eof_packet() -> None:
    buf = ROW_A + ROW_B + EOF
    starts: list[int] = []
    pos, stop = scan(buf, 0, starts)
    assert (pos, stop, starts) == (len(ROW_A + ROW_B), Stop.EOF, [0, len(ROW_A)])


def test_a_packet_not_fully_arrived_is_left_for_the_next_read() -> None:
    for cut in range(1, len(ROW_B)):
        starts: list[int] = []
        pos, stop = scan(ROW_A + ROW_B[:cut], 0, starts)
        assert (pos, stop, starts) == (len(ROW_A), Stop.MORE, [0])


def test_an_error_packet_stops_the_walk() -> None:
    error = packet(2, b"\xff\x25\x05#70100interrupted")
    starts: list[int] = []
    assert scan(ROW_A + error, 0, starts) == (len(ROW_A), Stop.ERROR)


def test_a_row_of_several_packets_is_found_whole_even_if_its_tail_looks_like_eof() -> None:
    head = packet(1, b"\xfe" + b"x" * (MAX_PAYLOAD - 1))
    tail = packet(2, b"\xfe\x00\x00\x02\x00")  # the row's last 5 bytes, shaped like an EOF
    buf = head + tail + EOF
    starts: list[int] = []
    pos, stop = scan(buf, 0, starts)
    assert (pos, stop) == (0, Stop.LONG_ROW)
    assert long_row(buf[: len(head) + 3], 0) is None
    assert long_row(buf, 0) == ([0, len(head)], len(head + tail))
    assert scan(buf, len(head + tail), starts) == (len(head + tail), Stop.EOF)
