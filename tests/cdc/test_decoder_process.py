"""The decoder process's side of the frame protocol, on a plain socket pair (no shard)."""

from __future__ import annotations

import logging
import pickle
import socket

import pytest

from proxy.cdc.binlog_decoder import DecoderStats, SinkClosed
from proxy.cdc.decoder_process import (
    BATCH_ITEMS,
    END,
    FRAME_HEADER,
    ITEMS,
    FrameSink,
    portable_record,
)
from proxy.cdc.errors import PositionPurgedError
from proxy.cdc.positions import GtidPosition
from proxy.cdc.transaction_assembler import ShardHeartbeat


def heartbeat(seq: int) -> ShardHeartbeat:
    return ShardHeartbeat(GtidPosition.parse(f"11-11-{seq}"), received_at=float(seq))


def read_frame(sock: socket.socket) -> tuple:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "socket closed mid-frame"
            data += chunk
        return data

    length = int.from_bytes(exactly(FRAME_HEADER), "little")
    return pickle.loads(exactly(length))


def nothing_to_read(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(1)
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)
    return False


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


def test_sink_holds_items_while_more_binlog_is_buffered(pair):
    proxy_end, decoder_end = pair
    sink = FrameSink(decoder_end)
    for seq in range(3):
        sink.put(heartbeat(seq), DecoderStats())
    assert nothing_to_read(proxy_end)
    sink.idle()
    kind, items, _stats = read_frame(proxy_end)
    assert kind == ITEMS
    assert [str(item.position) for item in items] == ["11-11-0", "11-11-1", "11-11-2"]


def test_sink_sends_a_full_batch_without_waiting_to_be_idle(pair):
    proxy_end, decoder_end = pair
    sink = FrameSink(decoder_end)
    for seq in range(BATCH_ITEMS):
        sink.put(heartbeat(seq), DecoderStats(connections=1, transactions=seq))
    kind, items, stats = read_frame(proxy_end)
    assert (kind, len(items)) == (ITEMS, BATCH_ITEMS)
    assert stats[:2] == (1, BATCH_ITEMS - 1)


def test_finish_sends_held_items_then_the_error_with_its_fields(pair):
    proxy_end, decoder_end = pair
    sink = FrameSink(decoder_end)
    sink.put(heartbeat(1), DecoderStats())
    error = PositionPurgedError("commerce", "-80", "11-11-1", "Could not find GTID state")
    sink.finish(error, DecoderStats(partial_transactions_discarded=2))
    assert read_frame(proxy_end)[0] == ITEMS
    kind, received, stats = read_frame(proxy_end)
    assert kind == END
    assert isinstance(received, PositionPurgedError)
    assert (received.keyspace, received.shard, received.position) == ("commerce", "-80", "11-11-1")
    assert str(received) == str(error)
    assert stats[4] == 2


def test_sink_reports_closed_once_the_proxy_end_is_gone(pair):
    proxy_end, decoder_end = pair
    sink = FrameSink(decoder_end)
    proxy_end.close()
    with pytest.raises(SinkClosed):
        sink.put(heartbeat(1), DecoderStats())
        sink.idle()
    assert sink.closed


def test_portable_record_carries_the_formatted_message_and_structured_fields():
    record = logging.getLogger("proxy.cdc.test").makeRecord(
        "proxy.cdc.test",
        logging.WARNING,
        __file__,
        1,
        "lost %s",
        ("link",),
        None,
        extra={"keyspace": "commerce", "shard": "-80", "opaque": object()},
    )
    fields = portable_record(record)
    rebuilt = logging.makeLogRecord(pickle.loads(pickle.dumps(fields)))
    assert rebuilt.getMessage() == "lost link"
    assert (rebuilt.levelno, rebuilt.name) == (logging.WARNING, "proxy.cdc.test")
    assert (rebuilt.keyspace, rebuilt.shard) == ("commerce", "-80")
    assert not hasattr(rebuilt, "opaque")
