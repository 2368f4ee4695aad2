"""The resharding journal: the record a switch writes into every source shard's binlog.

Vitess's SwitchTraffic writes a ``binlogdata.Journal`` into ``_vt.resharding_journal`` on each
source shard once writes are stopped and the targets caught up: the point of no return. Every
change of the source before the journal is in the source's binlog only, every change after it in
the targets' only, and a VStream turns the journal row into a JOURNAL event and moves on to the
targets from the positions the journal names (see :mod:`proxy.cdc.vstream`).

Here the record is a :class:`Journal` (Vitess's field names) stored as JSON in the sidecar table
``_shardgate.resharding_journal`` (``<db>._shardgate_resharding_journal`` where the user may not
create databases; :mod:`proxy.sidecar_tables`)::

    id          the journal id (Vitess: a hash of the migration; :func:`journal_id`)
    db_name     the shard's database (clusters sharing a server keep apart)
    val         the journal as JSON
    created_at  when

The binlog reader of a source shard passes this table's row events through its database filter
(:func:`is_journal_table`) and decodes them with :meth:`Journal.from_row`.

API::

    Journal(id, migration_type, keyspace, tables, shard_gtids, participants, source_workflows)
    ShardGtid(keyspace, shard, gtid)          # a target shard and where its stream starts
    KeyspaceShard(keyspace, shard)            # a participant (source shard)
    journal_id(workflow, keyspace, participants) -> int
    await write_journal(conn, journal)        # on one source shard; idempotent (a second write of the
                                              # same id is a no-op, nothing enters the binlog again)
    await read_journal(conn, id) -> Journal | None
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from proxy.errors import ER_UNKNOWN_ERROR, ProxyError
from proxy.sidecar_tables import (
    SIDECAR_DB,
    ensure_sidecar_table,
    hex_literal,
    row_text,
    utf8_literal,
)

if TYPE_CHECKING:  # the CDC decoders import this module (Journal): the pools stay out of them
    from proxy.pools import ShardConnection

logger = logging.getLogger(__name__)

SIDECAR_TABLE = "resharding_journal"
FALLBACK_TABLE = f"_shardgate_{SIDECAR_TABLE}"
JOURNAL_TABLES = (SIDECAR_TABLE, FALLBACK_TABLE)  # its names, for binlog table filters
MIGRATION_SHARDS = "SHARDS"  # Vitess MigrationType.SHARDS (a Reshard); TABLES is MoveTables


def _create_table(name: str) -> str:
    return (
        f"create table if not exists {name} ("
        " id bigint not null,"
        " db_name varbinary(255) not null,"
        " val longtext character set utf8mb4 not null,"
        " created_at datetime(6) not null,"
        " primary key (id)"
        ") engine=InnoDB comment 'shardgate: resharding journal (proxy/resharding/journal.py)'"
    )


def is_journal_table(database: str, table: str) -> bool:
    """True for the journal table, wherever :mod:`proxy.sidecar_tables` placed it."""
    return (database == SIDECAR_DB and table == SIDECAR_TABLE) or table == FALLBACK_TABLE


@dataclass(frozen=True, slots=True)
class KeyspaceShard:
    keyspace: str
    shard: str


@dataclass(frozen=True, slots=True)
class ShardGtid:
    """A target shard and the GTID position its stream starts from (MariaDB ``domain-server-seq`` list)."""

    keyspace: str
    shard: str
    gtid: str


@dataclass(frozen=True, slots=True)
class Journal:
    id: int
    migration_type: str
    keyspace: str
    tables: tuple[str, ...]
    shard_gtids: tuple[ShardGtid, ...]
    participants: tuple[KeyspaceShard, ...]
    source_workflows: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """Vitess's JSON field names (protojson of ``binlogdata.Journal``)."""
        return {
            "id": str(self.id),
            "migration_type": self.migration_type,
            "keyspace": self.keyspace,
            "tables": list(self.tables),
            "shard_gtids": [{"keyspace": g.keyspace, "shard": g.shard, "gtid": g.gtid} for g in self.shard_gtids],
            "participants": [{"keyspace": p.keyspace, "shard": p.shard} for p in self.participants],
            "source_workflows": list(self.source_workflows),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Journal:
        try:
            return cls(
                id=int(doc["id"]),
                migration_type=str(doc.get("migration_type", MIGRATION_SHARDS)),
                keyspace=str(doc["keyspace"]),
                tables=tuple(str(t) for t in doc.get("tables", ())),
                shard_gtids=tuple(ShardGtid(str(g["keyspace"]), str(g["shard"]), str(g["gtid"]))
                                  for g in doc["shard_gtids"]),
                participants=tuple(KeyspaceShard(str(p["keyspace"]), str(p["shard"])) for p in doc["participants"]),
                source_workflows=tuple(str(w) for w in doc.get("source_workflows", ())),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ProxyError(ER_UNKNOWN_ERROR, f"unreadable resharding journal ({type(e).__name__}: {e})") from e

    @classmethod
    def from_text(cls, text: str | bytes) -> Journal:
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise ProxyError(ER_UNKNOWN_ERROR, f"unreadable resharding journal ({e})") from e
        if not isinstance(doc, dict):
            raise ProxyError(ER_UNKNOWN_ERROR, "unreadable resharding journal (not a JSON object)")
        return cls.from_json(doc)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Journal:
        """From a decoded row image of the journal table (column name -> value)."""
        return cls.from_text(row["val"])

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)


def journal_id(workflow: str, keyspace: str, participants: Sequence[KeyspaceShard]) -> int:
    """A stable id for a migration (Vitess hashes the migration the same way): the same workflow
    switching the same sources gets the same id, so a re-run writes no second journal."""
    key = "|".join([MIGRATION_SHARDS, workflow, keyspace, *sorted(f"{p.keyspace}/{p.shard}" for p in participants)])
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") & 0x7FFF_FFFF_FFFF_FFFF


async def _table(conn: ShardConnection) -> str:
    return await ensure_sidecar_table(conn, conn.pool.address.database, SIDECAR_TABLE, _create_table)


async def write_journal(conn: ShardConnection, journal: Journal) -> bool:
    """Insert ``journal`` on ``conn``'s shard (a source shard: its binlog then carries it after the
    shard's last write, as writes are denied by now). Returns False when that shard already held
    this journal id (a re-run after a failure: nothing written again)."""
    table = await _table(conn)
    db = conn.pool.address.database
    text = journal.dumps()
    res = await conn.execute(
        f"insert ignore into {table} (id, db_name, val, created_at) values "
        f"({journal.id}, {hex_literal(db)}, {utf8_literal(text)}, utc_timestamp(6))"
    )
    written = res.affected_rows == 1
    logger.info("resharding journal written" if written else "resharding journal already there",
                extra={"journal_id": journal.id, "keyspace": journal.keyspace, "shard": conn.shard})
    return written


async def read_journal(conn: ShardConnection, id: int) -> Journal | None:
    """The journal ``id`` stored on ``conn``'s shard, None when it has none."""
    table = await _table(conn)
    res = await conn.execute(f"select val from {table} where id = {int(id)}")
    if not res.rows:
        return None
    return Journal.from_text(row_text(res.rows[0][0]))


__all__ = [
    "FALLBACK_TABLE", "JOURNAL_TABLES", "Journal", "KeyspaceShard", "MIGRATION_SHARDS", "SIDECAR_TABLE", "ShardGtid",
    "is_journal_table", "journal_id", "read_journal", "write_journal",
]
