"""A split of ``commerce/-80`` into ``-40,40-80`` made by hand, the way the Reshard workflow's
SwitchTraffic makes it (the workflow itself is another engineer's; these tests cannot wait for it):

1. ``prepare``: start the target shards as new local instances (their endpoints allocated and
   saved in the stored topology, not serving yet), with the keyspace's schema;
2. ``switch``: deny writes on the source, copy every row of the source to the target its
   primary vindex picks (SELECT on the source, INSERT on the target: nothing is written to the
   source any more, so the copy is complete), record each target's GTID position after its
   copy, write the journal into the source's binlog, flip the topology (targets serving);
3. ``reverse``: ReverseTraffic (the source serves again from a second journal, on the targets);
4. ``reset``: back to the cluster file's shards serving (targets kept listed, emptied; writes allowed).

Only the serving-side API is used: proxy/resharding/{topology,denied_writes,journal}.py.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pymysql

from proxy.cluster import LocalCluster
from proxy.config import ShardEndpoint
from proxy.pools import ShardAddress, ShardConnection, ShardPools
from proxy.resharding.denied_writes import BYPASS_SQL, allow_writes, deny_writes
from proxy.resharding.journal import Journal, KeyspaceShard, ShardGtid, journal_id, write_journal
from proxy.resharding.topology import (
    KeyspaceTopology,
    allocate_local_shard,
    load_topology,
    local_endpoint_spec,
    save_topology,
)
from tests.cdc.conftest import Shard
from vschema.keyrange import KeyRange
from vschema.loader import build_vschema
from vschema.model import Keyspace

KEYSPACE = "commerce"
SOURCE = "-80"
TARGETS = ("-40", "40-80")
SPLIT_SERVING = ("-40", "40-80", "80-")
_workflows = itertools.count(1)


def shard_of(split_keyspace: Keyspace, table: str, key: int, shards: Sequence[str]) -> str:
    """Which of ``shards`` holds ``table``'s row with primary-vindex value ``key``."""
    vindex = split_keyspace.tables[table].primary_vindex
    assert vindex is not None
    ksid = vindex.vindex.keyspace_id(key)
    assert ksid is not None
    return next(s for s in shards if KeyRange.parse(s).contains(ksid))


def ids_on(split_keyspace: Keyspace, table: str, shard: str, count: int, start: int) -> list[int]:
    """``count`` ids from ``start`` up whose rows live on ``shard`` (a key range)."""
    out: list[int] = []
    key = start
    while len(out) < count:
        if KeyRange.parse(shard).contains(split_keyspace.tables[table].primary_vindex.vindex.keyspace_id(key)):  # type: ignore[union-attr]
            out.append(key)
        key += 1
    return out


def _rows(endpoint: ShardEndpoint, table: str) -> list[dict[str, Any]]:
    conn = pymysql.connect(host=endpoint.host, port=endpoint.port, user=endpoint.user, password=endpoint.password,
                           database=endpoint.database, cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute(f"select * from `{table}`")
            return list(cur.fetchall())
    finally:
        conn.close()


def run_sql(endpoint: ShardEndpoint, *statements: str | tuple[str, Sequence[Any]]) -> list[tuple]:
    """Statements on one shard (autocommit); the last one's rows."""
    return Shard(endpoint.database, "", endpoint).run_sync(*statements)


class Split:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.config = cluster.config
        store_ks, store_shard = self.config.vschema_store_location
        e = cluster.endpoint(store_ks, store_shard)
        self._store = ShardPools([ShardAddress.of(store_ks, store_shard, e)],
                                 maxsize=2)
        self._store_key = (store_ks, store_shard)
        self.vschema = build_vschema(
            {name: (ks.vschema, list(ks.shards)) for name, ks in self.config.keyspaces.items()}
        ).keyspace(KEYSPACE)
        self.tables = sorted(self.config.keyspaces[KEYSPACE].vschema["tables"])
        self.topology: KeyspaceTopology | None = None
        self.journal: Journal | None = None

    @asynccontextmanager
    async def store(self) -> AsyncIterator[ShardConnection]:
        async with self._store.get(*self._store_key).connection() as sc:
            yield sc

    def endpoint(self, shard: str) -> ShardEndpoint:
        assert self.topology is not None
        return self.topology.endpoint(shard)

    async def current(self) -> KeyspaceTopology:
        async with self.store() as sc:
            return (await load_topology(sc, self.config))[KEYSPACE]

    async def prepare(self) -> KeyspaceTopology:
        """Targets started (allocated on first use, kept across tests) and listed, not serving."""
        async with self.store() as sc:
            topologies = await load_topology(sc, self.config)
            topology = topologies[KEYSPACE]
            for shard in TARGETS:
                spec = topology.shards.get(shard)
                if spec is None or spec.local is None:
                    spec = local_endpoint_spec(KEYSPACE, shard, allocate_local_shard(
                        self.config, {**topologies, KEYSPACE: topology}, KEYSPACE, shard))
                    topology = topology.with_shard(shard, spec)
                assert spec.local is not None
                await self.cluster.start_added_shard(spec.local.spec(KEYSPACE, shard),
                                                     self.config.keyspaces[KEYSPACE].schema_path)
            if topology != topologies[KEYSPACE]:
                topology = await save_topology(sc, KEYSPACE, topology, topology.version)
        self.topology = topology
        return topology

    async def switch(self, pause: float = 0.0) -> Journal:
        """Deny, copy, record the targets' positions, journal, flip the topology; ``pause``:
        seconds between the deny and the flip (writes meanwhile are held)."""
        topology = self.topology or await self.prepare()
        source = topology.endpoint(SOURCE)
        async with self._source() as sc:
            await deny_writes(sc, source.database, self.tables)
        await asyncio.to_thread(self._copy)
        await asyncio.sleep(pause)
        gtids = []
        for shard in TARGETS:
            rows = await asyncio.to_thread(run_sql, topology.endpoint(shard), "select @@global.gtid_binlog_pos")
            gtids.append(ShardGtid(KEYSPACE, shard, str(rows[0][0])))
        participants = (KeyspaceShard(KEYSPACE, SOURCE),)
        workflow = f"split{next(_workflows)}"
        journal = Journal(journal_id(workflow, KEYSPACE, participants), "SHARDS", KEYSPACE, tuple(self.tables),
                          tuple(gtids), participants, (workflow,))
        async with self._source() as sc:
            await write_journal(sc, journal)
        async with self.store() as sc:
            self.topology = await save_topology(sc, KEYSPACE, topology.with_serving(SPLIT_SERVING), topology.version)
        self.journal = journal
        return journal

    def _copy(self) -> None:
        topology = self.topology
        assert topology is not None
        ranges = {shard: KeyRange.parse(shard) for shard in TARGETS}
        for table in self.tables:
            vindex = self.vschema.tables[table].primary_vindex
            assert vindex is not None
            by_target: dict[str, list[tuple[str, list[Any]]]] = {s: [] for s in TARGETS}
            for row in _rows(topology.endpoint(SOURCE), table):
                ksid = vindex.vindex.keyspace_id(row[vindex.columns[0]])
                assert ksid is not None
                cols = list(row)
                by_target[next(s for s, r in ranges.items() if r.contains(ksid))].append((
                    f"insert into `{table}` ({', '.join(f'`{c}`' for c in cols)}) values ({', '.join(['%s'] * len(cols))})",
                    [row[c] for c in cols]))
            for shard, inserts in by_target.items():
                if inserts:
                    run_sql(topology.endpoint(shard), "begin", *inserts, "commit")

    @asynccontextmanager
    async def _source(self) -> AsyncIterator[ShardConnection]:
        async with self._connection(SOURCE) as sc:
            yield sc

    @asynccontextmanager
    async def _connection(self, shard: str) -> AsyncIterator[ShardConnection]:
        e = self.topology.endpoint(shard) if self.topology is not None else self.cluster.endpoint(KEYSPACE, shard)
        pools = ShardPools([ShardAddress.of(KEYSPACE, shard, e)], maxsize=1)
        try:
            async with pools.get(KEYSPACE, shard).connection() as sc:
                yield sc
        finally:
            await pools.close()

    async def reverse(self) -> Journal:
        """ReverseTraffic by hand, after ``switch``: deny writes on the targets, bring the source up
        to date (its rows replaced by the targets', through the bypass of its own denial, as a
        reverse replication writes), record its position, write the journal on every target,
        the source serving again with writes allowed."""
        topology = self.topology
        assert topology is not None
        for shard in TARGETS:
            async with self._connection(shard) as sc:
                await deny_writes(sc, topology.endpoint(shard).database, self.tables)
        source = topology.endpoint(SOURCE)
        statements: list[str | tuple[str, Sequence[Any]]] = [BYPASS_SQL]
        for table in self.tables:
            statements.append(f"delete from `{table}`")
            for shard in TARGETS:
                for row in await asyncio.to_thread(_rows, topology.endpoint(shard), table):
                    cols = list(row)
                    statements.append((f"insert into `{table}` ({', '.join(f'`{c}`' for c in cols)}) "
                                       f"values ({', '.join(['%s'] * len(cols))})", [row[c] for c in cols]))
        statements.append("select @@global.gtid_binlog_pos")
        position = str((await asyncio.to_thread(run_sql, source, *statements))[0][0])
        participants = tuple(KeyspaceShard(KEYSPACE, t) for t in TARGETS)
        workflow = f"reverse{next(_workflows)}"
        journal = Journal(journal_id(workflow, KEYSPACE, participants), "SHARDS", KEYSPACE, tuple(self.tables),
                          (ShardGtid(KEYSPACE, SOURCE, position),), participants, (workflow,))
        for shard in TARGETS:
            async with self._connection(shard) as sc:
                await write_journal(sc, journal)
        async with self._source() as sc:
            await allow_writes(sc, source.database, self.tables)
        async with self.store() as sc:
            self.topology = await save_topology(
                sc, KEYSPACE, topology.with_serving(list(self.config.keyspaces[KEYSPACE].shards)), topology.version)
        self.journal = journal
        return journal

    async def reset(self) -> None:
        """The cluster file's topology again: targets emptied (kept running and listed), writes
        allowed on every shard."""
        topology = await self.prepare()
        for shard in (SOURCE, *TARGETS):
            async with self._connection(shard) as sc:
                await allow_writes(sc, topology.endpoint(shard).database, self.tables)
        for shard in TARGETS:
            await asyncio.to_thread(run_sql, topology.endpoint(shard),
                                    *(f"delete from `{t}`" for t in self.tables))
        if topology.serving != tuple(self.config.keyspaces[KEYSPACE].shards):
            async with self.store() as sc:
                self.topology = await save_topology(
                    sc, KEYSPACE, topology.with_serving(list(self.config.keyspaces[KEYSPACE].shards)),
                    topology.version)
        self.journal = None

    async def close(self) -> None:
        await self._store.close()

