"""Schema tracking through a real proxy over real shards: the columns are known at start,
after DDL through the proxy, after DDL made directly on the shards (timer, or a DDL seen in
a binlog the proxy follows), with a shard down at start; and the planner uses them
(INSERT without a column list)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest
import yaml

from proxy.cluster_state import ClusterState
from proxy.config import SchemaTrackingConfig, load_config
from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy
from vschema.loader import build_vschema

REFRESH_S = 0.5


def _tracking_config(local_cluster, refresh_seconds: float) -> Path:
    """The test cluster's file with ``schema_tracking: {refresh_seconds: N}``, next to it."""
    base = Path(local_cluster.config.path)
    path = base.with_name(f"cluster-tracking-{refresh_seconds}.yaml")
    if not path.exists():
        doc = yaml.safe_load(base.read_text())
        doc["schema_tracking"] = {"refresh_seconds": refresh_seconds}
        path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def fast_proxy(local_cluster, tmp_path) -> Iterator[ProxyProcess]:
    """A proxy process whose tracker re-reads the shards every REFRESH_S seconds."""
    p = start_proxy(_tracking_config(local_cluster, REFRESH_S), local_cluster.endpoints, tmp_path / "proxy.log")
    try:
        yield p
    finally:
        stop_proxy(p)


def _shard_of(local_cluster, customer_id: int) -> str:
    config = local_cluster.config
    vs = build_vschema({n: (ks.vschema, list(ks.shards)) for n, ks in config.keyspaces.items()})
    ksid = vs.keyspaces["commerce"].vindexes["hash"].map([customer_id])[0]
    return vs.shard_for("commerce", ksid)


def _rows_per_shard(proxy, sql: str) -> dict[str, tuple]:
    out = {}
    for shard in ("-80", "80-"):
        conn = proxy.connect(f"commerce:{shard}")
        try:
            with conn.cursor() as c:
                c.execute(sql)
                out[shard] = c.fetchall()
        finally:
            conn.close()
    return out


def _direct(local_cluster, keyspace: str, shard: str) -> pymysql.connections.Connection:
    ep = local_cluster.endpoint(keyspace, shard)
    return pymysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password, database=ep.database,
                           autocommit=True)


def _vstreams_opened(log: str) -> list[str]:
    return [line for line in log.splitlines() if "vstream opened" in line]


def _opened_on_both(log: str, skip: int) -> bool:
    """Whether VStreams opened after the first ``skip`` cover both commerce shards."""
    lines = _vstreams_opened(log)[skip:]
    return all(any(f'"shard":"{shard}"' in line for line in lines) for shard in ("-80", "80-"))


def _until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except pymysql.err.MySQLError as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing after {timeout}s: {e}") from e
        time.sleep(0.1)


def test_columns_known_at_start_and_insert_without_column_list_lands_on_its_shard(proxy, local_cluster) -> None:
    conn = proxy.connect("commerce", autocommit=True)
    try:
        with conn.cursor() as c:
            ids = [7710001, 7710002, 7710003, 7710004]
            c.execute("insert into customer values " + ", ".join(f"({i}, 'nocols{i}', 5, null)" for i in ids))
            assert c.rowcount == len(ids)
            # NULL for the auto_increment column: the sequence fills it, as with a column list
            c.execute("insert into customer values (null, 'nocols-seq', 6, null)")
            generated = conn.insert_id()
            assert generated > 0
    finally:
        conn.close()
    found = _rows_per_shard(proxy, "select customer_id, email from customer where email like 'nocols%'")
    for shard, rows in found.items():
        for cid, _email in rows:
            assert _shard_of(local_cluster, int(cid)) == shard
    assert sorted(int(r[0]) for rows in found.values() for r in rows) == sorted([*ids, generated])


def test_column_count_mismatch_is_1136(proxy) -> None:
    conn = proxy.connect("commerce")
    try:
        with pytest.raises(pymysql.err.MySQLError) as e, conn.cursor() as c:
            c.execute("insert into customer values (7710101, 'short')")
        assert e.value.args == (1136, "Column count doesn't match value count at row 1")
    finally:
        conn.close()


def test_create_and_alter_through_the_proxy_are_seen_by_the_next_statement(proxy, local_cluster) -> None:
    name = f"tracked_q_{uuid.uuid4().hex[:6]}"
    conn = proxy.connect("commerce", autocommit=True)
    try:
        with conn.cursor() as c:
            # CREATE QUEUE: a CREATE TABLE on every shard plus a vschema entry (hash on id)
            c.execute(f"create queue {name} (body varchar(20))")
            c.execute(f"show columns from {name}")
            names = [r[0] for r in c.fetchall()]
            given = {"id": "7710211", "priority": "50", "epoch": "0", "time_next": "0", "time_acked": "null",
                     "body": "'queued'"}
            c.execute(f"insert into {name} values ({', '.join(given[n] for n in names)})")
            assert c.rowcount == 1
            c.execute(f"drop table {name}")

            c.execute("alter table customer add column tracked_note varchar(20)")
            try:
                c.execute("insert into customer values (7710201, 'altered', 1, null, 'note')")
                c.execute("select tracked_note from customer where customer_id = 7710201")
                assert c.fetchall() == (("note",),)
            finally:
                c.execute("alter table customer drop column tracked_note")
            # the DROP is seen at once too: four values again
            c.execute("insert into customer values (7710202, 'dropped', 1, null)")
    finally:
        conn.close()
    rows = _rows_per_shard(proxy, "select customer_id from customer where customer_id in (7710201, 7710202)")
    assert {int(r[0]) for r in rows[_shard_of(local_cluster, 7710201)]} >= {7710201}
    assert {int(r[0]) for r in rows[_shard_of(local_cluster, 7710202)]} >= {7710202}


def _drop_through(proxy, column: str) -> None:
    """Drop a column added directly on the shards through ``proxy`` (every shard, and that
    proxy's tracker refreshes: later tests using it see the table as it is again)."""
    conn = proxy.connect("commerce", autocommit=True)
    try:
        with conn.cursor() as c:
            c.execute(f"alter table customer drop column if exists {column}")
    finally:
        conn.close()


def test_ddl_made_directly_on_the_shards_is_seen_after_the_timer(fast_proxy, proxy, local_cluster) -> None:
    for shard in ("-80", "80-"):
        d = _direct(local_cluster, "commerce", shard)
        with d.cursor() as c:
            c.execute("alter table customer add column direct_note varchar(20)")
        d.close()
    conn = fast_proxy.connect("commerce", autocommit=True)
    try:
        def insert() -> None:
            with conn.cursor() as c:
                c.execute("insert into customer values (7710301, 'direct', 1, null, 'seen')")

        _until(insert, 10 * REFRESH_S + 5, "five values after a direct ADD COLUMN")
        rows = _rows_per_shard(fast_proxy, "select direct_note from customer where customer_id = 7710301")
        assert rows[_shard_of(local_cluster, 7710301)] == (("seen",),)
    finally:
        conn.close()
        _drop_through(proxy, "direct_note")
    assert "schema tracked" in fast_proxy.log_text()


def test_ddl_in_a_followed_binlog_is_seen_before_the_timer(proxy, local_cluster) -> None:
    """The session proxy refreshes every 60 s; a STREAM subscriber makes it follow the
    message table's binlog (messaging.binlog_watch), where a direct DDL shows up."""
    sub = proxy.connect("commerce", cursorclass=pymysql.cursors.SSCursor, autocommit=True)
    stream = sub.cursor()
    try:
        stream.execute("set workload = olap")
        opened_before = _vstreams_opened(proxy.log_text())
        stream.execute("stream * from customer_events")
        # The change watch has opened its binlog streams (read their start positions) on both
        # shards: a DDL before that is missed, and the timer is 60 s away. Waited for in the
        # proxy's log, not slept 2 s (starting the decoder processes can take longer).
        deadline = time.monotonic() + 20
        while not _opened_on_both(proxy.log_text(), len(opened_before)) and time.monotonic() < deadline:
            time.sleep(0.05)
        for shard in ("-80", "80-"):
            d = _direct(local_cluster, "commerce", shard)
            with d.cursor() as c:
                c.execute("alter table customer add column binlog_note varchar(20)")
            d.close()
        conn = proxy.connect("commerce", autocommit=True)
        try:
            def insert() -> None:
                with conn.cursor() as c:
                    c.execute("insert into customer values (7710401, 'binlog', 1, null, 'seen')")

            _until(insert, 15, "five values after a direct ADD COLUMN seen in the binlog")
        finally:
            conn.close()
    finally:
        # a STREAM never ends: drop the connection under it, reading nothing more
        if stream._result is not None:
            stream._result.unbuffered_active = False
        stream._result = None
        sub._force_close()
        _drop_through(proxy, "binlog_note")


async def test_a_shard_down_at_start_does_not_stop_the_proxy(local_cluster, tmp_path) -> None:
    await local_cluster.stop_shard("commerce", "-80")
    p = None
    try:
        p = start_proxy(_tracking_config(local_cluster, REFRESH_S), local_cluster.endpoints, tmp_path / "proxy.log")
        log = p.log_text()
        assert "schema tracking: shard unavailable" in log
        assert "keyspace=commerce" in log and "shard=-80" in log
        # the keyspace was read from its other shard: a row of 80- goes in without a column list
        cid = next(i for i in range(7710501, 7710600) if _shard_of(local_cluster, i) == "80-")
        conn = p.connect("commerce", autocommit=True)
        try:
            with conn.cursor() as c:
                c.execute(f"insert into customer values ({cid}, 'down-at-start', 1, null)")
                assert c.rowcount == 1
        finally:
            conn.close()
    finally:
        if p is not None:
            stop_proxy(p)
        await local_cluster.start_shard("commerce", "-80")


async def test_a_keyspace_unreadable_at_start_is_read_by_the_timer_and_close_stops_it(local_cluster, caplog) -> None:
    config = dataclasses.replace(local_cluster.config, schema_tracking=SchemaTrackingConfig(refresh_seconds=0.3))
    await local_cluster.stop_shard("lookup", "0")
    proxy = ClusterState(config, local_cluster.endpoints)
    try:
        try:
            await proxy.start()
            assert proxy.schema.table("commerce", "customer") is not None
            assert proxy.schema.table("lookup", "customer_seq") is None
            warned = [r for r in caplog.records if r.getMessage().startswith("schema tracking: keyspace not read")]
            assert warned and warned[0].keyspace == "lookup"
        finally:
            await local_cluster.start_shard("lookup", "0")
        before = proxy.schema
        deadline = time.monotonic() + 20
        while proxy.schema.table("lookup", "customer_seq") is None:
            assert time.monotonic() < deadline, "the timer did not read the keyspace once its shard was back"
            await asyncio.sleep(0.1)
        after = proxy.schema
        assert after is not before and after.version > before.version
        assert after.table("lookup", "customer_seq").column_names() == ["id", "next_id", "cache"]
        assert after.table("commerce", "customer") == before.table("commerce", "customer")
        # nothing changes: the same object stays (the plan cache keeps its plans)
        await asyncio.sleep(1.0)
        assert proxy.schema is after
        timer = proxy.schema_tracker._timer
        assert timer is not None and not timer.done()
    finally:
        await proxy.close()
    assert timer.cancelled()
    assert proxy.schema_tracker._timer is None


def test_schema_tracking_setting_is_validated(tmp_path, local_cluster) -> None:
    from proxy.config import ConfigError

    base = Path(local_cluster.config.path)
    doc = yaml.safe_load(base.read_text())
    for bad in (-1, "soon", True):
        doc["schema_tracking"] = {"refresh_seconds": bad}
        path = base.with_name("cluster-bad-tracking.yaml")
        path.write_text(yaml.safe_dump(doc))
        with pytest.raises(ConfigError, match="schema_tracking.refresh_seconds"):
            load_config(path)
    doc["schema_tracking"] = {"refresh_seconds": 0}
    path.write_text(yaml.safe_dump(doc))
    assert load_config(path).schema_tracking.refresh_seconds == 0
    del doc["schema_tracking"]
    path.write_text(yaml.safe_dump(doc))
    assert load_config(path).schema_tracking.refresh_seconds == 60
