"""Streaming: bounded memory for scatter results, early close stops the shards,
IN lists are cut per shard."""

from __future__ import annotations

from proxy import engine
from rewriter import PlanCache, plan_query

CACHE = PlanCache()


class CountingVCursor:
    """Wraps the test VCursor, counting rows each shard stream delivered and closes."""

    def __init__(self, inner):
        self.inner = inner
        self.rows_read = 0
        self.opened = 0
        self.closed = 0

    @property
    def vschema(self):
        return self.inner.vschema

    async def execute_shard(self, *a):
        return await self.inner.execute_shard(*a)

    async def execute_multi(self, *a):
        return await self.inner.execute_multi(*a)

    async def next_sequence_values(self, *a):
        return await self.inner.next_sequence_values(*a)

    async def stream_shard(self, keyspace, shard, sql):
        self.opened += 1
        s = self.inner.stream_shard(keyspace, shard, sql)
        try:
            async for chunk in s:
                self.rows_read += len(chunk.rows)
                yield chunk
        finally:
            await s.aclose()
            self.closed += 1


def planned(vcursor, sql):
    return plan_query(sql, vcursor.vschema, "commerce", CACHE)


async def test_ordered_merge_reads_shards_incrementally(loaded, vcursor):
    counting = CountingVCursor(vcursor)
    plan, bv = planned(vcursor, "select id, name from items order by id")
    stream = engine.stream(plan, counting, bv)
    first = await stream.__anext__()
    assert first.fields and first.rows
    assert counting.rows_read < 3000  # not everything buffered before the first chunk
    await stream.aclose()
    assert counting.opened == counting.closed == 2


async def test_merge_is_globally_ordered_across_chunks(loaded, vcursor):
    plan, bv = planned(vcursor, "select id from items order by id desc")
    ids = []
    async for chunk in engine.stream(plan, vcursor, bv):
        ids.extend(int(r[0]) for r in chunk.rows)
    assert ids == list(range(3000, 0, -1))


async def test_limit_closes_shard_streams_when_satisfied(loaded, vcursor):
    counting = CountingVCursor(vcursor)
    plan, bv = planned(vcursor, "select id from items order by id limit 3")
    rows = []
    async for chunk in engine.stream(plan, counting, bv):
        rows.extend(chunk.rows)
    assert rows == [(b"1",), (b"2",), (b"3",)]
    assert counting.rows_read <= 6  # LIMIT offset+count pushed to each shard
    assert counting.opened == counting.closed


async def test_limit_over_unpushable_input_stops_reading(loaded, vcursor):
    # DISTINCT at the proxy: the limit cannot be pushed, the stream is closed early instead
    counting = CountingVCursor(vcursor)
    plan, bv = planned(vcursor, "select distinct id from items order by id limit 2")
    rows = []
    async for chunk in engine.stream(plan, counting, bv):
        rows.extend(chunk.rows)
    assert rows == [(b"1",), (b"2",)]
    assert counting.opened == counting.closed == 2


async def test_unordered_scatter_stream_returns_every_row_once(loaded, vcursor):
    plan, bv = planned(vcursor, "select id from items")
    ids = []
    first = True
    async for chunk in engine.stream(plan, vcursor, bv):
        assert bool(chunk.fields) == first
        first = False
        ids.extend(int(r[0]) for r in chunk.rows)
    assert sorted(ids) == list(range(1, 3001))


async def test_in_list_is_cut_per_shard(loaded, vcursor):
    vcursor.statements.clear()
    plan, bv = planned(vcursor, "select id from items where id in (1, 2, 3, 4, 5, 6, 7, 8)")
    res = await engine.execute(plan, vcursor, bv)
    assert sorted(int(r[0]) for r in res.rows) == list(range(1, 9))
    sent = [s for s in vcursor.statements if s[0] == "commerce"]
    hash_v = vcursor.vschema.keyspaces["commerce"].vindexes["hash"]
    for _ks, shard, sql in sent:
        listed = [int(x) for x in sql.split("(", 1)[1].rstrip(")").split(",")]
        assert all(vcursor.vschema.shard_for("commerce", k) == shard for k in hash_v.map(listed))
    assert sum(len(s[2].split(",")) for s in sent) == 8


async def test_route_to_no_shard_still_returns_fields(loaded, vcursor):
    plan, bv = planned(vcursor, "select id, name from items where id in (-1)")
    res = await engine.execute(plan, vcursor, bv)
    assert [f.name for f in res.fields] == ["id", "name"] and res.rows == []


async def test_vexplain_answers_one_json_row(vcursor):
    import json

    plan, bv = planned(vcursor, "vexplain plan select * from items where id = 3")
    res = await engine.execute(plan, vcursor, bv)
    assert [f.name for f in res.fields] == ["JSON"] and len(res.rows) == 1
    assert json.loads(res.rows[0][0])["Variant"] == "EqualUnique"


async def test_dml_plans_stream_their_single_result(vcursor):
    plan, bv = planned(vcursor, "update items set name = name where id = -12345")
    chunks = [c async for c in engine.stream(plan, vcursor, bv)]
    assert len(chunks) == 1 and chunks[0].affected_rows == 0 and not chunks[0].fields


async def test_shard_qualified_query_reads_only_that_shard(loaded, vcursor):
    plan, bv = planned(vcursor, "select count(*) from `commerce:80-`.items")
    res = await engine.execute(plan, vcursor, bv)
    direct = await vcursor.execute_shard("commerce", "80-", "select count(*) from items")
    assert res.rows == direct.rows and int(res.rows[0][0]) < 3000
