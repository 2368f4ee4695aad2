"""A VStream across a resharding switch (split of commerce/-80 into -40,40-80, made by hand by
tests/resharding/split.py): everything before the journal comes from the source, everything
after it from the targets, nothing lost, nothing repeated, per-shard order kept."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pymysql
import pytest

from proxy.cdc import EventGroup, VStream, run_cdc
from proxy.cdc.events import JournalEvent, RowEvent
from proxy.cdc.positions import Vgtid
from proxy.pools import ShardAddress, ShardPools
from proxy.resharding.denied_writes import BYPASS_SQL
from proxy.resharding.journal import Journal, KeyspaceShard, ShardGtid, journal_id, write_journal
from proxy.resharding.topology import read_topology, serving_endpoints, shard_locator
from proxy.spark.options import SourceOptions
from proxy.spark.stream_reader import ChangeStreamReader, vgtid_of
from tests.proxy.sessions_support import dsn_cluster_file
from tests.proxy_process import start_proxy, stop_proxy
from tests.resharding.split import KEYSPACE, SOURCE, TARGETS, Split, ids_on, run_sql, shard_of

pytestmark = pytest.mark.asyncio(loop_scope="session")

TABLE = f"{KEYSPACE}.customer"
_ids = itertools.count(int(time.time() * 1000) % 10_000_000 * 1_000_000 + 500_000_000_000, 100_000)

Change = tuple[str, int, str]  # (op, customer_id, shard)


async def _stream(split: Split, start: str | Vgtid = "current", **kw: object) -> VStream:
    endpoints = serving_endpoints(await read_topology(split.config))
    stream = VStream(endpoints, [TABLE], start=start, shard_locator=shard_locator(split.config), **kw)  # type: ignore[arg-type]
    await stream.open()
    return stream


def _changes(group: EventGroup) -> list[Change]:
    out: list[Change] = []
    for event in group.events:
        if isinstance(event, RowEvent):
            for change in event.changes:
                row = change.after if change.after is not None else change.before
                assert row is not None
                out.append((str(event.op), int(row["customer_id"]), event.shard))
    return out


async def _collect(stream: VStream, rows: int, seconds: float = 20.0) -> tuple[list[Change], list[EventGroup]]:
    """Row changes until ``rows`` of them came (and the groups, journals among them)."""
    changes: list[Change] = []
    groups: list[EventGroup] = []
    async with asyncio.timeout(seconds):
        while len(changes) < rows:
            group = await anext(stream)
            groups.append(group)
            changes.extend(_changes(group))
    return changes, groups


async def _nothing_more(stream: VStream, seconds: float = 1.0) -> list[Change]:
    extra: list[Change] = []
    try:
        async with asyncio.timeout(seconds):
            async for group in stream:
                extra.extend(_changes(group))
    except TimeoutError:
        pass
    return extra


def _write(split: Split, shard: str, *statements: str) -> None:
    run_sql(split.endpoint(shard), *statements)


def _per_shard(changes: Sequence[Change]) -> dict[str, list[tuple[str, int]]]:
    out: dict[str, list[tuple[str, int]]] = {}
    for op, key, shard in changes:
        out.setdefault(shard, []).append((op, key))
    return out


async def test_a_vstream_continues_across_a_split_with_nothing_lost_or_repeated(split: Split) -> None:
    await split.prepare()
    base = next(_ids)
    moved = ids_on(split.vschema, "customer", SOURCE, 6, base)
    stays = ids_on(split.vschema, "customer", "80-", 2, base)
    stream = await _stream(split, include_reshard_journal_events=True)
    try:
        for i in moved[:4]:
            await asyncio.to_thread(_write, split, SOURCE, f"insert into customer (customer_id, email) values ({i}, 'a')")
        await asyncio.to_thread(_write, split, SOURCE, f"update customer set email = 'b' where customer_id = {moved[0]}")
        for i in stays:
            await asyncio.to_thread(_write, split, "80-", f"insert into customer (customer_id, email) values ({i}, 'a')")
        journal = await split.switch()
        expected_after: list[Change] = []
        for i in moved[:4]:
            target = shard_of(split.vschema, "customer", i, TARGETS)
            await asyncio.to_thread(_write, split, target, f"update customer set email = 'c' where customer_id = {i}")
            expected_after.append(("update", i, target))
        for i in moved[4:]:
            target = shard_of(split.vschema, "customer", i, TARGETS)
            await asyncio.to_thread(_write, split, target, f"insert into customer (customer_id, email) values ({i}, 'd')")
            expected_after.append(("insert", i, target))
        target = shard_of(split.vschema, "customer", moved[1], TARGETS)
        await asyncio.to_thread(_write, split, target, f"delete from customer where customer_id = {moved[1]}")
        expected_after.append(("delete", moved[1], target))
        expected = [("insert", i, SOURCE) for i in moved[:4]] + [("update", moved[0], SOURCE)]
        expected += [("insert", i, "80-") for i in stays] + expected_after
        changes, groups = await _collect(stream, len(expected))
        changes += await _nothing_more(stream)
        vgtid = stream.vgtid
    finally:
        await stream.aclose()
    assert sorted(changes) == sorted(expected)  # each once: the rows the split copied are not sent again
    assert _per_shard(changes) == _per_shard(expected)  # in each shard's order
    journals = [e for g in groups for e in g.events if isinstance(e, JournalEvent)]
    assert len(journals) == 1 and journals[0].journal == journal
    journal_at = next(n for n, g in enumerate(groups) if any(isinstance(e, JournalEvent) for e in g.events))
    assert all(g.shard != SOURCE for g in groups[journal_at + 1 :])  # the source ends at its journal
    assert all(g.shard not in TARGETS for g in groups[:journal_at])
    assert sorted(s.shard for s in vgtid.shard_gtids if s.keyspace == KEYSPACE) == sorted([*TARGETS, "80-"])


async def test_without_journal_events_the_switch_is_silent_and_stop_on_reshard_ends_the_stream(split: Split) -> None:
    await split.prepare()
    moved = ids_on(split.vschema, "customer", SOURCE, 2, next(_ids))
    silent = await _stream(split)
    stopping = await _stream(split, stop_on_reshard=True)
    try:
        await asyncio.to_thread(_write, split, SOURCE, f"insert into customer (customer_id, email) values ({moved[0]}, 'a')")
        await split.switch()
        target = shard_of(split.vschema, "customer", moved[1], TARGETS)
        await asyncio.to_thread(_write, split, target, f"insert into customer (customer_id, email) values ({moved[1]}, 'a')")
        changes, groups = await _collect(silent, 2)
        assert changes == [("insert", moved[0], SOURCE), ("insert", moved[1], target)]
        assert not any(isinstance(e, JournalEvent) for g in groups for e in g.events)
        ended: list[EventGroup] = []
        async with asyncio.timeout(20):
            async for group in stopping:
                ended.append(group)
        assert [c for g in ended for c in _changes(g)] == [("insert", moved[0], SOURCE)]
        assert isinstance(ended[-1].events[0], JournalEvent)  # forwarded, then the end
        # Its position names the source before the journal: a consumer resuming from it moves on.
        assert ended[-1].vgtid is not None and ended[-1].vgtid.position_of(KEYSPACE, SOURCE) is not None
    finally:
        await silent.aclose()
        await stopping.aclose()


async def test_a_vgtid_saved_before_the_switch_resumes_after_it(split: Split) -> None:
    await split.prepare()
    moved = ids_on(split.vschema, "customer", SOURCE, 6, next(_ids))
    first = await _stream(split)
    try:
        for i in moved[:2]:
            await asyncio.to_thread(_write, split, SOURCE, f"insert into customer (customer_id, email) values ({i}, 'a')")
        await _collect(first, 2)
        saved = first.vgtid.to_json()
    finally:
        await first.aclose()
    for i in moved[2:4]:  # after the save point, before the switch: on the source
        await asyncio.to_thread(_write, split, SOURCE, f"insert into customer (customer_id, email) values ({i}, 'a')")
    await split.switch()
    expected = [("insert", i, SOURCE) for i in moved[2:4]]
    for i in moved[4:]:
        target = shard_of(split.vschema, "customer", i, TARGETS)
        await asyncio.to_thread(_write, split, target, f"insert into customer (customer_id, email) values ({i}, 'a')")
        expected.append(("insert", i, target))
    # The saved VGTID names -80, which serves no more: read up to its journal, then the targets.
    resumed = await _stream(split, start=Vgtid.from_json(saved), include_reshard_journal_events=True)
    try:
        changes, groups = await _collect(resumed, len(expected))
        changes += await _nothing_more(resumed)
    finally:
        await resumed.aclose()
    assert sorted(changes) == sorted(expected)
    assert _per_shard(changes) == _per_shard(expected)
    assert sum(isinstance(e, JournalEvent) for g in groups for e in g.events) == 1


async def test_vstream_sql_through_a_proxy_follows_the_switch(split: Split, tmp_path: Path) -> None:
    await split.prepare()
    moved = ids_on(split.vschema, "customer", SOURCE, 4, next(_ids))
    proxy = start_proxy(split.config.path, split.cluster.endpoints, tmp_path / "proxy.log")
    conn = proxy.connect(KEYSPACE, autocommit=True, cursorclass=pymysql.cursors.SSCursor)
    try:
        cur = conn.cursor()
        cur.execute("SET WORKLOAD = OLAP")
        await asyncio.to_thread(cur.execute, "VSTREAM * FROM customer LIMIT 4")
        names = [d[0] for d in cur.description]
        for i in moved[:2]:
            await asyncio.to_thread(_write, split, SOURCE, f"insert into customer (customer_id, email) values ({i}, 'a')")
        await split.switch()
        expected = [("+", i) for i in moved[:2]]
        for i in moved[2:]:
            target = shard_of(split.vschema, "customer", i, TARGETS)
            await asyncio.to_thread(_write, split, target, f"insert into customer (customer_id, email) values ({i}, 'a')")
            expected.append(("+", i))
        async with asyncio.timeout(20):
            rows = await asyncio.to_thread(cur.fetchall)
    finally:
        conn.close()
        stop_proxy(proxy)
    got = [(r[names.index("op")], int(r[names.index("customer_id")])) for r in rows]
    # The source's changes first, in order; the two after the switch may be on different targets,
    # whose streams the VSTREAM merges in no fixed order between shards.
    assert got[:2] == expected[:2] and sorted(got[2:]) == sorted(expected[2:])
    last = Vgtid.from_json(rows[-1][names.index("vgtid")])
    assert sorted(s.shard for s in last.shard_gtids) == sorted([*TARGETS, "80-"])


async def test_shardgate_cdc_writes_the_journal_event_and_goes_on_on_the_targets(split: Split) -> None:
    await split.prepare()
    moved = ids_on(split.vschema, "customer", SOURCE, 2, next(_ids))
    out = io.StringIO()
    stop = asyncio.Event()
    running = asyncio.ensure_future(run_cdc(split.config, [TABLE], "current", "vstream", out, stop=stop, max_rows=2,
                                            include_reshard_journal_events=True))
    try:
        await asyncio.sleep(1.0)  # its positions are read at start
        await asyncio.to_thread(_write, split, SOURCE, f"insert into customer (customer_id, email) values ({moved[0]}, 'a')")
        await split.switch()
        target = shard_of(split.vschema, "customer", moved[1], TARGETS)
        await asyncio.to_thread(_write, split, target, f"insert into customer (customer_id, email) values ({moved[1]}, 'a')")
        async with asyncio.timeout(20):
            final = await running
    finally:
        stop.set()
        if not running.done():
            running.cancel()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["shard"], e["row_changes"][0]["after"]["customer_id"]) for e in events if e["type"] == "ROW"] == [
        (SOURCE, moved[0]), (target, moved[1])]
    journals = [e for e in events if e["type"] == "JOURNAL"]
    assert len(journals) == 1 and journals[0]["journal"]["participants"] == [{"keyspace": KEYSPACE, "shard": SOURCE}]
    assert final is not None and SOURCE not in {s.shard for s in final.shard_gtids}


async def test_the_spark_source_reads_the_sources_up_to_the_journal_then_the_targets(split: Split, tmp_path: Path) -> None:
    await split.prepare()
    # The source reads shard endpoints from the cluster file: one naming the test cluster's shards.
    file_shards = {key: e for key, e in split.cluster.endpoints.items() if key[1] in split.config.keyspaces[key[0]].shards}
    config = dsn_cluster_file(SimpleNamespace(endpoints=file_shards), tmp_path)
    options = SourceOptions.parse({"config": str(config), "tables": TABLE, "startingPosition": "current"})
    reader = await asyncio.to_thread(ChangeStreamReader, options)  # it reads the topology (asyncio.run)
    first = await asyncio.to_thread(reader.initialOffset)
    moved = ids_on(split.vschema, "customer", SOURCE, 4, next(_ids))
    expected: list[Change] = []
    for i in moved[:2]:
        await asyncio.to_thread(_write, split, SOURCE, f"insert into customer (customer_id, email) values ({i}, 'a')")
        expected.append(("insert", i, SOURCE))
    await split.switch()
    for i in moved[2:]:
        target = shard_of(split.vschema, "customer", i, TARGETS)
        await asyncio.to_thread(_write, split, target, f"insert into customer (customer_id, email) values ({i}, 'a')")
        expected.append(("insert", i, target))
    # A reverse replication writes to the source after the journal: never part of the stream.
    await asyncio.to_thread(_write, split, SOURCE, BYPASS_SQL, f"delete from customer where customer_id = {moved[0]}")

    def batch(start: dict, end: dict) -> list[Change]:
        rows = [row for p in reader.partitions(start, end) for row in reader.read(p)]
        return [(r[0], json.loads(r[5] or r[4])["customer_id"], r[2]) for r in rows]

    second = await asyncio.to_thread(reader.latestOffset, first)  # the source up to its journal
    assert second["retired"] == [f"{KEYSPACE}/{SOURCE}"] and set(second["next"]) == {f"{KEYSPACE}/{t}" for t in TARGETS}
    third = await asyncio.to_thread(reader.latestOffset, second)  # the targets from the journal on
    assert {e.shard for e in vgtid_of(third).shard_gtids} == {*TARGETS, "80-"}
    changes = await asyncio.to_thread(batch, first, second) + await asyncio.to_thread(batch, second, third)
    assert sorted(changes) == sorted(expected)
    assert await asyncio.to_thread(batch, third, await asyncio.to_thread(reader.latestOffset, third)) == []


async def test_a_journal_with_several_participants_moves_the_stream_once_all_reached_it(split: Split) -> None:
    """A merge's journal names several sources: each ends at it, the others go on until theirs."""
    topology = await split.prepare()
    base = next(_ids)
    a, c = ids_on(split.vschema, "customer", SOURCE, 2, base)
    b = ids_on(split.vschema, "customer", "80-", 1, base)[0]
    d = ids_on(split.vschema, "customer", TARGETS[0], 1, base)[0]
    gtids = tuple(ShardGtid(KEYSPACE, t, str(run_sql(topology.endpoint(t), "select @@global.gtid_binlog_pos")[0][0]))
                  for t in TARGETS)
    participants = (KeyspaceShard(KEYSPACE, SOURCE), KeyspaceShard(KEYSPACE, "80-"))
    workflow = f"merge-{base}"
    journal = Journal(journal_id(workflow, KEYSPACE, participants), "SHARDS", KEYSPACE, ("customer",), gtids,
                      participants, (workflow,))
    pools = ShardPools([ShardAddress.of(KEYSPACE, s, e)
                        for s in (SOURCE, "80-") for e in [topology.endpoint(s)]], maxsize=1)
    stream = await _stream(split, include_reshard_journal_events=True)
    try:
        await asyncio.to_thread(_write, split, SOURCE, f"insert into customer (customer_id, email) values ({a}, 'a')")
        async with pools.get(KEYSPACE, SOURCE).connection() as sc:
            await write_journal(sc, journal)
        await asyncio.to_thread(_write, split, "80-", f"insert into customer (customer_id, email) values ({b}, 'b')")
        await asyncio.to_thread(_write, split, SOURCE, f"insert into customer (customer_id, email) values ({c}, 'c')")
        async with pools.get(KEYSPACE, "80-").connection() as sc:
            await write_journal(sc, journal)
        await asyncio.to_thread(_write, split, TARGETS[0], f"insert into customer (customer_id, email) values ({d}, 'd')")
        changes, groups = await _collect(stream, 3)
        changes += await _nothing_more(stream)
    finally:
        await stream.aclose()
        await pools.close()
    assert changes == [("insert", a, SOURCE), ("insert", b, "80-"), ("insert", d, TARGETS[0])]  # not c: after -80's journal
    journal_groups = [g for g in groups if any(isinstance(e, JournalEvent) for e in g.events)]
    assert len(journal_groups) == 1 and journal_groups[0].shard == "80-"  # forwarded when the last one reached it
    assert groups.index(journal_groups[0]) == len(groups) - 2


async def test_a_vstream_follows_a_switch_and_its_reverse(split: Split) -> None:
    await split.prepare()
    a, c = ids_on(split.vschema, "customer", SOURCE, 2, next(_ids))
    stream = await _stream(split, include_reshard_journal_events=True)
    try:
        await asyncio.to_thread(_write, split, SOURCE, f"insert into customer (customer_id, email) values ({a}, 'a')")
        await split.switch()
        target = shard_of(split.vschema, "customer", a, TARGETS)
        await asyncio.to_thread(_write, split, target, f"update customer set email = 'b' where customer_id = {a}")
        back = await split.reverse()  # the source rewritten from the targets: before its journal position
        await asyncio.to_thread(_write, split, SOURCE, f"insert into customer (customer_id, email) values ({c}, 'c')")
        changes, groups = await _collect(stream, 3)
        changes += await _nothing_more(stream)
        vgtid = stream.vgtid
    finally:
        await stream.aclose()
    assert changes == [("insert", a, SOURCE), ("update", a, target), ("insert", c, SOURCE)]
    journals = [e.journal for g in groups for e in g.events if isinstance(e, JournalEvent)]
    assert len(journals) == 2 and journals[1] == back
    assert sorted(s.shard for s in vgtid.shard_gtids) == [SOURCE, "80-"]
