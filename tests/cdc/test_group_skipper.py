"""A decoder reading only inserts drops the transactions made only of updates and deletes under
the binlog library (``proxy.cdc.group_skipper``) and still moves its position past them."""

from __future__ import annotations

import asyncio

from proxy.cdc.binlog_reader import ShardBinlogReader
from proxy.cdc.events import RowEvent, RowOp
from proxy.cdc.positions import GtidPosition
from proxy.cdc.table_filter import TableFilter
from proxy.cdc.transaction_assembler import ShardHeartbeat, ShardTransaction
from tests.cdc.conftest import PROBE, PROBE_TABLE, new_id

INSERTS = frozenset({"insert"})


async def _reader(shard, **kwargs) -> ShardBinlogReader:
    position = GtidPosition.parse(await shard.gtid_binlog_pos())
    reader = ShardBinlogReader("commerce", shard.name, shard.endpoint, position, TableFilter([PROBE]), **kwargs)
    await reader.start()
    return reader


async def _to_end(reader: ShardBinlogReader, shard) -> tuple[GtidPosition, list[ShardTransaction | ShardHeartbeat]]:
    """The shard's binlog position now, and what ``reader`` delivers up to its heartbeat there."""
    end = GtidPosition.parse(await shard.gtid_binlog_pos())
    items = await _until(reader, lambda got: isinstance(got[-1], ShardHeartbeat) and got[-1].position == end)
    return end, items


async def _until(reader: ShardBinlogReader, done) -> list[ShardTransaction | ShardHeartbeat]:
    items: list[ShardTransaction | ShardHeartbeat] = []
    async with asyncio.timeout(10):
        async for batch in reader.batches():
            items += batch
            if done(items):
                return items
    raise AssertionError("the stream ended")


def _ops(txn: ShardTransaction) -> list[RowOp]:
    return [e.op for e in txn.events if isinstance(e, RowEvent)]


async def test_an_insert_only_reader_delivers_each_transaction_with_an_insert_and_moves_past_the_others(
    shards, probe_table
):
    shard = shards["-80"]
    a, b, c = new_id(), new_id(), new_id()
    await shard.run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'a', 1, NULL), (%s, 'b', 1, NULL)", (a, b)))
    reader = await _reader(shard, row_ops=INSERTS, row_images=False, heartbeat_period=0.2)
    try:
        await shard.run((f"UPDATE {PROBE_TABLE} SET label = 'x' WHERE id = %s", (a,)))
        await shard.run((f"DELETE FROM {PROBE_TABLE} WHERE id = %s", (b,)))
        # An update, then an insert in the same transaction: wanted, delivered whole.
        await shard.transaction(
            (f"UPDATE {PROBE_TABLE} SET label = 'y' WHERE id = %s", (a,)),
            (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'c', 1, NULL)", (c,)),
        )
        await shard.run((f"UPDATE {PROBE_TABLE} SET label = 'z' WHERE id = %s", (a,)))
        await shard.run((f"DELETE FROM {PROBE_TABLE} WHERE id = %s", (c,)))
        end, items = await _to_end(reader, shard)
    finally:
        await reader.close()
    transactions = [i for i in items if isinstance(i, ShardTransaction)]
    assert [_ops(t) for t in transactions] == [[RowOp.INSERT]]
    assert transactions[0].position != end
    # The skipped transactions after the insert moved the position too: resuming there
    # does not read them again.
    assert reader.position == end


async def test_an_insert_right_after_skipped_updates_is_delivered_without_waiting_for_a_heartbeat(
    shards, probe_table
):
    shard = shards["80-"]
    ids = [new_id() for _ in range(20)]
    await shard.run(
        (f"INSERT INTO {PROBE_TABLE} VALUES " + ", ".join(["(%s, 'u', 1, NULL)"] * len(ids)), tuple(ids))
    )
    # A heartbeat period far beyond the wait below: only the insert's own transaction can end it.
    reader = await _reader(shard, row_ops=INSERTS, row_images=False, heartbeat_period=30)
    try:
        fresh = new_id()
        statements = [(f"UPDATE {PROBE_TABLE} SET amount = amount + 1 WHERE id = %s", (i,)) for i in ids]
        statements.append((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'n', 1, NULL)", (fresh,)))
        statements += [(f"UPDATE {PROBE_TABLE} SET amount = amount + 1 WHERE id = %s", (i,)) for i in ids]
        await shard.run(*statements)
        async with asyncio.timeout(3):
            items = await _until(reader, lambda got: any(isinstance(i, ShardTransaction) for i in got))
    finally:
        await reader.close()
    assert [_ops(i) for i in items if isinstance(i, ShardTransaction)] == [[RowOp.INSERT]]


OWN = b"/*shardgate-own 00112233 cdc_probe*/"


async def test_a_reader_skipping_its_own_mark_drops_those_inserts_and_reads_any_other_or_mixed_transaction(
    shards, probe_table
):
    shard = shards["-80"]
    first, own, other, plain, mixed_own, mixed_plain, own2 = (new_id() for _ in range(7))
    unannotated_own, unannotated = new_id(), new_id()
    reader = await _reader(shard, row_ops=INSERTS, row_images=False, heartbeat_period=0.2, skip_annotated=OWN)
    try:
        # The reader's connection is filtered from its second read on: one plain insert first.
        await shard.run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'f', 1, NULL)", (first,)))
        await _until(reader, lambda got: any(isinstance(i, ShardTransaction) for i in got))
        await shard.run((f"{OWN.decode()} INSERT INTO {PROBE_TABLE} VALUES (%s, 'own', 1, NULL)", (own,)))
        # Another process's mark, and no mark: read as before.
        await shard.run(
            (f"/*shardgate-own 99999999 cdc_probe*/ INSERT INTO {PROBE_TABLE} VALUES (%s, 'o', 1, NULL)", (other,))
        )
        await shard.run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'p', 1, NULL)", (plain,)))
        # One transaction of an own insert and an unmarked one: read (the unmarked insert is news).
        await shard.transaction(
            (f"{OWN.decode()} INSERT INTO {PROBE_TABLE} VALUES (%s, 'm', 1, NULL)", (mixed_own,)),
            (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'n', 1, NULL)", (mixed_plain,)),
        )
        # The mark covers its own statement only: the next one, logged without an annotate, is read.
        await shard.transaction(
            (f"{OWN.decode()} INSERT INTO {PROBE_TABLE} VALUES (%s, 'm', 1, NULL)", (unannotated_own,)),
            "SET SESSION binlog_annotate_row_events = OFF",
            (f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'q', 1, NULL)", (unannotated,)),
            "SET SESSION binlog_annotate_row_events = ON",
        )
        # An own insert and updates in one transaction: nothing wanted is left, dropped whole.
        await shard.transaction(
            (f"UPDATE {PROBE_TABLE} SET label = 'x' WHERE id = %s", (plain,)),
            (f"{OWN.decode()} INSERT INTO {PROBE_TABLE} VALUES (%s, 'own', 1, NULL)", (own2,)),
        )
        end, items = await _to_end(reader, shard)
    finally:
        await reader.close()
    transactions = [i for i in items if isinstance(i, ShardTransaction)]
    # Another's mark, no mark, the mixed transactions (their own rows dropped, the others' read).
    assert [_ops(t) for t in transactions] == [[RowOp.INSERT]] * 4
    assert reader.position == end  # the dropped own transactions moved the position too
