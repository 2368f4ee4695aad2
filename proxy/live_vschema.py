"""The cluster's vschema, kept in the cluster itself and followed live by every proxy process.

Where it lives: one table on a designated shard (``vschema_store.keyspace``/``.shard`` in the
cluster file; by default the first shard of the first keyspace), ``_shardgate.vschema``, or
``<shard database>._shardgate_vschema`` where the shard's user may not create a database (as the
2PC sidecar does). One row per keyspace::

    cluster     the designated shard's database name: clusters sharing one server keep apart
    keyspace    the keyspace
    doc         its vschema document (JSON, what the keyspace's vschema file holds)
    version     a cluster-wide change counter: every change sets its row's version to max + 1
    change_sql  the statement that made the change (for operators: who did what)
    updated_at  when

The files seed it: at start, a keyspace that has no row gets one from its file (``INSERT
IGNORE``: proxies starting together agree). From then on the table wins and the files are not
read again. To go back to a file, an operator deletes the keyspace's row on the designated shard
(``DELETE FROM _shardgate.vschema WHERE keyspace = 'ks'``): the running proxies notice the
missing row and seed it again from their file within a second.

A change (``ALTER VSCHEMA``, ``CREATE QUEUE``, topic DDL) is one transaction on the designated
shard: every row of the cluster is read ``FOR UPDATE`` (so concurrent changes from several
proxies queue up instead of overwriting each other), the change is applied to the document just
read, the *whole* vschema is built from the result (a bad change raises here, and the
transaction rolls back: nothing changes), and the row is written back only if its version is
still the one read (compare-and-set; a row changed outside this protocol makes the statement fail
rather than lose that change). The proxy that made the change installs the new vschema at once.

Every proxy process (each ``--workers`` worker is one) follows the table by polling ``SELECT
keyspace, version`` every ``poll_seconds`` (0.25 s) on a connection of its own. Why polling and
not the binlog: the binlog reader needs a replication connection and privileges, binlogs enabled
on the designated shard, and a position to resume from after a reconnect; a version poll needs
nothing but the table, costs one indexed read of a handful of rows (about 4 queries a second per
process), survives shard restarts without bookkeeping, and meets the one-second bar with room to
spare. On a new version the follower reads the documents, builds and swaps the ``VSchema``
(immutable: replaced, never edited), clears the plan cache, then refreshes what depends on the
keyspace: its tracked schema, its message tables and its topics (a queue or topic created through
another proxy becomes usable here).

The same poll follows the serving topology of each keyspace (which shards serve it after a
resharding switch: ``_shardgate.shard_topology`` on the same shard, proxy/resharding/topology.py):
one ``UNION ALL`` query reads both tables' versions. A changed topology is installed together with
a vschema built on its serving shards (``Proxy.install_topology``: pools first, then the swap,
then the retired shards' pools closed), the plan cache is cleared, and the message managers and
schema tracking move to the new shards. After a reads-only switch a second vschema, built on the
keyspace's read shards, is installed beside it (``ClusterState.read_vschema``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proxy.errors import ER_BAD_DB_ERROR, ER_UNKNOWN_ERROR, ProxyError
from proxy.pools import ShardConnection, ShardPools
from proxy.resharding.topology import KeyspaceTopology, load_topology, topology_table
from proxy.sidecar_tables import ensure_sidecar_table, hex_literal, row_text, utf8_literal
from rewriter import DEFAULT_CACHE
from vschema.errors import VSchemaError
from vschema.loader import build_vschema
from vschema.model import VSchema

if TYPE_CHECKING:
    from proxy.cluster_state import ClusterState

logger = logging.getLogger(__name__)

SIDECAR_TABLE = "vschema"
_CAS_ATTEMPTS = 3

DocMutation = Callable[[dict[str, Any]], dict[str, Any]]


def _create_table(name: str) -> str:
    return (
        f"create table if not exists {name} ("
        " cluster varbinary(255) not null,"
        " keyspace varbinary(255) not null,"
        " doc longtext character set utf8mb4 not null,"
        " version bigint not null,"
        " change_sql text character set utf8mb4 not null,"
        " updated_at datetime(6) not null,"
        " primary key (cluster, keyspace)"
        ") engine=InnoDB comment 'shardgate: the cluster vschema (proxy/live_vschema.py)'"
    )


@dataclass(frozen=True)
class StoredDoc:
    doc: dict[str, Any]
    version: int


class VSchemaChangeConflict(ProxyError):
    """The row changed between the read and the write (someone edited it outside the protocol)."""

    def __init__(self, keyspace: str) -> None:
        super().__init__(ER_UNKNOWN_ERROR, f"vschema of keyspace {keyspace} changed concurrently; try again")


async def stored_vschema_doc(sc: ShardConnection, cluster: str, keyspace: str) -> dict[str, Any] | None:
    """The stored (live) vschema document of ``keyspace`` on the store shard ``sc`` (its database
    ``cluster``); None when none is stored (the cluster file's is in force) or it is unreadable."""
    table = await ensure_sidecar_table(sc, cluster, SIDECAR_TABLE, _create_table)
    res = await sc.execute(
        f"select doc from {table} where cluster = {hex_literal(cluster)} and keyspace = {hex_literal(keyspace)}"
    )
    if not res.rows:
        return None
    try:
        doc = json.loads(row_text(res.rows[0][0]))
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


class LiveVSchema:
    """This process's copy of the cluster vschema and the task that keeps it current."""

    def __init__(self, proxy: ClusterState, keyspace: str, shard: str, poll_seconds: float = 0.25) -> None:
        self.proxy = proxy
        self.poll_seconds = poll_seconds
        address = proxy.pools.get(keyspace, shard).address
        self.location = (keyspace, shard)
        # Own connections: following and changing never wait for (or starve) client sessions.
        self._pools = ShardPools([address], maxsize=2)
        self._pool = self._pools.get(keyspace, shard)
        self.cluster = address.database
        # The documents in force here (the files' until the table is read) and their versions.
        self.docs: dict[str, dict[str, Any]] = {
            name: copy.deepcopy(ks.vschema) for name, ks in proxy.config.keyspaces.items()
        }
        self.versions: dict[str, int] = {}
        # The serving topologies (proxy/resharding/topology.py), kept on the same shard and
        # followed by the same poll: keyspace -> stored version (absent: the cluster file's).
        self.topology_versions: dict[str, int] = {}
        self.loaded = False  # the table has been read at least once
        self._table: str | None = None
        self._topology_table: str | None = None
        self._lock = asyncio.Lock()  # one read-install at a time: installs never go back in time
        self._task: asyncio.Task[None] | None = None
        self._bad_versions: set[tuple[str, int]] = set()  # logged once

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        """Read (or seed) the table and install it; then follow it. A designated shard that is
        down leaves the files' vschema in force until the follower reaches it."""
        try:
            await self.refresh()
        except ProxyError as e:
            logger.warning(
                "vschema store not read at start: serving the files' vschema until it is",
                extra={"keyspace": self.location[0], "shard": self.location[1], "error": e.message},
            )
        self._task = asyncio.get_running_loop().create_task(self._follow(), name="live-vschema")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._pools.close()

    # -- reading -----------------------------------------------------------------------
    async def _ensure_table(self, sc: ShardConnection) -> str:
        if self._table is not None:
            return self._table
        self._table = await ensure_sidecar_table(sc, self.cluster, SIDECAR_TABLE, _create_table)
        return self._table

    async def _read_topology(self, sc: ShardConnection) -> dict[str, KeyspaceTopology]:
        if self._topology_table is None:
            self._topology_table = await topology_table(sc)
        return await load_topology(sc, self.proxy.config, base=self.proxy.file_topology, table=self._topology_table,
                                   current=self.proxy.topology)

    async def _read(self, sc: ShardConnection, for_update: bool = False) -> dict[str, StoredDoc]:
        table = await self._ensure_table(sc)
        res = await sc.execute(
            f"select keyspace, doc, version from {table} where cluster = {hex_literal(self.cluster)}"
            + (" for update" if for_update else "")
        )
        out: dict[str, StoredDoc] = {}
        for ks, doc, version in res.rows:
            name = row_text(ks)
            try:
                parsed = json.loads(row_text(doc))
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                logger.error("vschema store: unreadable document ignored", extra={"keyspace": name})
                continue
            out[name] = StoredDoc(parsed, int(row_text(version)))
        return out

    async def _seed_missing(self, sc: ShardConnection, stored: Mapping[str, StoredDoc]) -> bool:
        """Rows for the cluster file's keyspaces that have none, from their files; True if any
        was written (by this proxy or, concurrently, by another)."""
        missing = [name for name in self.proxy.config.keyspaces if name not in stored]
        if not missing:
            return False
        table = await self._ensure_table(sc)
        values = ", ".join(
            f"({hex_literal(self.cluster)}, {hex_literal(name)}, {utf8_literal(json.dumps(self.proxy.config.keyspaces[name].vschema))}, "
            f"0, {utf8_literal('seeded from ' + str(self.proxy.config.keyspaces[name].vschema_path))}, utc_timestamp(6))"
            for name in missing
        )
        await sc.execute(
            f"insert ignore into {table} (cluster, keyspace, doc, version, change_sql, updated_at) values {values}"
        )
        logger.info("vschema store seeded from files", extra={"keyspaces": ",".join(missing)})
        return True

    async def refresh(self) -> set[str]:
        """Read the table (seeding missing keyspaces) and install what changed; returns the
        keyspaces whose row changed since the last read."""
        async with self._lock:
            async with self._pool.connection() as sc:
                stored = await self._read(sc)
                if await self._seed_missing(sc, stored):
                    stored = await self._read(sc)
                topologies = await self._read_topology(sc)
            changed = {ks for ks in self.proxy.config.keyspaces
                       if ks in stored and self.versions.get(ks) != stored[ks].version}
            changed |= {ks for ks, t in topologies.items() if self.topology_versions.get(ks, 0) != t.version}
            first = not self.loaded
            self.loaded = True
            if changed or first:
                self._install_stored(stored, topologies)
            return changed if not first else set()

    def _docs_with(self, stored: Mapping[str, StoredDoc]) -> dict[str, dict[str, Any]]:
        return {name: (stored[name].doc if name in stored else self.docs[name]) for name in self.proxy.config.keyspaces}

    def build(
        self, docs: Mapping[str, Mapping[str, Any]], topologies: Mapping[str, KeyspaceTopology] | None = None,
        *, reads: bool = False,
    ) -> VSchema:
        """The whole vschema from per-keyspace documents, on the serving shards of
        ``topologies`` (default: the ones in force); with ``reads``, on their read shards."""
        config = self.proxy.config
        topologies = topologies if topologies is not None else self.proxy.topology
        return build_vschema(
            {name: (docs[name], list(topologies[name].reads if reads else topologies[name].serving))
             for name in config.keyspaces},
            config.routing_rules or None,
        )

    def build_for_reads(
        self, docs: Mapping[str, Mapping[str, Any]], vschema: VSchema,
        topologies: Mapping[str, KeyspaceTopology] | None = None,
    ) -> VSchema:
        """The vschema reads route by: ``vschema`` itself unless a keyspace's reads were
        switched apart from its writes (a reads-only resharding switch)."""
        topologies = topologies if topologies is not None else self.proxy.topology
        if all(t.reading is None for t in topologies.values()):
            return vschema
        return self.build(docs, topologies, reads=True)

    def _install_stored(self, stored: Mapping[str, StoredDoc], topologies: Mapping[str, KeyspaceTopology]) -> None:
        docs = self._docs_with(stored)
        versions = {ks: s.version for ks, s in stored.items()}
        try:
            vschema = self.build(docs, topologies)
            read_vschema = self.build_for_reads(docs, vschema, topologies)
        except VSchemaError as e:
            key = (",".join(sorted(versions)), sum(versions.values()))
            if key not in self._bad_versions:
                self._bad_versions.add(key)
                logger.error("vschema store holds an invalid vschema: keeping the current one",
                             extra={"error": str(e), "versions": json.dumps(versions)})
            self.versions = versions  # not retried every poll; the next change is
            self.topology_versions = {ks: t.version for ks, t in topologies.items()}
            return
        self._install(vschema, read_vschema, docs, versions, topologies)

    def _install(
        self, vschema: VSchema, read_vschema: VSchema, docs: dict[str, dict[str, Any]], versions: dict[str, int],
        topologies: Mapping[str, KeyspaceTopology] | None = None,
    ) -> None:
        self.docs, self.versions = docs, versions
        if topologies is not None:
            self.topology_versions = {ks: t.version for ks, t in topologies.items()}
            self.proxy.install_topology(topologies, vschema, read_vschema)  # shard pools, then the vschemas
        else:
            self.proxy.vschema, self.proxy.read_vschema = vschema, read_vschema
        DEFAULT_CACHE.clear()  # plans of the old vschema would never match again; free them now
        logger.info("vschema installed", extra={"versions": json.dumps(versions, sort_keys=True),
                                                "topology_versions": json.dumps(self.topology_versions)})

    # -- following ---------------------------------------------------------------------
    async def _follow(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                changed = await self._poll()
            except ProxyError as e:
                if not failing:
                    logger.warning("vschema store not reachable: following it again when it is",
                                   extra={"keyspace": self.location[0], "shard": self.location[1], "error": e.message})
                failing = True
                continue
            except Exception:  # a bug must not end the following for the process's lifetime
                logger.exception("vschema store: following failed; trying again")
                continue
            failing = False
            for keyspace in sorted(changed):
                await self._after_change(keyspace)

    async def _poll(self) -> set[str]:
        if not self.loaded or self._table is None:
            return await self.refresh()
        if self._topology_table is None:
            return await self.refresh()
        cluster = hex_literal(self.cluster)
        async with self._pool.connection() as sc:
            # One round trip for both: the vschema's versions and the topologies'.
            res = await sc.execute(
                f"select 'v', keyspace, version from {self._table} where cluster = {cluster} union all "
                f"select 't', keyspace, version from {self._topology_table} where cluster = {cluster}"
            )
        seen = {row_text(ks): int(row_text(v)) for kind, ks, v in res.rows if kind == b"v"}
        topology_seen = {row_text(ks): int(row_text(v)) for kind, ks, v in res.rows if kind == b"t"}
        if all(seen.get(ks) == self.versions.get(ks)
               and topology_seen.get(ks, 0) == self.topology_versions.get(ks, 0) for ks in self.proxy.config.keyspaces):
            return set()
        return await self.refresh()  # a change, or a row deleted to re-seed it from its file

    async def _after_change(self, keyspace: str) -> None:
        """What depends on a keyspace's vschema or tables, refreshed after a change made elsewhere:
        its tracked schema and message tables (``schema_changed``), its topics. A failure is
        logged; the timers of those services read the keyspace again later."""
        refreshes: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("message tables' shards", lambda: self.proxy.topology_followed(keyspace)),
            ("schema and message tables", lambda: self.proxy.schema_changed(keyspace, f"vschema change of {keyspace}")),
            ("topics", lambda: self.proxy.topics.refresh(keyspace)),
        ]
        for what, refresh in refreshes:
            try:
                await refresh()
            except ProxyError as e:
                logger.warning("refresh after a vschema change failed",
                               extra={"keyspace": keyspace, "what": what, "error": e.message})
            except Exception:  # a bug in a refresh must not end the following
                logger.exception("refresh after a vschema change failed", extra={"keyspace": keyspace, "what": what})

    # -- changing ------------------------------------------------------------------------
    async def change(self, keyspace: str, mutate: DocMutation | None, change_sql: str) -> None:
        """Apply ``mutate`` to ``keyspace``'s document in the store (None: no edit, only tell every
        proxy that something of the keyspace changed); validated by building the whole vschema
        first. Raises the mutation's or the build's error with nothing changed."""
        if keyspace not in self.proxy.config.keyspaces:
            raise ProxyError(ER_BAD_DB_ERROR, f"VT05003: unknown database '{keyspace}' in vschema")
        for attempt in range(_CAS_ATTEMPTS):
            try:
                await self._change_once(keyspace, mutate, change_sql)
                return
            except VSchemaChangeConflict:
                if attempt == _CAS_ATTEMPTS - 1:
                    raise
                logger.warning("vschema change raced an outside edit: again", extra={"keyspace": keyspace})

    async def add_table(
        self, keyspace: str, table: str, entry: dict[str, Any], vindexes: dict[str, Any], change_sql: str
    ) -> None:
        """Add a table (and the vindexes it needs) to a keyspace's vschema (``CREATE QUEUE``)."""

        def add(doc: dict[str, Any]) -> dict[str, Any]:
            known = doc.setdefault("vindexes", {})
            known.update({k: v for k, v in vindexes.items() if k not in known})
            doc.setdefault("tables", {})[table] = entry
            return doc

        await self.change(keyspace, add, change_sql)

    async def announce(self, keyspace: str, what: str) -> None:
        """Tell every proxy that something of ``keyspace`` changed that lives outside the vschema
        (a topic created, dropped or altered): they refresh the keyspace within a second. Best
        effort: the change itself is made and durable; the others would find it on first use."""
        try:
            await self.change(keyspace, None, what)
        except ProxyError as e:
            logger.warning("change not announced to the other proxies", extra={"keyspace": keyspace, "change": what,
                                                                              "error": e.message})

    async def _change_once(self, keyspace: str, mutate: DocMutation | None, change_sql: str) -> None:
        async with self._lock:
            async with self._pool.connection() as sc:
                async with sc.transaction():
                    stored = await self._read(sc, for_update=True)
                    if keyspace not in stored:
                        await self._seed_missing(sc, stored)
                        stored = await self._read(sc, for_update=True)
                    current = stored[keyspace]
                    docs = self._docs_with(stored)
                    docs[keyspace] = mutate(copy.deepcopy(current.doc)) if mutate is not None else current.doc
                    try:
                        vschema = self.build(docs)
                        read_vschema = self.build_for_reads(docs, vschema)
                    except VSchemaError as e:
                        raise ProxyError(ER_UNKNOWN_ERROR, str(e)) from e
                    version = max(s.version for s in stored.values()) + 1
                    res = await sc.execute(
                        f"update {self._table} set doc = {utf8_literal(json.dumps(docs[keyspace]))}, version = {version}, "
                        f"change_sql = {utf8_literal(change_sql[:60000])}, updated_at = utc_timestamp(6) "
                        f"where cluster = {hex_literal(self.cluster)} and keyspace = {hex_literal(keyspace)} "
                        f"and version = {current.version}"
                    )
                    if res.affected_rows != 1:
                        raise VSchemaChangeConflict(keyspace)
            versions = {ks: s.version for ks, s in stored.items()}
            versions[keyspace] = version
            self._install(vschema, read_vschema, docs, versions)
        logger.info("vschema changed", extra={"keyspace": keyspace, "version": version, "change": change_sql[:200]})


__all__ = ["LiveVSchema", "StoredDoc", "VSchemaChangeConflict"]
