"""The serving-side API the Reshard workflow calls: topology store, denied writes, journal."""

from __future__ import annotations

import asyncio
import json
import uuid

import pymysql
import pytest

from proxy.errors import ProxyError
from proxy.resharding.denied_writes import (
    BYPASS_SQL,
    allow_writes,
    denied_tables,
    deny_writes,
    is_denied_write_error,
)
from proxy.resharding.journal import (
    Journal,
    KeyspaceShard,
    ShardGtid,
    journal_id,
    read_journal,
    write_journal,
)
from proxy.resharding.topology import (
    KeyspaceTopology,
    TopologyConflict,
    TopologyError,
    cluster_topology,
    load_topology,
    save_topology,
    start_stored_local_shards,
    topology_table,
)
from proxy.sidecar_tables import hex_literal
from tests.resharding.split import KEYSPACE, SOURCE, SPLIT_SERVING, TARGETS, Split, run_sql

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_keyspace_never_resharded_is_served_by_its_cluster_file_shards(split: Split) -> None:
    topology = (await split.current())
    assert topology.serving == ("-80", "80-")
    assert topology.endpoint("-80") == split.cluster.endpoint(KEYSPACE, "-80")
    async with split.store() as sc:
        assert (await load_topology(sc, split.config))["lookup"] == cluster_topology(split.config)["lookup"]


async def test_topology_is_saved_with_compare_and_set_and_read_back(split: Split) -> None:
    topology = await split.prepare()
    assert set(TARGETS) <= set(topology.shards) and topology.serving == ("-80", "80-")
    async with split.store() as sc:
        saved = await save_topology(sc, KEYSPACE, topology.with_serving(["80-", *TARGETS]), topology.version)
        assert saved.version == topology.version + 1
        assert saved.serving == SPLIT_SERVING  # key-range order whatever the order given
        assert (await load_topology(sc, split.config))[KEYSPACE] == saved
        with pytest.raises(TopologyConflict) as e:
            await save_topology(sc, KEYSPACE, topology, topology.version)
        assert e.value.code == 1105 and "changed concurrently" in e.value.message
    assert KeyspaceTopology.from_json(KEYSPACE, saved.to_json(), saved.version) == saved
    assert "reading" not in saved.to_json()  # one list for reads and writes: the document as before


async def test_a_reads_only_switch_is_stored_as_a_read_list_beside_the_serving_one(split: Split) -> None:
    topology = await split.prepare()
    async with split.store() as sc:
        saved = await save_topology(sc, KEYSPACE, topology.with_reading(["80-", *TARGETS]), topology.version)
        assert (saved.serving, saved.reads, saved.routed) == (("-80", "80-"), SPLIT_SERVING, ("-40", "-80", "40-80", "80-"))
        assert (await load_topology(sc, split.config))[KEYSPACE] == saved
        # The write switch takes the reads with it; reads back on the writes' shards: no read list.
        assert topology.with_reading(["80-", *TARGETS]).with_serving(SPLIT_SERVING).reading is None
        assert saved.with_reading(["-80", "80-"]).reading is None
        with pytest.raises(ProxyError, match="shard -40 still serves"):
            saved.without_shards(TARGETS)
        await save_topology(sc, KEYSPACE, saved.with_reading(None), saved.version)


async def test_denied_writes_fail_with_vitess_text_until_allowed_and_reads_go_on(split: Split) -> None:
    src = split.cluster.endpoint(KEYSPACE, SOURCE)
    async with split._source() as sc:
        await deny_writes(sc, src.database, ["customer"])
        await deny_writes(sc, src.database, ["customer"])  # idempotent
        assert await denied_tables(sc, src.database) == ["customer"]
    with pytest.raises(pymysql.err.OperationalError) as e:
        await asyncio.to_thread(run_sql, src, "insert into customer (customer_id, email) values (1, 'x')")
    assert is_denied_write_error(e.value)
    assert e.value.args[0] == 1105 and "disallowed due to rule: enforce denied tables" in e.value.args[1]
    await asyncio.to_thread(run_sql, src, "select count(*) from customer")
    # The reverse replication's bypass.
    await asyncio.to_thread(run_sql, src, BYPASS_SQL, "delete from customer where customer_id = -1")
    async with split._source() as sc:
        await allow_writes(sc, src.database, ["customer"])
        assert await denied_tables(sc, src.database) == []
    await asyncio.to_thread(run_sql, src, "delete from customer where customer_id = -1")


async def test_journal_is_written_once_and_read_back(split: Split) -> None:
    participants = (KeyspaceShard(KEYSPACE, SOURCE),)
    workflow = f"test-journal-{uuid.uuid4().hex}"  # the cluster lives for the whole session
    jid = journal_id(workflow, KEYSPACE, participants)
    journal = Journal(jid, "SHARDS", KEYSPACE, ("customer",), (ShardGtid(KEYSPACE, "-40", "5-105-3"),),
                      participants, (workflow,))
    assert Journal.from_json(journal.to_json()) == journal
    async with split._source() as sc:
        assert await write_journal(sc, journal) is True
        assert await write_journal(sc, journal) is False
        assert await read_journal(sc, jid) == journal
        assert await read_journal(sc, jid + 1) is None


async def test_shardgate_up_starts_the_local_shards_the_stored_topology_adds(split: Split) -> None:
    await split.prepare()
    for shard in TARGETS:
        await split.cluster.stop_shard(KEYSPACE, shard)
        assert not split.cluster.is_running(KEYSPACE, shard)
    assert await start_stored_local_shards(split.cluster) == [(KEYSPACE, s) for s in TARGETS]
    for shard in TARGETS:
        assert split.cluster.is_running(KEYSPACE, shard)
        assert run_sql(split.endpoint(shard), "select count(*) from customer") == [(0,)]


async def test_an_unreadable_stored_topology_is_an_error_or_keeps_the_one_in_force(split: Split) -> None:
    topology = await split.prepare()
    async with split.store() as sc:
        table = await topology_table(sc)
        await sc.execute(f"update {table} set doc = '{{\"serving\": 7}}', version = version + 1 "
                         f"where keyspace = '{KEYSPACE}'")
        try:
            with pytest.raises(TopologyError) as e:
                await load_topology(sc, split.config)
            assert e.value.code == 1105 and f"topology of keyspace {KEYSPACE}" in e.value.message
            kept = (await load_topology(sc, split.config, current={KEYSPACE: topology}))[KEYSPACE]
            assert kept.serving == topology.serving and kept.version == topology.version + 1
        finally:
            await sc.execute(f"update {table} set doc = convert({hex_literal(json.dumps(topology.to_json()))} using "
                             f"utf8mb4) where keyspace = '{KEYSPACE}'")
