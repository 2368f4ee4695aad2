"""A shard's text-protocol answer re-encoded as the answer to COM_STMT_EXECUTE.

The normal path runs a prepared statement as the SQL text with its parameters bound
(``proxy.prepared.bind_parameters``) and writes the result in the binary protocol: the
shard's column definitions as they are, each row re-encoded by ``BinaryRowEncoder``
from its text values (the column's type and UNSIGNED flag decide the encoding). The
fast path sends the same text to a shard link and converts the relayed packets here,
with the same encoder, so both paths answer byte for byte alike. OK, ERR and EOF
packets pass unchanged (the link has already set the EOF status flags).

Packets are renumbered as they go out: a row of 16 MiB or more is one payload over
several packets, and its binary form may need a different number of them.
"""

from __future__ import annotations

from proxy.engine.result import Field, decode_text_row
from proxy.fast_path.shard_link import lenenc
from proxy.pools import field_of
from proxy.prepared import BinaryRowEncoder

_MAX_PAYLOAD = 0xFFFFFF
_FIRST, _COLUMNS, _COLUMNS_EOF, _ROWS, _DONE = range(5)


class BinaryResult:
    """Converts one response, in the pieces a ``ShardLink`` relays (whole packets)."""

    __slots__ = ("_encoder", "_fields", "_columns", "_state", "_pending", "next_seq")

    def __init__(self) -> None:
        self._encoder = BinaryRowEncoder()
        self._fields: list[Field] = []
        self._columns = 0
        self._state = _FIRST
        self._pending = bytearray()  # a payload continued over packets of 2^24-1 bytes
        self.next_seq = 1  # the sequence id of the next packet written

    def convert(self, data: bytes | bytearray) -> bytes:
        """The client's packets for ``data`` (complete packets of the shard's response)."""
        out = bytearray()
        pos, end = 0, len(data)
        while pos < end:
            length = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            payload = data[pos + 4 : pos + 4 + length]
            pos += 4 + length
            if length == _MAX_PAYLOAD or self._pending:
                self._pending += payload
                if length == _MAX_PAYLOAD:
                    continue
                payload, self._pending = bytes(self._pending), bytearray()
            self._write(out, self._converted(bytes(payload)))
        return bytes(out)

    def _converted(self, p: bytes) -> bytes:
        state = self._state
        if state == _ROWS:
            if p[:1] == b"\xfe" and len(p) < 9 or p[:1] == b"\xff":
                self._state = _DONE  # EOF or ERR: the end
                return p
            return self._encoder.encode_row(decode_text_row(p))
        if state == _FIRST:
            if p[:1] in (b"\x00", b"\xff"):
                self._state = _DONE
            else:
                self._columns = lenenc(p, 0)[0]
                self._state = _COLUMNS
        elif state == _COLUMNS:
            self._fields.append(field_of(p, "utf-8"))
            if len(self._fields) == self._columns:
                self._encoder.set_fields(self._fields)
                self._state = _COLUMNS_EOF
        elif state == _COLUMNS_EOF:
            self._state = _ROWS
        return p

    def _write(self, out: bytearray, payload: bytes) -> None:
        seq = self.next_seq
        start = 0
        while True:
            chunk = payload[start : start + _MAX_PAYLOAD]
            out += len(chunk).to_bytes(3, "little") + bytes((seq,)) + chunk
            seq = (seq + 1) & 0xFF
            start += _MAX_PAYLOAD
            if len(chunk) < _MAX_PAYLOAD:
                break
        self.next_seq = seq
