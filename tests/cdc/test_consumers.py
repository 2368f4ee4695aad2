"""The stream's other consumers: SQL `VSTREAM` result rows and the messaging table feed."""

from __future__ import annotations

import asyncio
import json
import time
from decimal import Decimal

from proxy.cdc import RowOp, TableChangeFeed, VStream, VStreamRowFormatter
from tests.cdc.conftest import PROBE, PROBE_TABLE, collect_groups, ids_seen, new_id


async def test_vstream_sql_rows_are_op_then_columns_then_vgtid(
    commerce_endpoints, shards, probe_table
):
    row_id = new_id()
    formatter = VStreamRowFormatter(PROBE)
    rows = []
    async with VStream(commerce_endpoints, [PROBE]) as stream:
        shard = shards["-80"]
        await shard.run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'a', 1, NULL)", (row_id,)))
        await shard.run((f"UPDATE {PROBE_TABLE} SET label = 'b' WHERE id = %s", (row_id,)))
        await shard.run((f"DELETE FROM {PROBE_TABLE} WHERE id = %s", (row_id,)))
        groups = await collect_groups(stream, lambda g: len(ids_seen(g)) == 3)
    for group in groups:
        rows += formatter.rows(group)
    assert formatter.column_names == ["op", "id", "label", "amount", "written_at", "vgtid"]
    assert [row[:-1] for row in rows] == [
        ("+", row_id, "a", Decimal("1.00"), None),
        ("*", row_id, "b", Decimal("1.00"), None),
        ("-", row_id, "b", Decimal("1.00"), None),
    ]
    assert json.loads(rows[-1][-1]) == groups[-1].vgtid.to_json_obj()


async def test_table_feed_reports_each_shards_row_changes_with_after_images(
    commerce_endpoints, shards, probe_table
):
    left, right = new_id(), new_id()
    seen = []
    async with TableChangeFeed(commerce_endpoints, "commerce", PROBE_TABLE) as feed:
        await shards["-80"].run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'l', 1, NULL)", (left,)))
        await shards["80-"].run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'r', 1, NULL)", (right,)))
        await shards["80-"].run((f"UPDATE {PROBE_TABLE} SET label = 'r2' WHERE id = %s", (right,)))
        await shards["-80"].run((f"DELETE FROM {PROBE_TABLE} WHERE id = %s", (left,)))
        async with asyncio.timeout(10):
            async for change in feed.changes():
                seen.append((change.shard, change.op, change.row["id"], change.row["label"]))
                if len(seen) == 4:
                    break
    assert sorted(seen, key=lambda s: (s[0], list(RowOp).index(s[1]))) == [
        ("-80", RowOp.INSERT, left, "l"),
        ("-80", RowOp.DELETE, left, "l"),
        ("80-", RowOp.INSERT, right, "r"),
        ("80-", RowOp.UPDATE, right, "r2"),
    ]


async def test_table_feed_without_row_images_reports_each_committed_insert_transaction(
    commerce_endpoints, shards, probe_table
):
    left, right, third = new_id(), new_id(), new_id()
    seen = []
    async with TableChangeFeed(
        commerce_endpoints, "commerce", PROBE_TABLE, row_ops=frozenset({"insert"}), row_images=False
    ) as feed:
        await shards["-80"].run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'l', 1, NULL)", (left,)))
        await shards["80-"].run((f"UPDATE {PROBE_TABLE} SET label = 'x' WHERE id = %s", (left,)))
        await shards["-80"].run((f"DELETE FROM {PROBE_TABLE} WHERE id = %s", (left,)))
        await shards["80-"].run(
            (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'r', 1, NULL), (%s, 't', 1, NULL)", (right, third))
        )
        async with asyncio.timeout(10):
            async for touch in feed.touches():
                seen.append(touch)
                if len(seen) == 2:
                    break
        # No row was decoded, so the feed has no row changes to offer.
        try:
            await anext(feed.changes())
            raise AssertionError("changes() of a feed without row images must refuse")
        except ValueError:
            pass
    assert sorted((t.shard, t.op) for t in seen) == [("-80", RowOp.INSERT), ("80-", RowOp.INSERT)]
    assert all(0 < time.time() - t.received_at < 10 for t in seen)
