"""Row changes written directly on the shards come out of the VStream with the right images,
grouped by transaction, with FIELD before a table's first ROW."""

from __future__ import annotations

from decimal import Decimal

from proxy.cdc import (
    BeginEvent,
    CommitEvent,
    DdlEvent,
    FieldEvent,
    RowEvent,
    VEventType,
    VgtidEvent,
    VStream,
)
from tests.cdc.conftest import PROBE, PROBE_TABLE, collect_groups, ids_seen, new_id, rows_of


async def test_insert_is_streamed_with_after_image_only(commerce_endpoints, shards, probe_table):
    row_id = new_id()
    async with VStream(commerce_endpoints, [PROBE]) as stream:
        await shards["-80"].run(
            (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'alpha', 12.50, NOW(6))", (row_id,))
        )
        groups = await collect_groups(stream, lambda g: row_id in ids_seen(g))
    [(shard, op, before, after)] = rows_of(groups)
    assert (shard, op, before) == ("-80", "insert", None)
    assert after["id"] == row_id
    assert after["label"] == "alpha"
    assert after["amount"] == Decimal("12.50")


async def test_update_carries_before_and_after_images(commerce_endpoints, shards, probe_table):
    row_id = new_id()
    await shards["80-"].run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'old', 1, NOW(6))", (row_id,)))
    async with VStream(commerce_endpoints, [PROBE]) as stream:
        await shards["80-"].run(
            (f"UPDATE {PROBE_TABLE} SET label = 'new', amount = 2 WHERE id = %s", (row_id,))
        )
        groups = await collect_groups(stream, lambda g: row_id in ids_seen(g))
    [(shard, op, before, after)] = rows_of(groups)
    assert (shard, op) == ("80-", "update")
    assert (before["label"], before["amount"]) == ("old", Decimal("1.00"))
    assert (after["label"], after["amount"]) == ("new", Decimal("2.00"))


async def test_delete_carries_before_image_only(commerce_endpoints, shards, probe_table):
    row_id = new_id()
    await shards["-80"].run(
        (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'gone', 3, NOW(6))", (row_id,))
    )
    async with VStream(commerce_endpoints, [PROBE]) as stream:
        await shards["-80"].run((f"DELETE FROM {PROBE_TABLE} WHERE id = %s", (row_id,)))
        groups = await collect_groups(stream, lambda g: row_id in ids_seen(g))
    [(shard, op, before, after)] = rows_of(groups)
    assert (shard, op, after) == ("-80", "delete", None)
    assert (before["id"], before["label"]) == (row_id, "gone")


async def test_multi_row_transaction_arrives_as_one_group(commerce_endpoints, shards, probe_table):
    first, second, third = new_id(), new_id(), new_id()
    async with VStream(commerce_endpoints, [PROBE]) as stream:
        await shards["-80"].transaction(
            (
                f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'a', 1, NOW(6)), (%s, 'b', 2, NOW(6))",
                (first, second),
            ),
            (f"UPDATE {PROBE_TABLE} SET label = 'a2' WHERE id = %s", (first,)),
            (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'c', 3, NOW(6))", (third,)),
            (f"DELETE FROM {PROBE_TABLE} WHERE id = %s", (second,)),
        )
        groups = await collect_groups(stream, lambda g: third in ids_seen(g))
    [group] = [g for g in groups if third in ids_seen([g])]
    types = [e.type for e in group.events]
    assert types[0] is VEventType.BEGIN
    assert types[-2:] == [VEventType.COMMIT, VEventType.VGTID]
    assert [(op, (a or b)["id"]) for _s, op, b, a in rows_of([group])] == [
        ("insert", first),
        ("insert", second),
        ("update", first),
        ("insert", third),
        ("delete", second),
    ]


async def test_field_event_precedes_first_row_of_a_table(commerce_endpoints, shards, probe_table):
    row_id = new_id()
    async with VStream(commerce_endpoints, [PROBE]) as stream:
        await shards["-80"].run(
            (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'f', 1, NOW(6))", (row_id,))
        )
        await shards["-80"].run(
            (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'g', 1, NOW(6))", (row_id + 1,))
        )
        groups = await collect_groups(stream, lambda g: row_id + 1 in ids_seen(g))
    first, second = groups
    assert isinstance(first.events[0], BeginEvent)
    field = first.events[1]
    assert isinstance(field, FieldEvent)
    assert field.table_name == "commerce.cdc_probe"
    assert [(f.name, f.type) for f in field.fields] == [
        ("id", "BIGINT"),
        ("label", "VARCHAR"),
        ("amount", "DECIMAL"),
        ("written_at", "DATETIME"),
    ]
    assert isinstance(first.events[2], RowEvent)
    assert not any(isinstance(e, FieldEvent) for e in second.events)


async def test_field_event_is_sent_again_after_alter_table(commerce_endpoints, shards, probe_table):
    row_id = new_id()
    shard = shards["80-"]
    try:
        async with VStream(commerce_endpoints, [PROBE]) as stream:
            await shard.run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'x', 1, NOW(6))", (row_id,)))
            await shard.run(f"ALTER TABLE {PROBE_TABLE} ADD COLUMN note VARCHAR(10)")
            await shard.run(
                (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'y', 1, NOW(6), 'hi')", (row_id + 1,))
            )
            groups = await collect_groups(stream, lambda g: row_id + 1 in ids_seen(g))
    finally:
        await shard.run(f"ALTER TABLE {PROBE_TABLE} DROP COLUMN note")
    kinds = [[e.type for e in g.events] for g in groups]
    assert kinds[1] == [VEventType.DDL, VEventType.VGTID]
    ddl = groups[1].events[0]
    assert isinstance(ddl, DdlEvent) and "ADD COLUMN note" in ddl.statement
    refreshed = [e for e in groups[2].events if isinstance(e, FieldEvent)]
    assert [f.name for f in refreshed[0].fields][-1] == "note"
    assert rows_of(groups[2:])[0][3]["note"] == "hi"


async def test_writes_on_every_shard_are_streamed(commerce_endpoints, shards, probe_table):
    left, right = new_id(), new_id()
    async with VStream(commerce_endpoints, [PROBE]) as stream:
        await shards["-80"].run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'l', 1, NOW(6))", (left,)))
        await shards["80-"].run(
            (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'r', 1, NOW(6))", (right,))
        )
        groups = await collect_groups(stream, lambda g: {left, right} <= set(ids_seen(g)))
    assert sorted((shard, (after or {})["id"]) for shard, _op, _b, after in rows_of(groups)) == [
        ("-80", left),
        ("80-", right),
    ]
    assert {g.keyspace for g in groups} == {"commerce"}


async def test_tables_outside_the_filter_are_not_streamed(commerce_endpoints, shards, probe_table):
    skipped, wanted = new_id(), new_id()
    async with VStream(commerce_endpoints, ["commerce.customer"]) as stream:
        await shards["-80"].run(
            (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'skip', 1, NOW(6))", (skipped,)),
            ("INSERT INTO customer (customer_id, email) VALUES (%s, 'w@x')", (wanted,)),
        )
        groups = await collect_groups(
            stream,
            lambda g: any(r[3]["customer_id"] == wanted for r in rows_of(g, "commerce.customer")),
        )
    await shards["-80"].run(("DELETE FROM customer WHERE customer_id = %s", (wanted,)))
    tables = {e.table_name for g in groups for e in g.row_events()}
    assert tables == {"commerce.customer"}


async def test_every_group_ends_with_a_vgtid_of_all_shards(commerce_endpoints, shards, probe_table):
    row_id = new_id()
    async with VStream(commerce_endpoints, [PROBE]) as stream:
        await shards["80-"].run(
            (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'v', 1, NOW(6))", (row_id,))
        )
        groups = await collect_groups(stream, lambda g: row_id in ids_seen(g))
    last = groups[-1].events[-1]
    assert isinstance(last, VgtidEvent)
    commit = groups[-1].events[-2]
    assert isinstance(commit, CommitEvent)
    assert [(sg.keyspace, sg.shard) for sg in last.vgtid.shard_gtids] == [
        ("commerce", "-80"),
        ("commerce", "80-"),
    ]
    assert last.vgtid.position_of("commerce", "80-") == await shards["80-"].gtid_binlog_pos()
