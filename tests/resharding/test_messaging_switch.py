"""Messaging across a resharding switch: the message managers of a proxy stop on the retired
shard and start on the targets, subscribers stay connected, and messages copied unacked to the
targets are delivered (again, once their ack wait passed: as after a crash); none is lost."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from tests.messaging.proxy_harness import VITESS_COMMENT, ProxyStream, sql
from tests.proxy_process import start_proxy, stop_proxy
from tests.resharding.split import KEYSPACE, SOURCE, SPLIT_SERVING, TARGETS, Split, ids_on, run_sql

pytestmark = pytest.mark.asyncio(loop_scope="session")

TABLE = "customer_events"  # a message table of the example keyspace (hash vindex on id)
_ids = itertools.count(int(time.time() * 1000) % 10_000_000 * 1_000_000 + 700_000_000_000, 100_000)


def _comment(split: Split) -> str:
    rows = run_sql(split.endpoint(SOURCE), "select table_comment from information_schema.tables"
                                           f" where table_schema = database() and table_name = '{TABLE}'")
    return str(rows[0][0])


async def _set_comment(split: Split, comment: str) -> None:
    for shard in (*split.config.keyspaces[KEYSPACE].shards, *TARGETS):
        await asyncio.to_thread(run_sql, split.endpoint(shard), f"delete from {TABLE}",
                                f"alter table {TABLE} comment '{comment}'")


async def _ack(p: object, ids: list[int]) -> None:
    await sql(p, KEYSPACE, f"update {TABLE} set time_acked = {time.time_ns()} where id in ({', '.join(map(str, ids))})")  # type: ignore[arg-type]


async def test_unacked_messages_are_delivered_from_the_targets_after_the_switch(split: Split, tmp_path: Path) -> None:
    await split.prepare()
    original = _comment(split)
    await _set_comment(split, VITESS_COMMENT)  # ack wait 1 s: an unacked message comes again soon
    proxy = start_proxy(split.config.path, split.cluster.endpoints, tmp_path / "proxy.log")
    stream: ProxyStream | None = None
    try:
        stream = await ProxyStream.open(proxy, KEYSPACE, f"STREAM * FROM {TABLE}")
        id_at = stream.names.index("id")
        acked, unacked, later = (ids_on(split.vschema, TABLE, SOURCE, 6, next(_ids))[n:n + 2] for n in (0, 2, 4))
        for batch in (acked, unacked):
            for i in batch:
                await sql(proxy, KEYSPACE, f"insert into {TABLE} (id, message) values ({i}, '{{}}')")
            got = [int(r[id_at]) for r in await stream.rows(2)]
            assert sorted(got) == sorted(batch)
            if batch is acked:
                await _ack(proxy, acked)
        # `unacked` are in flight from -80 when the switch copies them to -40/40-80.
        await split.switch()
        deadline = time.monotonic() + 5
        while [r[0] for r in (await sql(proxy, KEYSPACE, "show vitess_shards"))[1] if r[0].startswith(KEYSPACE)] != [
                f"{KEYSPACE}/{s}" for s in SPLIT_SERVING]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        for i in later:
            await sql(proxy, KEYSPACE, f"insert into {TABLE} (id, message) values ({i}, '{{}}')")
        received: list[int] = []
        deadline = time.monotonic() + 15
        while not set(unacked + later) <= set(received):
            assert time.monotonic() < deadline, f"received {received}, waiting for {unacked + later}"
            rows = await stream.rows(1, within=deadline - time.monotonic())
            received += [int(r[id_at]) for r in rows]
            await _ack(proxy, [int(r[id_at]) for r in rows])
        assert not set(acked) & set(received)  # acked before the switch: never again
        await stream.nothing_for(2.5)  # everything acked: nothing comes back
        _, shown = await sql(proxy, KEYSPACE, "show vitess_messages")
        shards = {r[1] for r in shown if r[2] == TABLE}
        assert shards == {*TARGETS, "80-"}
    finally:
        if stream is not None:
            await stream.close()
        stop_proxy(proxy)
        await split.reset()  # writes allowed again on the source before its comment changes back
        await _set_comment(split, original)
