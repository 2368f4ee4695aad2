"""A stream of "every table" (``*``, ``commerce.*``, Vitess's ``/.*/``) carries the tables users
wrote, never the tables behind a topic (``_tms_<topic>``, ``_tms_topics``: a publish and its
sequencer pass write both); an entry naming a topic's log still carries it."""

from __future__ import annotations

import asyncio
import time

from proxy.cdc import VStream
from tests.cdc.conftest import KEYSPACE, PROBE, collect_groups, new_id

TOPIC = "cdc_match_all_topic"
LOG = f"{KEYSPACE}._tms_{TOPIC}"


def _through_proxy(proxy, *statements: str) -> list[tuple]:
    conn = proxy.connect(KEYSPACE, autocommit=True)
    try:
        with conn.cursor() as cur:
            rows: list[tuple] = []
            for statement in statements:
                cur.execute(statement)
                rows = list(cur.fetchall())
            return rows
    finally:
        conn.close()


def _publish_and_wait_for_the_pass(proxy) -> None:
    _through_proxy(
        proxy,
        f"INSERT INTO `{TOPIC}` (payload) VALUES ('a'), ('b')",
        f"INSERT INTO `{TOPIC}` (payload) VALUES ('c')",  # deferred: a pass's UPDATE gives its id
    )
    deadline = time.monotonic() + 10
    while _through_proxy(proxy, f"SELECT COUNT(*) FROM `{TOPIC}`") != [(3,)]:
        assert time.monotonic() < deadline, "the topic's messages were not sequenced"
        time.sleep(0.05)


def _tables(groups) -> set[str]:
    return {event.table_name for group in groups for event in group.row_events()}


async def test_wildcard_streams_leave_out_topic_tables_and_a_named_log_is_still_streamed(
    cdc_proxy, commerce_endpoints, shards, probe_table
):
    await asyncio.to_thread(_through_proxy, cdc_proxy, f"DROP TOPIC IF EXISTS `{TOPIC}`", f"CREATE TOPIC `{TOPIC}`")
    ids = [new_id(), new_id()]
    try:
        filters = {"star": ["*"], "keyspace": [f"{KEYSPACE}.*"], "regex": ["/.*/"], "named": [LOG, PROBE]}
        streams = {name: VStream(commerce_endpoints, tables) for name, tables in filters.items()}
        for stream in streams.values():
            await stream.open()
        try:
            await asyncio.to_thread(_publish_and_wait_for_the_pass, cdc_proxy)
            # Then a plain row on each shard: once a stream has both, it has read past the topic's writes.
            for shard, row_id in zip(shards.values(), ids, strict=True):
                await shard.run(f"INSERT INTO cdc_probe (id, label) VALUES ({row_id}, 'plain')")

            def both_rows(groups) -> bool:
                seen = {c.after["id"] for g in groups for e in g.row_events() if e.table_name == PROBE for c in e.changes}
                return seen >= set(ids)

            seen = {name: await collect_groups(stream, both_rows) for name, stream in streams.items()}
        finally:
            for stream in streams.values():
                await stream.aclose()
        for name in ("star", "keyspace", "regex"):
            assert _tables(seen[name]) == {PROBE}, name
        named = seen["named"]
        assert _tables(named) == {PROBE, LOG}
        inserted = [c.after["payload"] for g in named for e in g.row_events() if e.table_name == LOG
                    and e.op.value == "insert" for c in e.changes]
        assert sorted(inserted) == [b"a", b"b", b"c"]
    finally:
        await asyncio.to_thread(_through_proxy, cdc_proxy, f"DROP TOPIC IF EXISTS `{TOPIC}`")
