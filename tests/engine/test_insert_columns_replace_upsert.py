"""INSERT without a column list (columns from the tracked schema), REPLACE, and ON DUPLICATE
KEY UPDATE (``VALUES(c)`` and MySQL 8's row alias) through the engine on real shards: every
row lands where its vindex says, and what Vitess refuses is refused."""

from __future__ import annotations

import pytest

from proxy import engine
from proxy.errors import ProxyError
from rewriter import PlanCache, errors, plan_query
from vschema.tracked_schema import EMPTY_SCHEMA

CACHE = PlanCache()


async def run(vcursor, sql, keyspace="commerce"):
    plan, bindvars = plan_query(sql, vcursor.vschema, keyspace, CACHE, schema=await vcursor.tracked_schema())
    return await engine.execute(plan, vcursor, bindvars)


def expected_shard(vcursor, value):
    vs = vcursor.vschema
    return vs.shard_for("commerce", vs.keyspaces["commerce"].vindexes["hash"].map([value])[0])


async def where_rows_are(vcursor, sql):
    """{shard: rows} of a query run on every commerce shard."""
    out = {}
    for shard in vcursor.vschema.shards("commerce"):
        out[shard] = [tuple(r) for r in (await vcursor.execute_shard("commerce", shard, sql)).rows]
    return out


def assert_on_their_shards(vcursor, found):
    for shard, rows in found.items():
        for r in rows:
            assert expected_shard(vcursor, int(r[0])) == shard, (r, shard)


async def test_tracked_schema_has_the_shards_columns_in_order(vcursor):
    schema = await vcursor.tracked_schema()
    customer = schema.table("commerce", "CUSTOMER")
    assert customer.column_names() == ["customer_id", "email", "tenant_id", "created_at"]
    cid = customer.column("customer_id")
    assert (cid.data_type, cid.column_type, cid.nullable) == ("bigint", "bigint(20)", False)
    assert customer.column("email").collation is None  # varbinary
    assert schema.table("commerce", "items").column("name").collation == "utf8mb4_general_ci"


async def test_insert_without_column_list_routes_each_row_by_its_vindex(vcursor):
    ids = list(range(7720001, 7720011))
    res = await run(vcursor, "insert into customer values " + ", ".join(f"({i}, 'nc{i}', 1, null)" for i in ids))
    assert res.affected_rows == len(ids)
    found = await where_rows_are(vcursor, "select customer_id from customer where customer_id between 7720001 and 7720010")
    assert_on_their_shards(vcursor, found)
    assert sorted(int(r[0]) for rows in found.values() for r in rows) == ids
    assert len([s for s, rows in found.items() if rows]) == 2  # both shards got rows


async def test_insert_without_column_list_fills_a_null_auto_increment_from_the_sequence(vcursor):
    res = await run(vcursor, "insert into customer values (null, 'nc-seq', 2, null)")
    assert res.insert_id > 0
    found = await where_rows_are(vcursor, f"select customer_id from customer where customer_id = {res.insert_id}")
    assert found[expected_shard(vcursor, res.insert_id)] == [(str(res.insert_id).encode(),)]


async def test_insert_select_without_column_list(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku, price) values "
                       "(7720101, 7720111, 'nc-sel', 1), (7720102, 7720112, 'nc-sel', 2)")
    res = await run(vcursor, "insert into customer select customer_id, sku, price, null from corder where sku = 'nc-sel'")
    assert res.affected_rows == 2
    found = await where_rows_are(vcursor, "select customer_id, tenant_id from customer where email = 'nc-sel'")
    assert_on_their_shards(vcursor, found)
    assert sorted(int(r[0]) for rows in found.values() for r in rows) == [7720111, 7720112]


async def test_column_count_mismatch_is_mysqls_1136(vcursor, oracle):
    for sql, row in (("insert into items values (7720201, 2)", 1),
                     ("insert into items values (7720202, 1, 'g', 'n', 1, 1.5, 2.5), (7720203, 1)", 2)):
        with pytest.raises(errors.WrongValueCount) as planned:
            await run(vcursor, sql)
        with pytest.raises(Exception) as mysql:  # the oracle: one plain MariaDB database
            await oracle(sql)
        assert (planned.value.code, planned.value.message) == tuple(mysql.value.args)
        assert planned.value.message == f"Column count doesn't match value count at row {row}"


async def test_unknown_columns_keep_vitess_vt09004(vcursor):
    # a table the shards do not have: no tracked columns, no column list
    vs = vcursor.vschema
    with pytest.raises(errors.Unsupported, match="VT09004: INSERT should contain column list"):
        plan_query("insert into customer values (1, 'x', 1, null)", vs, "commerce", PlanCache(), schema=EMPTY_SCHEMA)


async def test_replace_routes_each_row_and_replaces_it_on_its_shard(vcursor):
    ids = [7720301, 7720302, 7720303, 7720304]
    res = await run(vcursor, "replace into customer (customer_id, email) values "
                             + ", ".join(f"({i}, 'r1')" for i in ids))
    assert res.affected_rows == len(ids)
    res = await run(vcursor, "replace into customer values " + ", ".join(f"({i}, 'r2', 9, null)" for i in ids))
    assert res.affected_rows == 2 * len(ids)  # MySQL: each replaced row counts its delete and insert
    found = await where_rows_are(vcursor, "select customer_id, email, tenant_id from customer "
                                          "where customer_id between 7720301 and 7720304")
    assert_on_their_shards(vcursor, found)
    assert sorted(r for rows in found.values() for r in rows) == [(str(i).encode(), b"r2", b"9") for i in ids]


async def test_replace_select_without_column_list(vcursor):
    await run(vcursor, "insert into corder (order_id, customer_id, sku, price) values "
                       "(7720401, 7720411, 'rep-sel', 1), (7720402, 7720412, 'rep-sel', 2)")
    await run(vcursor, "insert into customer (customer_id, email) values (7720411, 'old')")
    res = await run(vcursor, "replace into customer select customer_id, sku, price, null from corder "
                             "where sku = 'rep-sel'")
    assert res.affected_rows == 3  # one replaced (2), one new (1)
    found = await where_rows_are(vcursor, "select customer_id, email from customer "
                                          "where customer_id in (7720411, 7720412)")
    assert_on_their_shards(vcursor, found)
    assert sorted(r for rows in found.values() for r in rows) == [(b"7720411", b"rep-sel"), (b"7720412", b"rep-sel")]


async def test_replace_on_a_table_with_owned_lookup_vindexes_is_refused(vcursor):
    with pytest.raises(errors.Unsupported) as e:
        await run(vcursor, "replace into corder (order_id, customer_id, sku) values (7720501, 1, 'x')")
    assert e.value.code == 1235
    assert "REPLACE on a table with owned lookup vindexes" in e.value.message


async def test_replace_into_an_unsharded_table_from_a_sharded_session(vcursor):
    await vcursor.execute_shard("lookup", "0", "create table if not exists replace_probe (id int primary key, v int)")
    await run(vcursor, "replace into lookup.replace_probe values (1, 1)")
    await run(vcursor, "replace into lookup.replace_probe values (1, 2)")
    res = await vcursor.execute_shard("lookup", "0", "select id, v from replace_probe")
    assert [tuple(r) for r in res.rows] == [(b"1", b"2")]


async def test_on_duplicate_key_update_values_form_without_column_list(vcursor):
    await run(vcursor, "insert into customer values (7720601, 'odku-old', 1, null)")
    res = await run(vcursor, "insert into customer values (7720601, 'odku-new', 2, null), (7720602, 'odku-add', 3, null) "
                             "on duplicate key update email = values(email), tenant_id = values(tenant_id) + 10")
    assert res.affected_rows == 3  # 2 for the updated row, 1 for the new one
    found = await where_rows_are(vcursor, "select customer_id, email, tenant_id from customer "
                                          "where customer_id in (7720601, 7720602)")
    assert_on_their_shards(vcursor, found)
    assert sorted(r for rows in found.values() for r in rows) == [
        (b"7720601", b"odku-new", b"12"), (b"7720602", b"odku-add", b"3")]


async def test_on_duplicate_key_update_mysql8_row_alias(vcursor):
    # MariaDB shards do not read `AS new`: the proxy sends the same meaning as VALUES(c)
    await run(vcursor, "insert into customer (customer_id, email, tenant_id) values (7720701, 'alias-old', 1), "
                       "(7720702, 'alias-old', 1)")
    res = await run(vcursor, "insert into customer values (7720701, 'alias-new', 5, null), (7720702, 'alias-x', 6, null) "
                             "as new on duplicate key update email = new.email, tenant_id = new.tenant_id + tenant_id")
    assert res.affected_rows == 4
    res = await run(vcursor, "insert into customer (customer_id, email) values (7720702, 'cols') as n(i, e) "
                             "on duplicate key update email = concat(e, '-', n.i)")
    assert res.affected_rows == 2
    found = await where_rows_are(vcursor, "select customer_id, email, tenant_id from customer "
                                          "where customer_id in (7720701, 7720702)")
    assert_on_their_shards(vcursor, found)
    assert sorted(r for rows in found.values() for r in rows) == [
        (b"7720701", b"alias-new", b"6"), (b"7720702", b"cols-7720702", b"7")]


async def test_on_duplicate_key_update_of_a_vindex_column_is_refused_as_vitess_does(vcursor):
    for sql in ("insert into customer values (7720801, 'v', 1, null) on duplicate key update customer_id = 5",
                "insert into customer values (7720801, 'v', 1, null) as new "
                "on duplicate key update customer_id = new.tenant_id",
                "insert into corder values (7720802, 1, 'v', 1) on duplicate key update order_id = order_id + 1"):
        with pytest.raises(errors.Unsupported, match="VT12001: unsupported: DML cannot update vindex column"):
            await run(vcursor, sql)
    # setting it to its own new value is allowed, as in Vitess
    res = await run(vcursor, "insert into customer values (7720803, 'same', 1, null) as new "
                             "on duplicate key update customer_id = new.customer_id, email = new.email")
    assert res.affected_rows == 1
    found = await where_rows_are(vcursor, "select customer_id from customer where customer_id = 7720803")
    assert_on_their_shards(vcursor, found)


async def test_on_duplicate_key_update_with_an_owned_lookup_keeps_one_lookup_row(vcursor):
    await run(vcursor, "insert into corder values (7720901, 7720911, 'lk', 1)")
    res = await run(vcursor, "insert into corder values (7720901, 7720911, 'lk2', 2) "
                             "on duplicate key update sku = values(sku), price = values(price)")
    assert res.affected_rows == 2
    lookup = await vcursor.execute_shard("lookup", "0", "select keyspace_id from corder_order_id_idx "
                                                        "where order_id = 7720901")
    hash_v = vcursor.vschema.keyspaces["commerce"].vindexes["hash"]
    assert [r[0] for r in lookup.rows] == [hash_v.map([7720911])[0]]
    found = await where_rows_are(vcursor, "select customer_id, sku from corder where order_id = 7720901")
    assert found[expected_shard(vcursor, 7720911)] == [(b"7720911", b"lk2")]


async def test_a_shard_error_on_replace_reaches_the_caller(vcursor):
    with pytest.raises(ProxyError) as e:
        await run(vcursor, "replace into customer (customer_id, no_such_column) values (7721001, 1)")
    assert e.value.code == 1054
