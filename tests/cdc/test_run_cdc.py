"""`run_cdc` (behind `shardgate cdc`): NDJSON in Debezium or VStream shape, and the resume
position it returns."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime

import pytest

from proxy.cdc import InvalidPositionError, Vgtid, parse_start, run_cdc
from tests.cdc.conftest import PROBE, PROBE_TABLE, new_id


async def current_vgtid(shards) -> str:
    return Vgtid.from_json(
        [
            {"keyspace": "commerce", "shard": name, "gtid": await shard.gtid_binlog_pos()}
            for name, shard in shards.items()
        ]
    ).to_json()


async def insert_update_delete(shard, row_id: int) -> None:
    await shard.run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'new', 1.5, NOW(6))", (row_id,)))
    await shard.run((f"UPDATE {PROBE_TABLE} SET label = 'changed' WHERE id = %s", (row_id,)))
    await shard.run((f"DELETE FROM {PROBE_TABLE} WHERE id = %s", (row_id,)))


async def test_debezium_format_writes_one_envelope_per_row_change(
    local_cluster, shards, probe_table
):
    start = await current_vgtid(shards)
    row_id = new_id()
    await insert_update_delete(shards["80-"], row_id)
    out = io.StringIO()
    async with asyncio.timeout(15):
        final = await run_cdc(local_cluster.config, [PROBE], start, "debezium", out, max_rows=3)
    envelopes = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["op"] for e in envelopes] == ["c", "u", "d"]
    insert, update, delete = envelopes
    assert insert["before"] is None
    assert insert["after"] == {
        "id": row_id,
        "label": "new",
        "amount": "1.50",
        "written_at": insert["after"]["written_at"],
    }
    assert (update["before"]["label"], update["after"]["label"]) == ("new", "changed")
    assert (delete["before"]["label"], delete["after"]) == ("changed", None)
    source = delete["source"]
    assert (source["keyspace"], source["shard"], source["table"]) == (
        "commerce",
        "80-",
        PROBE_TABLE,
    )
    assert source["gtid"] == await shards["80-"].gtid_binlog_pos()
    assert Vgtid.from_json(source["vgtid"]) == final
    assert isinstance(delete["ts_ms"], int) and isinstance(source["ts_ms"], int)


async def test_vstream_format_writes_every_event_of_the_transaction(
    local_cluster, shards, probe_table
):
    start = await current_vgtid(shards)
    row_id = new_id()
    await shards["-80"].run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'v', 2, NOW(6))", (row_id,)))
    out = io.StringIO()
    async with asyncio.timeout(15):
        final = await run_cdc(local_cluster.config, [PROBE], start, "vstream", out, max_rows=1)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["type"] for e in events] == ["BEGIN", "FIELD", "ROW", "COMMIT", "VGTID"]
    row = events[2]
    assert row["table_name"] == PROBE
    assert row["row_changes"][0]["after"]["id"] == row_id
    assert Vgtid.from_json(events[-1]["vgtid"]) == final


async def test_stopping_an_idle_run_returns_the_start_position(local_cluster, shards, probe_table):
    start = await current_vgtid(shards)
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.5, stop.set)
    out = io.StringIO()
    async with asyncio.timeout(10):
        final = await run_cdc(local_cluster.config, [PROBE], start, "debezium", out, stop=stop)
    assert final == Vgtid.from_json(start)
    assert out.getvalue() == ""


def test_start_text_since_accepts_iso_time_with_zone_and_epoch_seconds():
    assert parse_start("since=2026-01-31T12:00:00Z") == (
        "current",
        datetime(2026, 1, 31, 12, tzinfo=UTC),
    )
    assert parse_start("since=1700000000.5") == ("current", 1700000000.5)
    assert parse_start("beginning") == ("beginning", None)


def test_start_text_since_without_zone_is_rejected():
    with pytest.raises(InvalidPositionError, match="time zone"):
        parse_start("since=2026-01-31T12:00:00")


def test_start_text_otherwise_is_a_vgtid():
    start, since = parse_start('[{"keyspace":"commerce","shard":"-80","gtid":"1-100-3"}]')
    assert isinstance(start, Vgtid) and since is None
    assert start.position_of("commerce", "-80") == "1-100-3"
