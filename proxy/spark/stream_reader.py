"""Structured Streaming source over the CDC stream: offsets are VGTIDs.

    initialOffset   where the query starts (`startingPosition`: current, beginning or a VGTID)
    latestOffset    every shard's binlog position now (`@@gtid_binlog_pos`); across a resharding
                    switch, the sources up to their journal, then the targets from it
    partitions      one per shard that moved between the two offsets
    read            that shard's changes in (start, end], from its binlog (shard_changes)

Spark stores both offsets of a batch in its checkpoint before running it; a restarted query
re-runs the last unfinished batch with the same offsets and the same (binlog-fixed) rows, and
its file sinks then keep each change exactly once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from proxy.cdc import GtidPosition, Vgtid
from proxy.cdc.positions import GTID_BEGINNING, GTID_CURRENT
from proxy.cdc.start_positions import current_position, resolve_start
from proxy.cdc.table_filter import TableFilter
from proxy.resharding.journal import Journal
from proxy.spark.options import OptionError, SourceOptions
from proxy.spark.shard_changes import ShardRange, journal_boundary, read_shard_range
from proxy.spark.topology import ShardEndpointSpec, topology_endpoints

logger = logging.getLogger(__name__)


class ShardRangePartition(InputPartition):
    def __init__(self, rng: ShardRange, vgtid_base: str) -> None:
        super().__init__(f"{rng.keyspace}/{rng.shard}")
        self.rng = rng
        self.vgtid_base = vgtid_base


def offset_of(vgtid: Vgtid) -> dict[str, Any]:
    return {"vgtid": vgtid.to_json_obj()}


def vgtid_of(offset: dict[str, Any]) -> Vgtid:
    return Vgtid.from_json(offset["vgtid"])


def shard_begins(offset: dict[str, Any]) -> dict[tuple[str, str], str]:
    """Where each shard's next range begins after ``offset``: its position there, except for
    the participants of a resharding journal the offset passed (``retired``), replaced by the
    journal's targets at the positions it names (``next``)."""
    retired = {tuple(name.split("/", 1)) for name in offset.get("retired", [])}
    begins = {(e.keyspace, e.shard): e.gtid for e in vgtid_of(offset).shard_gtids if (e.keyspace, e.shard) not in retired}
    for name, gtid in offset.get("next", {}).items():
        keyspace, shard = name.split("/", 1)
        begins.setdefault((keyspace, shard), gtid)
    return begins


class ChangeStreamReader(DataSourceStreamReader):
    def __init__(self, options: SourceOptions) -> None:
        if not options.stream_tables:
            raise OptionError("the tables option (keyspace.table, ...) is required for a stream")
        if options.config is None:
            raise OptionError("the config option (the proxy's cluster YAML) is required for a stream")
        self.options = options
        self.config_path = options.config
        self.tables = list(options.stream_tables)
        self.table_filter = TableFilter(self.tables)
        self.serving: dict[tuple[str, str], ShardEndpointSpec] = {}
        self.endpoints: dict[tuple[str, str], ShardEndpointSpec] = {}  # every known shard
        self._refresh_topology()
        if not self.serving:
            raise OptionError(f"no shard of the cluster holds {self.tables}")

    def _refresh_topology(self) -> None:
        """The serving and known shards of the stream's keyspaces, from the stored topology."""
        serving, known = topology_endpoints(self.config_path)
        keep = self.table_filter.includes_keyspace
        self.serving = {key: e for key, e in serving.items() if keep(key[0])}
        self.endpoints = {key: e for key, e in known.items() if keep(key[0])}

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        start = self.options.starting_position
        # current/beginning: the shards serving now; a VGTID may name a reshard's sources.
        endpoints = self.serving if start in (GTID_CURRENT, GTID_BEGINNING) else self.endpoints
        resolved = asyncio.run(resolve_start(endpoints, self.table_filter, start))
        vgtid = Vgtid.from_positions(resolved.positions)
        logger.info("change stream initial offset", extra={"vgtid": vgtid.to_json()})
        return offset_of(vgtid)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:  # noqa: N802
        """Every streamed shard's position now; a shard that no longer serves (a reshard's
        source) ends at its journal. Once every participant of a journal ended there, the
        offset names the journal's targets to begin from (``next``) and the participants to
        drop (``retired``): the batch after it reads the targets from the journal's positions,
        so no change is lost or read twice across the switch."""
        self._refresh_topology()
        begins = shard_begins(start if start is not None else self.initialOffset())
        ends: dict[tuple[str, str], str] = {}
        met: dict[int, tuple[Journal, set[tuple[str, str]]]] = {}
        for key, begin in sorted(begins.items()):
            endpoint = self.endpoints.get(key)
            if endpoint is None:
                raise OptionError(f"shard {key[0]}/{key[1]} of the stream's offset is not known to the cluster any more "
                                  "(a reshard completed before the stream passed its switch)")
            if key in self.serving:
                ends[key] = str(current_position(endpoint))
                continue
            end, journal = asyncio.run(journal_boundary(endpoint, self.tables, key[0], key[1], begin))
            ends[key] = end
            if journal is not None:
                met.setdefault(journal.id, (journal, set()))[1].add(key)
        offset = offset_of(Vgtid.from_positions({key: GtidPosition.parse(p) for key, p in ends.items()}))
        for journal, reached_by in met.values():
            participants = {(p.keyspace, p.shard) for p in journal.participants}
            if participants <= reached_by:
                offset.setdefault("next", {}).update({f"{g.keyspace}/{g.shard}": g.gtid for g in journal.shard_gtids})
                offset.setdefault("retired", []).extend(sorted(f"{k}/{s}" for k, s in participants))
        return offset

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begins = shard_begins(start)
        start_vgtid, end_vgtid = vgtid_of(start), vgtid_of(end)
        out: list[InputPartition] = []
        for entry in end_vgtid.shard_gtids:
            begin = begins.get((entry.keyspace, entry.shard), "")
            if GtidPosition.parse(begin) == GtidPosition.parse(entry.gtid):
                continue
            rng = ShardRange(entry.keyspace, entry.shard, begin, entry.gtid)
            out.append(ShardRangePartition(rng, start_vgtid.to_json()))
        return out

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, ShardRangePartition)
        rng = partition.rng
        endpoint = self.endpoints[(rng.keyspace, rng.shard)]
        rows = asyncio.run(read_shard_range(endpoint, self.tables, rng, Vgtid.from_json(partition.vgtid_base)))
        yield from rows

    def commit(self, end: dict[str, Any]) -> None:
        # Nothing to release: positions live in Spark's checkpoint, binlogs on the shards.
        logger.info("change stream batch committed", extra={"vgtid": vgtid_of(end).to_json()})


__all__ = ["ChangeStreamReader"]
