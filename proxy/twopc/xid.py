"""Names of distributed transactions: the dtid, each participant's XA xid, and the
SQL that spells them.

A dtid is Vitess's shape, ``<keyspace>:<shard>:<id>``, naming the transaction's
metadata manager (MM: the shard holding its decision record) first, so a resolver that
finds a prepared branch on any shard knows where to read the decision. The id is the
coordinating proxy process's id and a sequence number (``<process>-<n>``); the process
id names the liveness lock that tells other processes whether the coordinator is alive.

A participant's xid is ``(gtrid=dtid, bqual=<keyspace>/<shard>, formatID=FORMAT_ID)``;
the format id marks the proxy's own XA transactions in ``XA RECOVER`` (anything else
there belongs to someone else and is never touched). Both parts are sent as hex
literals, so no name can break the statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqltext.quoting import bytes_literal

ShardKey = tuple[str, str]

FORMAT_ID = 0x5347  # "SG"
MAX_GTRID = 64  # MySQL/MariaDB limit on each xid part, in bytes
_DTID = re.compile(r"^(?P<ks>[A-Za-z_][A-Za-z0-9_]*):(?P<shard>[A-Za-z0-9_.-]+):(?P<proc>[0-9a-f]+)-(?P<n>\d+)$")


@dataclass(frozen=True, slots=True)
class Dtid:
    mm: ShardKey
    process: str
    text: str


def make_dtid(mm: ShardKey, process: str, n: int) -> str:
    dtid = f"{mm[0]}:{mm[1]}:{process}-{n}"
    if len(dtid.encode()) > MAX_GTRID:
        # Keyspace and shard names that long would not fit an xid; no real cluster has them.
        raise ValueError(f"distributed transaction id {dtid!r} is longer than {MAX_GTRID} bytes")
    return dtid


def parse_dtid(text: str) -> Dtid | None:
    m = _DTID.match(text)
    if not m:
        return None
    return Dtid((m.group("ks"), m.group("shard")), m.group("proc"), text)


def bqual(key: ShardKey) -> str:
    return f"{key[0]}/{key[1]}"


def xid_sql(dtid: str, key: ShardKey) -> str:
    """The xid of ``dtid``'s branch on shard ``key``, as XA statements take it."""
    return f"{bytes_literal(dtid.encode())},{bytes_literal(bqual(key).encode())},{FORMAT_ID}"


def participant_list(keys: list[ShardKey]) -> str:
    """Participants as Vitess shows them: ``ks:shard,ks:shard``."""
    return ",".join(f"{ks}:{shard}" for ks, shard in keys)


def parse_participants(text: str) -> list[ShardKey]:
    out: list[ShardKey] = []
    for item in text.split(","):
        ks, sep, shard = item.strip().partition(":")
        if sep and ks and shard:
            out.append((ks, shard))
    return out


def recovered_xid(row: tuple[object, ...]) -> tuple[str, str] | None:
    """``(dtid, bqual)`` of one ``XA RECOVER`` row (formatID, gtrid_length, bqual_length,
    data), or None for a transaction that is not the proxy's."""
    try:
        fmt, glen, blen, data = (int(row[0]), int(row[1]), int(row[2]), row[3])  # type: ignore[call-overload]
    except (TypeError, ValueError, IndexError):
        return None
    if fmt != FORMAT_ID or not isinstance(data, bytes | bytearray):
        return None
    try:
        gtrid = bytes(data[:glen]).decode()
        bq = bytes(data[glen : glen + blen]).decode()
    except UnicodeDecodeError:
        return None
    return gtrid, bq


def lock_name(process: str) -> str:
    """The liveness lock (GET_LOCK) a proxy process holds on every shard while it runs."""
    return f"shardgate_2pc_{process}"
