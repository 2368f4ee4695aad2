"""The inside of a shard's decoder process: decode the binlog, send the items home in frames.

Decoding the binlog is CPU work in Python (the library parses every event byte by byte), so
each shard's decoder gets a process of its own, as each Vitess tablet runs its own
vstreamer: shards decode in parallel on separate cores, and the proxy's event loop never
waits for a decoder to hand back the GIL (in one process, a reader thread woken by the
shard's bytes often waited a whole switch interval, or for the loop, before it could run).

The process talks to its ``ShardBinlogReader`` over one end of a socket pair, in frames:
an 8-byte little-endian length, then a pickled message:

* ``("items", [ShardTransaction | ShardHeartbeat, ...], stats)``: a batch, in binlog order.
  Items are held back only while more binlog is already buffered (up to ``BATCH_ITEMS``),
  so an idle shard's transaction leaves at once and a busy shard's go in batches.
* ``("log", fields)``: a log record of this process, re-emitted by the proxy's logging.
* ``("end", error | None, stats)``: the stream ended; nothing follows.

Backpressure is the socket's: when the proxy stops reading (a held or slow consumer),
``sendall`` blocks, and the decoder stops reading the binlog.
"""

from __future__ import annotations

import logging
import pickle
import socket

from proxy.cdc.binlog_decoder import (
    BinlogDecoder,
    DecoderSpec,
    DecoderStats,
    ShardItem,
    SinkClosed,
)
from proxy.cdc.errors import ShardStreamError

BATCH_ITEMS = 64
FRAME_HEADER = 8
ITEMS, LOG, END = "items", "log", "end"

StatsTuple = tuple[int, int, int, int, int]


def stats_tuple(stats: DecoderStats) -> StatsTuple:
    return (
        stats.connections,
        stats.transactions,
        stats.heartbeats,
        stats.duplicates_skipped,
        stats.partial_transactions_discarded,
    )


def encode_frame(message: tuple) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return len(payload).to_bytes(FRAME_HEADER, "little") + payload


class FrameSink:
    """A ``DecodedSink`` writing frames to the proxy's end of the socket pair."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._items: list[ShardItem] = []
        self._stats = DecoderStats()
        self.closed = False

    def put(self, item: ShardItem, stats: DecoderStats) -> None:
        self._items.append(item)
        self._stats = stats
        if len(self._items) >= BATCH_ITEMS:
            self._flush()

    def idle(self) -> None:
        if self._items:
            self._flush()

    def finish(self, error: ShardStreamError | None, stats: DecoderStats) -> None:
        self._stats = stats
        if self._items:
            self._flush()
        self._send((END, error, stats_tuple(stats)))

    def log(self, fields: dict[str, object]) -> None:
        self._send((LOG, fields))

    def _flush(self) -> None:
        items, self._items = self._items, []
        self._send((ITEMS, items, stats_tuple(self._stats)))

    def _send(self, message: tuple) -> None:
        if self.closed:
            raise SinkClosed
        try:
            self._sock.sendall(encode_frame(message))
        except OSError as exc:  # the proxy closed its end: the stream was closed
            self.closed = True
            raise SinkClosed from exc


_RECORD_BUILTINS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def portable_record(record: logging.LogRecord) -> dict[str, object]:
    """A record's fields as plain values: the message already formatted, the traceback as
    text, and the structured ``extra`` fields that are simple values."""
    fields: dict[str, object] = {
        "name": record.name,
        "levelno": record.levelno,
        "levelname": record.levelname,
        "msg": record.getMessage(),
        "pathname": record.pathname,
        "lineno": record.lineno,
        "funcName": record.funcName,
        "created": record.created,
        "process": record.process,
        "processName": record.processName,
    }
    if record.exc_info:
        fields["exc_text"] = logging.Formatter().formatException(record.exc_info)
    elif record.exc_text:
        fields["exc_text"] = record.exc_text
    for key, value in record.__dict__.items():
        if key not in _RECORD_BUILTINS and isinstance(value, str | int | float | bool | None):
            fields[key] = value
    return fields


class _ForwardingHandler(logging.Handler):
    def __init__(self, sink: FrameSink) -> None:
        super().__init__()
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        if self._sink.closed:
            return  # the proxy closed the stream: nobody is left to read the record
        try:
            self._sink.log(portable_record(record))
        except SinkClosed:
            return  # as above: the proxy went away while we were sending it


def run_decoder(spec: DecoderSpec, sock: socket.socket, log_level: int) -> None:
    """The process's target: decode ``spec``'s binlog into ``sock`` until either ends."""
    sink = FrameSink(sock)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(_ForwardingHandler(sink))
    root.setLevel(log_level)
    try:
        BinlogDecoder(spec, sink).run()
    except SinkClosed:
        return
    finally:
        sock.close()
