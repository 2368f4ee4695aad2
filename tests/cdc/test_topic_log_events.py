"""A topic's log table (``proxy.topics.schema``: ``message_id`` VIRTUAL, ``publish_time``/``seq``
with defaults until the pass) streams through the VStream like any table: MariaDB logs the
virtual id in the FULL row images, and the pass's in-place UPDATE decodes with both images."""

from __future__ import annotations

from proxy.cdc import VStream
from proxy.topics.schema import UNSEQUENCED_MS, UNSEQUENCED_SEQ, log_ddl
from tests.cdc.conftest import KEYSPACE, collect_groups, rows_of

LOG = "_tms_cdc_layout_probe"


async def test_a_topic_log_rows_insert_and_pass_stream_with_their_ids(commerce_endpoints, shards):
    shard = shards["-80"]
    await shard.run(f"DROP TABLE IF EXISTS {LOG}", log_ddl("cdc_layout_probe", []))
    table = f"{KEYSPACE}.{LOG}"
    try:
        async with VStream(commerce_endpoints, [table]) as stream:
            await shard.run(f"INSERT INTO {LOG} (payload) VALUES ('m')")
            await shard.run(f"UPDATE {LOG} SET publish_time = 1700000000000, seq = 5 WHERE message_id IS NULL")

            def both(groups: list) -> bool:
                return len(rows_of(groups, table)) == 2

            groups = await collect_groups(stream, both)
        [(_, op1, _, inserted), (_, op2, before, after)] = rows_of(groups, table)
        assert (op1, op2) == ("insert", "update")
        assert (inserted["publish_time"], inserted["seq"], inserted["message_id"]) == (
            UNSEQUENCED_MS, UNSEQUENCED_SEQ, None)
        assert before["message_id"] is None and before["payload"] == inserted["payload"]
        assert (after["publish_time"], after["seq"]) == (1700000000000, 5)
        assert after["message_id"] == f"{1700000000000:016x}{5:04x}"
    finally:
        await shard.run(f"DROP TABLE IF EXISTS {LOG}")
