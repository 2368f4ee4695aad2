"""XA transactions as MariaDB writes them to the binlog, and the branches CDC holds.

What MariaDB (10.5+, checked on 10.11 with ``SHOW BINLOG EVENTS`` and the events
python-mysql-replication delivers) writes for an XA transaction:

* ``XA PREPARE`` ends an event group of its own: a GTID event flagged ``FL_PREPARED_XA``
  (its xid in the event; ``SHOW BINLOG EVENTS`` prints it as ``XA START <xid> GTID d-s-n``),
  the TABLE_MAP/ROWS events, a QUERY ``XA END <xid>`` and an ``XA_PREPARE_LOG_EVENT``
  (``XAPrepareEvent``, one_phase false).
* ``XA COMMIT <xid>`` and ``XA ROLLBACK <xid>`` of a prepared branch are a later, separate
  group: a GTID event flagged ``FL_COMPLETED_XA | FL_STANDALONE`` and one QUERY with that
  statement. Whoever runs them (the coordinator, a resolver after a crash, an operator),
  and however long after, the group looks the same.
* ``XA COMMIT ... ONE PHASE`` is an ordinary transaction (``BEGIN`` GTID, rows, XID): it
  needs nothing special. A branch that changed no row writes nothing at all.

MariaDB prints an xid in those statements as ``X'<gtrid hex>',X'<bqual hex>',<formatID>``
whatever spelling the client used; ``Xid`` is that form parsed, so the prepare event's raw
xid and the completing statement's text meet as equal keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pymysqlreplication.event import XAPrepareEvent

from proxy.cdc.events import Field, RowEvent
from proxy.cdc.positions import Gtid

# MariaDB GTID event flags (sql/log_event.h, Gtid_log_event).
FL_STANDALONE = 0x01
FL_PREPARED_XA = 0x40
FL_COMPLETED_XA = 0x80

_XID = r"X'(?P<gtrid>[0-9A-Fa-f]*)',X'(?P<bqual>[0-9A-Fa-f]*)',(?P<fmt>-?\d+)"
_COMPLETION = re.compile(rf"^\s*XA\s+(?P<verb>COMMIT|ROLLBACK)\s+{_XID}", re.IGNORECASE)
_PREPARED_GTID_INFO = re.compile(rf"^XA START {_XID} GTID (?P<gtid>\d+-\d+-\d+)\s*$")


@dataclass(frozen=True, slots=True)
class Xid:
    """An XA transaction id: format id, global transaction id and branch qualifier."""

    format_id: int
    gtrid: bytes
    bqual: bytes

    def __str__(self) -> str:
        """As MariaDB prints it in the binlog (and as XA statements accept it)."""
        return f"X'{self.gtrid.hex()}',X'{self.bqual.hex()}',{self.format_id}"

    @classmethod
    def _of_match(cls, m: re.Match[str]) -> Xid:
        return cls(
            int(m.group("fmt")), bytes.fromhex(m.group("gtrid")), bytes.fromhex(m.group("bqual"))
        )

    @classmethod
    def of_prepare_event(cls, event: XAPrepareEvent) -> Xid:
        return cls(int(event.xid_format_id), bytes(event.xid_gtrid), bytes(event.xid_bqual))


@dataclass(frozen=True, slots=True)
class XaCompletion:
    """The statement of a completing group: ``XA COMMIT xid`` or ``XA ROLLBACK xid``."""

    commit: bool
    xid: Xid


def parse_completion(statement: str) -> XaCompletion | None:
    m = _COMPLETION.match(statement)
    if m is None:
        return None
    return XaCompletion(m.group("verb").upper() == "COMMIT", Xid._of_match(m))


def parse_prepared_gtid_info(info: str) -> tuple[Xid, Gtid] | None:
    """``(xid, gtid)`` from a ``SHOW BINLOG EVENTS`` Info of a prepared group's GTID event
    (``XA START X'..',X'..',1 GTID 0-1-5``); None for any other GTID event."""
    m = _PREPARED_GTID_INFO.match(info)
    if m is None:
        return None
    return Xid._of_match(m), Gtid.parse(m.group("gtid"))


@dataclass(slots=True)
class PreparedBranch:
    """The rows of an XA branch that is prepared, held until its XA COMMIT or XA ROLLBACK.

    Each row event is kept with its columns but without a FIELD event: whether a FIELD
    must precede it is decided when the branch is delivered (other transactions may
    announce the table in between)."""

    xid: Xid
    gtid: Gtid  # the prepared group's own GTID
    batches: list[tuple[tuple[Field, ...], RowEvent]] = field(default_factory=list)
    row_count: int = 0

    def add(self, fields: tuple[Field, ...], event: RowEvent) -> None:
        self.batches.append((fields, event))
        self.row_count += len(event.changes)
