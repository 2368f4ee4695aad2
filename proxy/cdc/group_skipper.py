"""Binlog event groups that carry nothing a decoder wants, dropped before the library parses them.

A decoder reading only some row changes (``row_ops``: the messaging change watch reads only
inserts) still receives every event of the shard's binlog: on a message table most
transactions are the claims and acks, ``GTID, TABLE_MAP, UPDATE_ROWS, XID``, each event of
which python-mysql-replication turned into objects (a packet wrapper, an event, the
assembler's bookkeeping) only for the transaction to be dropped at its end. This filter sits
under the library, between the connection's packets and the library: it looks at each event's
type byte (and a GTID event's 13 bytes of body) and drops a plain transaction whose row events
are all of unwanted kinds, telling the assembler its GTID so the position still moves past
it, exactly as when the assembler dropped it itself. Any other group (an XA branch, a DDL,
a statement-based one, a wanted row event anywhere in it) goes to the library whole, as before.

With an ``own_mark`` (messaging's binlog watch, ``proxy.messaging.own_mark``) the row events of
a statement whose ``ANNOTATE_ROWS`` text holds the mark count as unwanted too, up to that
statement's last row event (``STMT_END_F``): a transaction of the proxy's own INSERTs is
dropped whole; one that also holds another statement's insert goes to the library without
the marked rows (its consumer only needs to know the table got rows it did not write).

In ``bench_messaging`` (binlog watch on, 2 shards) a shard's binlog held 674 transactions per
10,000 of its messages, all plain groups: 200 INSERTs, the rest claims and acks. Dropping those
here cut the decoders' CPU per message 28% offline (3.14 -> 2.25 µs, same binlog) and 10-26% per
transaction live (BENCHMARKS.md, branch ``msgdeliver``).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from typing import Protocol

from proxy.cdc.positions import Gtid
from proxy.cdc.xa_branches import FL_COMPLETED_XA, FL_PREPARED_XA, FL_STANDALONE

# Event type codes (MySQL's and MariaDB's binlog format).
XID_EVENT = 16
TABLE_MAP_EVENT = 19
ANNOTATE_ROWS_EVENT = 160
MARIADB_GTID_EVENT = 162
ROW_EVENT_TYPES = {
    "insert": frozenset({23, 30}),  # WRITE_ROWS v1, v2
    "update": frozenset({24, 31}),
    "delete": frozenset({25, 32}),
}
_ROW_KINDS = frozenset().union(*ROW_EVENT_TYPES.values())

# A binlog packet as PyMySQL reads it: 0x00 (OK), then the event header: timestamp (4),
# type (1), server_id (4), size (4), next position (4), flags (2); then the body.
_TYPE_AT = 5
_HEADER_END = 20
# A row event's post-header: table id (6), flags (2); STMT_END_F marks its statement's last.
_ROW_FLAGS = _HEADER_END + 6
_STMT_END_F = 0x01
# A MariaDB GTID event's body: seq_no (8), domain_id (4), flags2 (1).
_GTID_BODY = struct.Struct("<QIB")
_SERVER_ID = struct.Struct("<I")
# MariaDB's FL_DDL: a DDL's group (standalone as well, as a rule); any flagged group goes whole.
_FL_DDL = 0x20
_NOT_PLAIN = FL_STANDALONE | _FL_DDL | FL_PREPARED_XA | FL_COMPLETED_XA


class Packet(Protocol):
    """``pymysql.protocol.MysqlPacket``."""

    def get_all_data(self) -> bytes: ...


class Buffered(Protocol):
    """``proxy.cdc.socket_reader.BufferedSocketReader``."""

    @property
    def buffered(self) -> int: ...


def plain_gtid(data: bytes) -> Gtid | None:
    """The GTID of a MariaDB GTID event packet opening a plain transaction (None for any other
    packet, or a GTID opening a DDL or an XA group)."""
    if len(data) < _HEADER_END + _GTID_BODY.size or data[0] != 0 or data[_TYPE_AT] != MARIADB_GTID_EVENT:
        return None
    seq_no, domain_id, flags = _GTID_BODY.unpack_from(data, _HEADER_END)
    if flags & _NOT_PLAIN:
        return None
    return Gtid(domain_id, _SERVER_ID.unpack_from(data, 6)[0], seq_no)


class GroupSkipper:
    """Wraps a binlog connection's ``_read_packet``: transactions made only of ``unwanted``
    row events never reach the library; ``on_skipped(gtid)`` is told of each instead.
    ``before_wait()`` runs whenever the next read would wait for the shard (the decoder sends
    what it holds: a skipped group must not keep an earlier transaction waiting)."""

    def __init__(
        self,
        read_packet: Callable[[], Packet],
        reader: Buffered,
        unwanted: frozenset[int],
        on_skipped: Callable[[Gtid], None],
        before_wait: Callable[[], None],
        own_mark: bytes = b"",
    ) -> None:
        """``own_mark``: the row events of a statement whose ``ANNOTATE_ROWS`` text holds it
        are dropped as unwanted ones are (the messaging watch's own inserts, which the proxy
        caches or polls itself: ``proxy.messaging.own_mark``)."""
        self._read = read_packet
        self._reader = reader
        self._unwanted = unwanted
        self._on_skipped = on_skipped
        self._before_wait = before_wait
        self._own_mark = own_mark
        self._queue: deque[Packet] = deque()
        self.skipped = 0
        self.own_skipped = 0  # groups dropped because all their wanted rows were marked own

    @property
    def pending(self) -> bool:
        """Packets read and not handed out yet (the next read returns at once)."""
        return bool(self._queue)

    def _next(self) -> Packet:
        if self._reader.buffered == 0:
            self._before_wait()
        return self._read()

    def read_packet(self) -> Packet:
        if self._queue:
            return self._queue.popleft()
        while True:
            first = self._next()
            gtid = plain_gtid(first.get_all_data())
            if gtid is None:
                return first
            held: list[Packet] = [first]
            own = dropped_own = False
            mark = self._own_mark
            while True:
                packet = self._next()
                data = packet.get_all_data()
                kind = data[_TYPE_AT] if len(data) > _TYPE_AT and data[0] == 0 else -1
                if kind == TABLE_MAP_EVENT:
                    held.append(packet)  # the library needs them if a wanted event follows
                elif kind == ANNOTATE_ROWS_EVENT:
                    # The statement text the following row events came from (until the next
                    # annotate): its rows are ours if it carries our mark.
                    own = bool(mark) and data.find(mark, _HEADER_END) >= 0
                    held.append(packet)
                elif kind in self._unwanted or (own and kind in _ROW_KINDS):
                    # Unwanted: the library would parse it and drop it. Under our own mark: the
                    # rows of the proxy's own INSERT, which it caches or polls itself.
                    if own:
                        dropped_own = dropped_own or kind not in self._unwanted
                        # The mark covers its statement only: a statement logged without an
                        # annotate (binlog_annotate_row_events off) must not inherit it.
                        own = not (len(data) > _ROW_FLAGS + 1 and data[_ROW_FLAGS] & _STMT_END_F)
                    continue
                elif kind == XID_EVENT:
                    held = []  # the whole group was unwanted: consumed for the position only
                    break
                else:  # a wanted row event, a statement, anything unexpected: as before
                    held.append(packet)
                    break
            if held:
                self._queue.extend(held[1:])
                return held[0]
            self.skipped += 1
            self.own_skipped += dropped_own
            self._on_skipped(gtid)
