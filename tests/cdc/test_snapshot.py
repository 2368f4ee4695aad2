"""A stream that starts at ``snapshot``: the tables' current rows first (copied from one
consistent snapshot per shard), then exactly the changes committed after that snapshot."""

from __future__ import annotations

import asyncio
import io
import json

import pytest_asyncio

from proxy.cdc import FieldEvent, VStream, VStreamRowFormatter, debezium_envelopes, run_cdc
from proxy.cdc.table_copy import DEFAULT_CHUNK_ROWS
from tests.cdc.conftest import collect_groups

COPY_TABLE = "cdc_copy"
COPY = f"commerce.{COPY_TABLE}"
COPY_DDL = f"""
CREATE TABLE {COPY_TABLE} (
  id BIGINT NOT NULL PRIMARY KEY,
  label VARCHAR(32),
  note TEXT,
  raw VARBINARY(16),
  qty INT UNSIGNED,
  amount DECIMAL(10,2),
  written_at DATETIME(6)
) ENGINE=InnoDB
"""
ROWS_PER_SHARD = {"-80": 3, "80-": DEFAULT_CHUNK_ROWS + 500}
INSERT = f"INSERT INTO {COPY_TABLE} VALUES (%s, %s, 'n', 'r', 7, 1.5, NOW(6))"


def shard_ids(shard: str) -> list[int]:
    base = 1_000_000 if shard == "-80" else 2_000_000
    return list(range(base, base + ROWS_PER_SHARD[shard]))


@pytest_asyncio.fixture(loop_scope="session")
async def copy_table(shards):
    for name, shard in shards.items():
        values = ",".join(f"({i}, 'old', 'n', 'r', 7, 1.5, NOW(6))" for i in shard_ids(name))
        await shard.run(
            f"DROP TABLE IF EXISTS {COPY_TABLE}",
            COPY_DDL,
            f"INSERT INTO {COPY_TABLE} VALUES {values}",
        )
    try:
        yield COPY
    finally:
        for shard in shards.values():
            await shard.run(f"DROP TABLE IF EXISTS {COPY_TABLE}")


def copied_rows(groups) -> list[dict]:
    return [c.after for g in groups for e in g.row_events() if e.copied for c in e.changes]


async def copy_of(stream: VStream) -> list:
    return await collect_groups(stream, lambda gs: bool(gs) and gs[-1].vgtid is not None, 30)


async def test_snapshot_start_delivers_every_current_row_as_a_copied_insert(shards, copy_table):
    async with VStream(shards_endpoints(shards), [COPY], start="snapshot") as stream:
        groups = await copy_of(stream)
        assert not stream.copying
    ids = sorted(row["id"] for row in copied_rows(groups))
    assert ids == shard_ids("-80") + shard_ids("80-")
    assert all(e.copied and e.op.value == "insert" for g in groups for e in g.row_events())
    assert max(g.row_count for g in groups) == DEFAULT_CHUNK_ROWS


async def test_only_the_last_copied_group_carries_a_vgtid_the_snapshot_position(shards, copy_table):
    async with VStream(shards_endpoints(shards), [COPY], start="snapshot") as stream:
        snapshot_vgtid = stream.vgtid
        groups = await copy_of(stream)
    assert [g.vgtid is not None for g in groups] == [False] * (len(groups) - 1) + [True]
    assert groups[-1].vgtid == snapshot_vgtid
    assert groups[-1].events[-1].type.value == "VGTID"


async def test_changes_after_the_snapshot_come_from_the_binlog_exactly_once(shards, copy_table):
    new_id, changed_id = 3_000_000, shard_ids("80-")[0]
    async with VStream(
        shards_endpoints(shards), [COPY], start="snapshot", heartbeat_interval=0.2
    ) as stream:
        # The snapshot is taken when the stream opens: these land after it.
        await shards["80-"].run(
            (INSERT, (new_id, "new")),
            (f"UPDATE {COPY_TABLE} SET label = 'changed' WHERE id = %s", (changed_id,)),
        )
        copy = await copy_of(stream)
        changes = await collect_groups(stream, lambda gs: len(gs) >= 2)
        await asyncio.sleep(0.5)
        changes += await collect_groups(stream, lambda gs: True, 2)
    copied = {row["id"]: row for row in copied_rows(copy)}
    assert new_id not in copied
    assert copied[changed_id]["label"] == "old"
    streamed = [
        (e.op.value, (c.after or c.before)["id"])
        for g in changes
        for e in g.row_events()
        for c in e.changes
    ]
    assert streamed == [("insert", new_id), ("update", changed_id)]
    assert not any(e.copied for g in changes for e in g.row_events())


async def test_copy_fields_match_the_binlog_fields_of_the_same_table(shards, copy_table):
    async with VStream(shards_endpoints(shards), [COPY], start="snapshot") as stream:
        copy = await copy_of(stream)
        await shards["-80"].run((INSERT, (3_000_001, "new")))
        later = await collect_groups(stream, lambda gs: len(gs) >= 1)
    copy_fields = next(e for g in copy for e in g.events if isinstance(e, FieldEvent)).fields
    binlog_fields = next(e for g in later for e in g.events if isinstance(e, FieldEvent)).fields
    assert copy_fields == binlog_fields
    assert [f.type for f in copy_fields] == [
        "BIGINT",
        "VARCHAR",
        "TEXT",
        "VARCHAR",
        "INT",
        "DECIMAL",
        "DATETIME",
    ]
    assert [f.unsigned for f in copy_fields][4]


async def test_debezium_envelopes_of_the_copy_are_reads_and_the_final_one_is_last(
    shards, copy_table
):
    async with VStream(shards_endpoints(shards), [COPY], start="snapshot") as stream:
        groups = await copy_of(stream)
    envelopes = [env for g in groups for env in debezium_envelopes(g)]
    assert {env["op"] for env in envelopes} == {"r"}
    assert [env["source"]["snapshot"] for env in envelopes[-2:]] == ["true", "last"]
    assert envelopes[-1]["source"]["vgtid"] is not None
    assert envelopes[0]["source"]["vgtid"] is None


async def test_run_cdc_stopped_during_the_copy_has_no_resume_position(
    local_cluster, shards, copy_table
):
    out = io.StringIO()
    final = await run_cdc(local_cluster.config, [COPY], "snapshot", "debezium", out, max_rows=1)
    assert final is None
    first = json.loads(out.getvalue().splitlines()[0])
    assert (first["op"], first["source"]["snapshot"]) == ("r", "true")


def shards_endpoints(shards) -> dict:
    return {("commerce", name): shard.endpoint for name, shard in shards.items()}


async def test_sql_rows_of_the_copy_carry_a_vgtid_on_the_final_row_only(shards, copy_table):
    formatter = VStreamRowFormatter(COPY)
    async with VStream(shards_endpoints(shards), [COPY], start="snapshot") as stream:
        groups = await copy_of(stream)
    rows = [row for g in groups for row in formatter.rows(g)]
    assert len(rows) == sum(ROWS_PER_SHARD.values())
    assert {row[0] for row in rows} == {"+"}
    assert [row[-1] is not None for row in rows] == [False] * (len(rows) - 1) + [True]
