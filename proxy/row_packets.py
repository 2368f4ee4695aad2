"""Walking a result's row packets in a buffer: where each packet starts and what ends them.

Relaying a shard's scan (``pools``) and cutting rows into Arrow columns (``spark.text_rows``)
both do this for every row, so it is the one per-row Python loop on those paths and is kept
to one C call per packet (its length and first payload byte together) and nothing else in
the common case. A packet that is not a plain row stops the walk and is named:

* EOF: payload shorter than 9 bytes starting 0xFE (a row cannot: a 0xFE length prefix means
  a value of 16 MiB or more);
* ERROR: payload starting 0xFF (never a row's first byte);
* LONG_ROW: a full 16 MiB packet, continued by the packets after it (``long_row``).
"""

from __future__ import annotations

import struct
from enum import Enum

MAX_PAYLOAD = 0xFFFFFF

# A packet's 4-byte header (3-byte length, sequence id) and the first byte of its payload.
_HEADER_AND_FIRST = struct.Struct("<IB").unpack_from


class Stop(Enum):
    MORE = "more"  # the next packet has not fully arrived
    EOF = "eof"
    ERROR = "error"
    LONG_ROW = "long_row"


def scan(buf: bytes | bytearray, pos: int, starts: list[int]) -> tuple[int, Stop]:
    """Walk the complete row packets of ``buf`` from ``pos``, appending each one's offset to
    ``starts``; returns the offset of the first packet not taken and why the walk stopped."""
    append = starts.append
    unpack = _HEADER_AND_FIRST
    size = len(buf)
    last = size - 5
    while True:
        while pos <= last:
            word, first = unpack(buf, pos)
            n = word & MAX_PAYLOAD
            if first >= 0xFE or n == MAX_PAYLOAD:
                break
            append(pos)
            pos += 4 + n
        else:
            if pos > size:  # the last packet taken has not fully arrived: give it back
                pos = starts.pop()
            return pos, Stop.MORE
        if pos + 4 + n > size:
            return pos, Stop.MORE
        if n == MAX_PAYLOAD:
            return pos, Stop.LONG_ROW
        if first == 0xFE and n < 9:
            return pos, Stop.EOF
        if first == 0xFF:
            return pos, Stop.ERROR
        append(pos)  # a row whose first value is 16 MiB or longer (in several packets)
        pos += 4 + n


def payload_length(buf: bytes | bytearray, pos: int) -> int:
    return buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16


def long_row(buf: bytes | bytearray, pos: int) -> tuple[list[int], int] | None:
    """The packets of the row at ``pos`` that spans several (full 16 MiB packets up to one that
    is not), and where it ends; None while not all of them have arrived."""
    packets = []
    size = len(buf)
    while pos + 4 <= size:
        n = payload_length(buf, pos)
        if pos + 4 + n > size:
            return None
        packets.append(pos)
        pos += 4 + n
        if n < MAX_PAYLOAD:
            return packets, pos
    return None
