"""Reads a prepared XA branch's event group back from a shard's binlog.

A stream that starts (or resumes) after a branch's ``XA PREPARE`` but before its
``XA COMMIT`` meets a commit whose rows lie behind its start position. This finds the
prepared group and reads it with a second binlog connection: the group's GTID event is
located with ``SHOW BINLOG EVENTS`` (the server prints a prepared group's GTID event as
``XA START <xid> GTID d-s-n``), newest binlog file first, and the group is then read with a
file/offset binlog dump from that event to its ``XA_PREPARE`` event.

A file is scanned from its start up to the XA COMMIT's own GTID event (nothing after it
can be that commit's prepare). Locations found are kept, and each file's scan resumes
where it stopped, so a stream that starts while many branches are prepared pays for one
scan, not one per branch (SHOW BINLOG EVENTS reads about 300,000 events a second here). The candidate is the latest
prepared group of that xid whose GTID comes before the commit's (an xid may be reused once
its transaction ended).

Needs the ``BINLOG MONITOR`` privilege (``SHOW BINLOG EVENTS``) besides what reading the
binlog needs. Connection failures are raised as they are (the decoder reconnects and the
commit comes again); anything else makes the branch unavailable
(``XaBranchUnavailableError``): the stream stops rather than skip its rows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import MariadbGtidEvent, QueryEvent, XAPrepareEvent
from pymysqlreplication.row_event import RowsEvent

from proxy.cdc.errors import XaBranchUnavailableError
from proxy.cdc.positions import Gtid
from proxy.cdc.xa_branches import Xid, parse_prepared_gtid_info
from proxy.errors import (
    CR_CONN_HOST_ERROR,
    CR_CONNECTION_ERROR,
    CR_SERVER_GONE_ERROR,
    CR_SERVER_LOST,
    CR_SERVER_LOST_EXTENDED,
)

logger = logging.getLogger(__name__)

_SCAN_CHUNK = 5000  # SHOW BINLOG EVENTS rows per round trip
_INDEX_MAX = 200_000  # prepared-group locations kept; past that the index starts over
CONNECTION_ERRORS = frozenset({CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR, CR_SERVER_GONE_ERROR, CR_SERVER_LOST, CR_SERVER_LOST_EXTENDED})


@dataclass(frozen=True, slots=True)
class _Location:
    file: str
    pos: int  # offset of the group's GTID event
    gtid: Gtid


class PreparedGroupReader:
    def __init__(
        self,
        keyspace: str,
        shard: str,
        connection_settings: dict[str, Any],
        server_id: int,
        database: str,
        only_tables: list[str] | None,
        row_event_classes: Sequence[type],
        connect: Callable[..., pymysql.Connection],
    ) -> None:
        """``server_id``: a replica id of its own (a dump with the main stream's id would
        kick the main stream off); ``connect``: opens every connection (PyMySQL's kwargs)."""
        self.keyspace = keyspace
        self.shard = shard
        self._settings = connection_settings
        self._server_id = server_id
        self._database = database
        self._only_tables = only_tables
        self._events = [MariadbGtidEvent, QueryEvent, XAPrepareEvent, *row_event_classes]
        self._connect = connect
        self._scanned_to: dict[str, int] = {}  # binlog file -> offset scanned up to
        self._locations: dict[Xid, list[_Location]] = {}
        self._indexed = 0

    def read(self, xid: Xid, commit: Gtid) -> list[object]:
        """The events of ``xid``'s prepared group (GTID ... XA_PREPARE) preceding the XA
        COMMIT ``commit``; row events already decoded."""
        started = time.monotonic()
        try:
            location = self._locate(xid, commit)
            if location is None:
                raise self._unavailable(
                    xid, commit, "no XA PREPARE of it in the binlog files the shard still has"
                )
            events = self._read_group(location, xid, commit)
        except pymysql.MySQLError as exc:
            code = exc.args[0] if exc.args else None
            if isinstance(exc, pymysql.OperationalError) and code in CONNECTION_ERRORS:
                raise  # the decoder reconnects; the commit comes again
            raise self._unavailable(xid, commit, f"reading the binlog failed: {exc.args}") from exc
        logger.info(
            "read a prepared XA branch back from the binlog",
            extra={
                "keyspace": self.keyspace,
                "shard": self.shard,
                "xid": str(xid),
                "prepared_gtid": str(location.gtid),
                "commit_gtid": str(commit),
                "binlog_file": location.file,
                "binlog_pos": location.pos,
                "seconds": round(time.monotonic() - started, 3),
            },
        )
        return events

    def _unavailable(self, xid: Xid, commit: Gtid, reason: str) -> XaBranchUnavailableError:
        return XaBranchUnavailableError(self.keyspace, self.shard, str(xid), str(commit), reason)

    # -- locating ------------------------------------------------------------------------

    def _locate(self, xid: Xid, commit: Gtid) -> _Location | None:
        conn = self._connect(**self._settings)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                files = [str(row[0]) for row in cur.fetchall()]
                for name in reversed(files):
                    self._scan(cur, name, commit)
                    found = self._latest_before(xid, commit, name)
                    if found is not None:
                        return found
        finally:
            conn.close()
        return None

    def _scan(self, cur: Any, name: str, commit: Gtid) -> None:
        """Index the prepared groups of binlog file ``name`` from where the last scan of it
        stopped, up to the XA COMMIT's own GTID event if the file holds it (what follows
        cannot be the commit's prepare) or else to the file's end."""
        if self._indexed > _INDEX_MAX:
            self._locations.clear()
            self._scanned_to.clear()
            self._indexed = 0
        commit_info = f"GTID {commit}"
        pos = self._scanned_to.get(name, 4)
        while True:
            cur.execute("SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s", (name, pos, _SCAN_CHUNK))
            rows = cur.fetchall()
            for _log, start, event_type, _server, end, info in rows:
                if event_type == "Gtid" and isinstance(info, str):
                    if info == commit_info or info.endswith(f" {commit_info}"):
                        self._scanned_to[name] = int(start)
                        return
                    parsed = parse_prepared_gtid_info(info)
                    if parsed is not None:
                        found_xid, gtid = parsed
                        self._locations.setdefault(found_xid, []).append(
                            _Location(name, int(start), gtid)
                        )
                        self._indexed += 1
                pos = int(end)
            if len(rows) < _SCAN_CHUNK:
                break
        self._scanned_to[name] = pos

    def _latest_before(self, xid: Xid, commit: Gtid, name: str) -> _Location | None:
        best: _Location | None = None
        for location in self._locations.get(xid, ()):
            if location.file != name:
                continue
            gtid = location.gtid
            if gtid.domain == commit.domain and gtid.seq >= commit.seq:
                continue  # a later use of the same xid
            if best is None or location.pos > best.pos:
                best = location
        return best

    # -- reading -------------------------------------------------------------------------

    def _read_group(self, location: _Location, xid: Xid, commit: Gtid) -> list[object]:
        stream = BinLogStreamReader(
            connection_settings=self._settings,
            server_id=self._server_id,
            blocking=False,
            # File/offset dump: the library's MariaDB mode always dumps by GTID.
            is_mariadb=False,
            log_file=location.file,
            log_pos=location.pos,
            resume_stream=True,
            only_events=self._events,
            only_schemas=[self._database],
            only_tables=self._only_tables,
            pymysql_wrapper=self._connect,
            enable_logging=False,
        )
        events: list[object] = []
        try:
            for event in stream:
                if isinstance(event, MariadbGtidEvent):
                    gtid = Gtid(event.domain_id, event.server_id, event.gtid_seq_no)
                    if events or gtid != location.gtid:
                        break
                elif isinstance(event, RowsEvent):
                    _ = event.rows  # decoded now, while the stream's table map is this group's
                events.append(event)
                if isinstance(event, XAPrepareEvent):
                    if Xid.of_prepare_event(event) != xid:
                        break
                    return events
        finally:
            stream.close()
        raise self._unavailable(
            xid,
            commit,
            f"the group at {location.file}:{location.pos} (GTID {location.gtid}) is not its prepared group",
        )
