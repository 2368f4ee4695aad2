"""DML through the engine against real shards: per-row routing, sequences, lookup
vindex rows, UPDATE/DELETE routing."""

from __future__ import annotations

import pytest

from proxy import engine
from proxy.engine.sequence import SequenceAllocator
from proxy.errors import ProxyError
from rewriter import PlanCache, errors, plan_query
from tests.engine.shard_vcursor import ShardVCursor
from vschema.loader import build_vschema

CACHE = PlanCache()


async def run(vcursor, sql, keyspace="commerce"):
    plan, bindvars = plan_query(sql, vcursor.vschema, keyspace, CACHE)
    return await engine.execute(plan, vcursor, bindvars)


async def shard_rows(vcursor, keyspace, sql):
    out = {}
    for shard in vcursor.vschema.shards(keyspace):
        res = await vcursor.execute_shard(keyspace, shard, sql)
        out[shard] = [tuple(r) for r in res.rows]
    return out


def expected_shard(vcursor, value):
    vs = vcursor.vschema
    ksid = vs.keyspaces["commerce"].vindexes["hash"].map([value])[0]
    return vs.shard_for("commerce", ksid)


async def test_insert_fills_auto_increment_from_the_sequence(vcursor):
    res = await run(vcursor, "insert into customer (email, tenant_id) values ('seq1@x', 1), ('seq2@x', 1)")
    assert res.affected_rows == 2
    first = res.insert_id
    assert first > 0
    rows = await shard_rows(vcursor, "commerce", "select customer_id, email from customer where email like 'seq%'")
    by_email = {r[1]: (int(r[0]), shard) for shard, rs in rows.items() for r in rs}
    assert by_email[b"seq1@x"][0] == first and by_email[b"seq2@x"][0] == first + 1
    for cid, shard in by_email.values():
        assert shard == expected_shard(vcursor, cid)


async def test_sequence_ids_are_reserved_in_blocks_of_cache(vcursor):
    await run(vcursor, "insert into customer (email) values ('block@x')")
    seq = await vcursor.execute_shard("lookup", "0", "select next_id, cache from customer_seq where id = 0")
    next_id, cache = (int(v) for v in seq.rows[0])
    res = await run(vcursor, "insert into customer (email) values ('block2@x')")
    assert res.insert_id < next_id  # served from the reserved block, no new reservation
    seq2 = await vcursor.execute_shard("lookup", "0", "select next_id from customer_seq where id = 0")
    assert int(seq2.rows[0][0]) == next_id
    assert cache == 100


async def test_select_next_values_from_sequence(vcursor):
    res = await run(vcursor, "select next 5 values from customer_seq", keyspace="lookup")
    assert [f.name for f in res.fields] == ["nextval"]
    first = int(res.rows[0][0])
    again = await run(vcursor, "select next value from customer_seq", keyspace="lookup")
    assert int(again.rows[0][0]) == first + 5


async def test_two_allocators_get_disjoint_blocks(vcursor):
    # two proxies share a sequence table: their blocks never overlap
    shard = vcursor.vschema.shards("lookup")[0]

    async def sql(q):
        return await vcursor.execute_shard("lookup", shard, q)

    a, b = SequenceAllocator(), SequenceAllocator()
    firsts = [await a.next_values("lookup", "corder_seq", 1, sql), await b.next_values("lookup", "corder_seq", 1, sql),
              await a.next_values("lookup", "corder_seq", 150, sql)]
    blocks = [(firsts[0], firsts[0] + 100), (firsts[1], firsts[1] + 100), (firsts[2], firsts[2] + 150)]
    for i, (s1, e1) in enumerate(blocks):
        for s2, e2 in blocks[i + 1:]:
            assert e1 <= s2 or e2 <= s1


async def test_multi_row_insert_is_split_per_shard(vcursor):
    vcursor.statements.clear()
    ids = list(range(9001, 9021))
    values = ", ".join(f"({i}, 'split{i}')" for i in ids)
    res = await run(vcursor, f"insert into customer (customer_id, email) values {values}")
    assert res.affected_rows == len(ids)
    inserts = [s for s in vcursor.statements if s[2].upper().startswith("INSERT INTO CUSTOMER")]
    assert sorted(s[1] for s in inserts) == sorted(vcursor.vschema.shards("commerce"))
    rows = await shard_rows(vcursor, "commerce", "select customer_id from customer where customer_id between 9001 and 9020")
    for shard, rs in rows.items():
        assert all(expected_shard(vcursor, int(r[0])) == shard for r in rs)
    assert sum(len(rs) for rs in rows.values()) == len(ids)


async def test_multi_row_insert_rows_keep_their_values_on_each_shard(vcursor):
    # a kept literal with braces around the values, a value shared by every row, and the same
    # INSERT again with other values (its plan from the cache)
    for base in (9301, 9401):
        ids = list(range(base, base + 12))
        values = ", ".join(f"({i}, concat(_utf8mb4'{{x}}', 'braces{i}', 'same'))" for i in ids)
        res = await run(vcursor, f"insert into customer (customer_id, email) values {values}")
        assert res.affected_rows == len(ids)
        rows = await shard_rows(vcursor, "commerce", f"select customer_id, email from customer "
                                                     f"where customer_id between {base} and {base + 11}")
        got = {int(r[0]): (r[1], shard) for shard, rs in rows.items() for r in rs}
        assert got == {i: (f"{{x}}braces{i}same".encode(), expected_shard(vcursor, i)) for i in ids}


async def test_owned_lookup_rows_are_created_with_the_owner_rows(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku, price) values (501, 7, 'a', 1), (502, 8, 'b', 2)")
    res = await vcursor.execute_shard("lookup", "0", "select order_id, keyspace_id from corder_order_id_idx "
                                      "where order_id in (501, 502) order by order_id")
    hash_v = vcursor.vschema.keyspaces["commerce"].vindexes["hash"]
    assert [(int(r[0]), r[1]) for r in res.rows] == [(501, hash_v.map([7])[0]), (502, hash_v.map([8])[0])]


async def test_select_by_lookup_column_visits_only_the_owning_shard(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku, price) values (601, 11, 'x', 5)")
    vcursor.statements.clear()
    res = await run(vcursor, "select order_id, customer_id, sku from corder where order_id = 601")
    assert res.rows == [(b"601", b"11", b"x")]
    commerce = [s for s in vcursor.statements if s[0] == "commerce"]
    assert [s[1] for s in commerce] == [expected_shard(vcursor, 11)]


async def test_auto_increment_fills_owned_lookup_vindex_column(vcursor):
    res = await run(vcursor, "insert into corder (customer_id, sku) values (12, 'auto')")
    order_id = res.insert_id
    found = await run(vcursor, f"select sku from corder where order_id = {order_id}")
    assert found.rows == [(b"auto",)]


async def test_delete_removes_owned_lookup_rows(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku) values (701, 21, 'd'), (702, 21, 'e')")
    res = await run(vcursor, "delete from corder where customer_id = 21")
    assert res.affected_rows == 2
    left = await vcursor.execute_shard("lookup", "0", "select count(*) from corder_order_id_idx where order_id in (701, 702)")
    assert left.rows == [(b"0",)]


async def test_update_by_vindex_goes_to_one_shard(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku, price) values (801, 31, 'u', 1)")
    vcursor.statements.clear()
    res = await run(vcursor, "update corder set price = 99 where customer_id = 31")
    assert res.affected_rows == 1
    assert [s[1] for s in vcursor.statements] == [expected_shard(vcursor, 31)]


async def test_scatter_update_sums_affected_rows(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku, price) values "
                       "(811, 41, 'scat', 1), (812, 42, 'scat', 1), (813, 43, 'scat', 1), (814, 44, 'scat', 1)")
    res = await run(vcursor, "update corder set price = 2 where sku = 'scat'")
    assert res.affected_rows == 4


async def test_insert_on_duplicate_key_update_is_routed_per_row(vcursor):
    await run(vcursor, "insert into customer (customer_id, email) values (9100, 'dup')")
    res = await run(vcursor, "insert into customer (customer_id, email) values (9100, 'dup2'), (9101, 'new') "
                             "on duplicate key update email = values(email)")
    assert res.affected_rows == 3  # 2 for the updated row, 1 for the new one
    found = await run(vcursor, "select customer_id, email from customer where customer_id in (9100, 9101)")
    assert sorted(found.rows) == [(b"9100", b"dup2"), (b"9101", b"new")]


async def test_changing_primary_vindex_column_is_refused(vcursor):
    with pytest.raises(errors.Unsupported, match="cannot UPDATE primary vindex columns"):
        await run(vcursor, "update customer set customer_id = 1 where email = 'x'")


async def test_duplicate_key_from_a_shard_reaches_the_caller_with_its_code(vcursor):
    await run(vcursor, "insert into customer (customer_id, email) values (9200, 'once')")
    with pytest.raises(ProxyError) as e:
        await run(vcursor, "insert into customer (customer_id, email) values (9200, 'twice')")
    assert e.value.code == 1062


async def test_update_of_owned_lookup_column_moves_the_lookup_row(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku) values (901, 51, 'mv')")
    res = await run(vcursor, "update corder set order_id = 902 where order_id = 901")
    assert res.affected_rows == 1
    lookup = await vcursor.execute_shard("lookup", "0", "select order_id from corder_order_id_idx "
                                         "where order_id in (901, 902)")
    assert lookup.rows == [(b"902",)]
    found = await run(vcursor, "select sku from corder where order_id = 902")
    assert found.rows == [(b"mv",)]


async def test_insert_select_routes_each_row_and_fills_auto_increment(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku, price) values "
                       "(1001, 61, 'copy', 1), (1002, 62, 'copy', 2), (1003, 63, 'copy', 3)")
    res = await run(vcursor, "insert into customer (email, tenant_id) "
                             "select sku, customer_id from corder where sku = 'copy'")
    assert res.affected_rows == 3
    first = res.insert_id
    rows = await shard_rows(vcursor, "commerce", "select customer_id, tenant_id from customer where email = 'copy'")
    found = sorted((int(r[0]), int(r[1]), shard) for shard, rs in rows.items() for r in rs)
    assert [r[0] for r in found] == [first, first + 1, first + 2]
    assert sorted(r[1] for r in found) == [61, 62, 63]
    for cid, _tenant, shard in found:
        assert shard == expected_shard(vcursor, cid)


async def test_insert_select_without_rows_inserts_nothing(vcursor):
    res = await run(vcursor, "insert into customer (customer_id, email) select order_id, sku from corder where 1 = 0")
    assert res.affected_rows == 0


async def test_consistent_lookup_repoints_a_stale_lookup_row(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku) values (1101, 71, 'stale')")
    # the owner row disappears behind the proxy's back; its lookup row is now stale
    await vcursor.execute_shard("commerce", expected_shard(vcursor, 71), "delete from corder where order_id = 1101")
    res = await run(vcursor, "insert into corder (order_id, customer_id, sku) values (1101, 72, 'fresh')")
    assert res.affected_rows == 1
    hash_v = vcursor.vschema.keyspaces["commerce"].vindexes["hash"]
    lookup = await vcursor.execute_shard("lookup", "0", "select keyspace_id from corder_order_id_idx where order_id = 1101")
    assert lookup.rows == [(hash_v.map([72])[0],)]
    found = await run(vcursor, "select sku from corder where order_id = 1101")
    assert found.rows == [(b"fresh",)]


async def test_consistent_lookup_keeps_a_real_duplicate_an_error(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku) values (1102, 73, 'one')")
    with pytest.raises(ProxyError) as e:
        await run(vcursor, "insert into corder (order_id, customer_id, sku) values (1102, 74, 'two')")
    assert e.value.code == 1062


async def test_consistent_lookup_row_pointing_to_the_same_keyspace_id_is_kept(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku) values (1103, 75, 'x')")
    await vcursor.execute_shard("commerce", expected_shard(vcursor, 75), "delete from corder where order_id = 1103")
    res = await run(vcursor, "insert into corder (order_id, customer_id, sku) values (1103, 75, 'again')")
    assert res.affected_rows == 1


async def test_insert_into_a_pinned_table_lands_on_the_pinned_shard_only(vcursor):
    pinned_vs = build_vschema(
        {"commerce": ({"sharded": True, "vindexes": {"hash": {"type": "hash"}},
                       "tables": {"pinned_notes": {"pinned": "90"}}}, list(vcursor.vschema.shards("commerce")))})
    pinned = ShardVCursor(pinned_vs, vcursor._endpoints)
    try:
        for shard in pinned_vs.shards("commerce"):
            await pinned.execute_shard("commerce", shard, "CREATE TABLE IF NOT EXISTS pinned_notes "
                                                          "(name VARCHAR(20) PRIMARY KEY, body VARCHAR(40))")
            await pinned.execute_shard("commerce", shard, "DELETE FROM pinned_notes")
        res = await run(pinned, "insert into pinned_notes (name, body) values ('a', 'x'), ('b', 'y')")
        assert res.affected_rows == 2
        rows = await shard_rows(pinned, "commerce", "select name from pinned_notes order by name")
        home = pinned_vs.shard_for("commerce", bytes.fromhex("90"))
        assert rows[home] == [(b"a",), (b"b",)]
        assert all(not r for s, r in rows.items() if s != home)
        assert (await run(pinned, "select body from pinned_notes where name = 'b'")).rows == [(b"y",)]
    finally:
        await pinned.close()
