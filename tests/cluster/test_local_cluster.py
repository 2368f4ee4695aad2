"""The local MariaDB shards `shardgate up` starts: settings, schema, restarts, failures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiomysql
import pymysql
import pytest
import pytest_asyncio

from proxy.cluster import (
    LocalCluster,
    MariaDBNotInstalled,
    PortInUse,
    SchemaError,
    ShardStartError,
    find_free_port_range,
)
from proxy.config import ShardEndpoint, load_config
from tests.conftest import (
    EXAMPLE_CLUSTER_YAML,
    REPO_ROOT,
    example_cluster_config,
    mariadb_template_dir,
)

COMMERCE_TABLES = {"corder", "customer", "customer_events"}
LOOKUP_TABLES = {"corder_order_id_idx", "corder_seq", "customer_seq", "product"}


async def query(endpoint: ShardEndpoint, sql: str) -> list[tuple[object, ...]]:
    conn = await aiomysql.connect(
        host=endpoint.host,
        port=endpoint.port,
        user=endpoint.user,
        password=endpoint.password,
        db=endpoint.database,
        autocommit=True,
    )
    try:
        async with conn.cursor() as cur:
            await cur.execute(sql)
            return list(await cur.fetchall())
    finally:
        await conn.ensure_closed()


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest_asyncio.fixture(loop_scope="session")
async def own_cluster(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[LocalCluster]:
    """A private, started copy of the example cluster: these tests stop and kill its shards."""
    cluster = LocalCluster(
        example_cluster_config(tmp_path / "data"),
        template_dir=mariadb_template_dir(request.config, tmp_path),
    )
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fresh_cluster(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LocalCluster]:
    """A private example cluster just as the first start leaves it (the shared `local_cluster`
    is written to by other tests, so exact seed rows and users are checked here)."""
    work = tmp_path_factory.mktemp("fresh-cluster")
    cluster = LocalCluster(
        example_cluster_config(work / "data"),
        template_dir=mariadb_template_dir(pytestconfig, work),
    )
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


# -- the shared session cluster (read-only checks) -------------------------------------------


async def test_every_shard_writes_a_full_row_binlog_with_its_own_server_and_domain_id(
    local_cluster: LocalCluster,
) -> None:
    seen = []
    for spec in local_cluster.local_shards:
        (row,) = await query(
            spec.endpoint,
            "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, "
            "@@gtid_domain_id, @@server_id",
        )
        assert row == (1, "ROW", "FULL", "FULL", spec.gtid_domain_id, spec.server_id)
        seen.append((row[4], row[5]))
    assert len({domain for domain, _ in seen}) == len(seen) == 3
    assert len({server for _, server in seen}) == 3


async def test_a_write_gets_a_gtid_in_the_shards_own_domain(fresh_cluster: LocalCluster) -> None:
    spec = fresh_cluster.local_shard("commerce", "80-")
    conn = await aiomysql.connect(
        host=spec.endpoint.host,
        port=spec.port,
        user="root",
        password="",
        db="commerce",
        autocommit=True,
    )
    try:
        async with conn.cursor() as cur:
            # Two transactions that leave no row behind for the other tests of this cluster.
            await cur.execute("INSERT INTO customer (customer_id) VALUES (42)")
            await cur.execute("DELETE FROM customer WHERE customer_id = 42")
            await cur.execute("SELECT @@gtid_binlog_pos")
            (position,) = await cur.fetchone()
    finally:
        await conn.ensure_closed()
    assert position.startswith(f"{spec.gtid_domain_id}-{spec.server_id}-")


async def test_shards_listen_on_loopback_only_with_their_own_settings(
    local_cluster: LocalCluster,
) -> None:
    for spec in local_cluster.local_shards:
        (row,) = await query(
            spec.endpoint,
            "SELECT @@bind_address, @@port, @@skip_name_resolve, @@character_set_server, "
            "@@datadir, @@socket, @@tmpdir",
        )
        bind, port, skip_name_resolve, charset, datadir, socket, tmpdir = row
        assert (bind, port, skip_name_resolve, charset) == ("127.0.0.1", spec.port, 1, "utf8mb4")
        # Nothing from /etc/mysql: the data dir and socket are the shard's own.
        assert Path(datadir) == spec.data_dir
        assert Path(socket) == spec.socket_path
        # Not /tmp: a starting mariadbd deletes the #sql* temporary files in its tmpdir.
        assert Path(tmpdir) == spec.tmp_dir


async def test_root_may_log_in_only_from_localhost_and_loopback(
    fresh_cluster: LocalCluster,
) -> None:
    endpoint = fresh_cluster.endpoint("lookup", "0")
    rows = await query(endpoint, "SELECT user, host FROM mysql.global_priv ORDER BY user, host")
    assert rows == [("mariadb.sys", "localhost"), ("root", "127.0.0.1"), ("root", "localhost")]


async def test_commerce_schema_is_applied_on_each_commerce_shard(
    local_cluster: LocalCluster,
) -> None:
    for shard in ("-80", "80-"):
        rows = await query(local_cluster.endpoint("commerce", shard), "SHOW TABLES")
        tables = {name for (name,) in rows}
        # Other tests may add tables to the shared cluster; the example schema's must be there.
        assert COMMERCE_TABLES <= tables
        assert not LOOKUP_TABLES & tables


async def test_lookup_schema_and_seed_rows_are_applied_on_the_lookup_shard(
    fresh_cluster: LocalCluster,
) -> None:
    endpoint = fresh_cluster.endpoint("lookup", "0")
    assert {name for (name,) in await query(endpoint, "SHOW TABLES")} == LOOKUP_TABLES
    assert await query(endpoint, "SELECT id, next_id, cache FROM customer_seq") == [(0, 1, 100)]
    products = await query(endpoint, "SELECT sku, description FROM product ORDER BY sku")
    assert (b"SKU-1003", "mouse; wireless") in products
    assert len(products) == 4


async def test_commerce_shards_start_without_rows(fresh_cluster: LocalCluster) -> None:
    # Sharded seed rows would have to sit on the shard the hash vindex picks; there are none.
    for shard in ("-80", "80-"):
        endpoint = fresh_cluster.endpoint("commerce", shard)
        for table in sorted(COMMERCE_TABLES):
            assert await query(endpoint, f"SELECT count(*) FROM {table}") == [(0,)]


async def test_each_shard_has_only_its_keyspace_database_besides_the_system_ones(
    fresh_cluster: LocalCluster,
) -> None:
    for spec in fresh_cluster.local_shards:
        rows = await query(spec.endpoint, "SHOW DATABASES")
        assert {name for (name,) in rows} == {
            spec.keyspace,
            "information_schema",
            "mysql",
            "performance_schema",
            "sys",
        }


async def test_message_table_keeps_its_vitess_comment(local_cluster: LocalCluster) -> None:
    rows = await query(
        local_cluster.endpoint("commerce", "-80"),
        "SELECT table_comment FROM information_schema.tables "
        "WHERE table_schema = 'commerce' AND table_name = 'customer_events'",
    )
    assert rows == [
        (
            "vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size=10,"
            "vt_cache_size=10000,vt_poller_interval=1",
        )
    ]


async def test_endpoints_list_every_shard_of_the_configuration(
    local_cluster: LocalCluster,
) -> None:
    assert list(local_cluster.endpoints) == [
        ("commerce", "-80"),
        ("commerce", "80-"),
        ("lookup", "0"),
    ]
    assert local_cluster.endpoint("commerce", "80-").port == local_cluster.local_shards[1].port


async def test_session_cluster_stays_clear_of_a_make_run_cluster(
    local_cluster: LocalCluster,
) -> None:
    example = load_config(EXAMPLE_CLUSTER_YAML)
    assert local_cluster.config.local is not None and example.local is not None
    assert local_cluster.config.local.data_dir != example.local.data_dir
    taken = {example.listen.port, *range(example.local.base_port, example.local.base_port + 3)}
    used = {local_cluster.config.listen.port, *(s.port for s in local_cluster.local_shards)}
    assert not taken & used


# -- private clusters ------------------------------------------------------------------------


async def test_restart_keeps_data_and_does_not_reapply_the_schema(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    config = example_cluster_config(tmp_path / "data")
    template = mariadb_template_dir(request.config, tmp_path)
    async with LocalCluster(config, template_dir=template) as cluster:
        lookup = cluster.endpoint("lookup", "0")
        await query(lookup, "INSERT INTO product VALUES ('SKU-9', 'kept', 9)")
        await query(lookup, "UPDATE customer_seq SET next_id = 501")
    async with LocalCluster(config, template_dir=template) as cluster:
        lookup = cluster.endpoint("lookup", "0")
        assert await query(lookup, "SELECT description FROM product WHERE sku = 'SKU-9'") == [
            ("kept",)
        ]
        # Re-running the seed INSERTs would have failed on duplicate keys or reset next_id.
        assert await query(lookup, "SELECT next_id FROM customer_seq") == [(501,)]
        assert await query(lookup, "SELECT count(*) FROM product") == [(5,)]


async def test_stop_shard_stops_only_that_shard_and_start_shard_brings_it_back(
    own_cluster: LocalCluster,
) -> None:
    target = own_cluster.endpoint("commerce", "-80")
    other = own_cluster.endpoint("commerce", "80-")
    await query(target, "INSERT INTO customer (customer_id, email) VALUES (1, 'a@x')")
    await own_cluster.stop_shard("commerce", "-80")
    assert not own_cluster.is_running("commerce", "-80")
    with pytest.raises(pymysql.err.OperationalError):
        await query(target, "SELECT 1")
    assert await query(other, "SELECT 1") == [(1,)]
    await own_cluster.start_shard("commerce", "-80")
    assert await query(target, "SELECT email FROM customer") == [(b"a@x",)]


async def test_a_shard_stopped_under_open_client_connections_starts_again(
    own_cluster: LocalCluster,
) -> None:
    # The server closes these connections as it shuts down, leaving TIME_WAIT entries on its
    # port (what a proxy's pooled connections do); the port must still count as free.
    endpoint = own_cluster.endpoint("commerce", "80-")
    clients = [
        await aiomysql.connect(host=endpoint.host, port=endpoint.port, user="root", password="")
        for _ in range(3)
    ]
    await own_cluster.stop_shard("commerce", "80-")
    await own_cluster.start_shard("commerce", "80-")
    for client in clients:
        client.close()
    assert await query(endpoint, "SELECT 1") == [(1,)]


async def test_a_killed_shard_restarts_with_its_committed_rows(own_cluster: LocalCluster) -> None:
    target = own_cluster.endpoint("lookup", "0")
    await query(target, "INSERT INTO corder_order_id_idx VALUES (7, x'80')")
    pid = own_cluster.pid("lookup", "0")
    assert pid is not None
    await own_cluster.stop_shard("lookup", "0", kill=True)
    assert not process_exists(pid)
    await own_cluster.start_shard("lookup", "0")
    assert own_cluster.pid("lookup", "0") not in (None, pid)
    assert await query(target, "SELECT order_id, keyspace_id FROM corder_order_id_idx") == [
        (7, b"\x80")
    ]


async def test_stop_terminates_every_mariadbd_it_started(own_cluster: LocalCluster) -> None:
    pids = [own_cluster.pid(s.keyspace, s.shard) for s in own_cluster.local_shards]
    assert all(pid is not None and process_exists(pid) for pid in pids)
    await own_cluster.stop()
    assert not any(process_exists(pid) for pid in pids if pid is not None)


async def test_missing_mariadb_binaries_are_named_with_the_debian_package(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    cluster = LocalCluster(
        example_cluster_config(tmp_path / "data"), mariadb_search_path=str(empty)
    )
    with pytest.raises(MariaDBNotInstalled) as caught:
        await cluster.start()
    assert "mariadbd" in str(caught.value)
    assert "mariadb-server" in str(caught.value)
    assert not (tmp_path / "data").exists()


async def test_a_port_already_in_use_is_refused_naming_the_shard(
    own_cluster: LocalCluster, tmp_path: Path
) -> None:
    taken = own_cluster.config.local
    assert taken is not None
    clash = LocalCluster(
        load_config(EXAMPLE_CLUSTER_YAML, data_dir=tmp_path / "other", base_port=taken.base_port)
    )
    with pytest.raises(PortInUse) as caught:
        await clash.start()
    assert "commerce/-80" in str(caught.value)
    assert f"port {taken.base_port} " in str(caught.value)


async def test_a_shard_that_cannot_start_reports_its_error_log(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    config = example_cluster_config(tmp_path / "data")
    # An existing but empty data dir is taken as initialised; mariadbd finds no system tables.
    (tmp_path / "data" / "lookup" / "0").mkdir(parents=True)
    cluster = LocalCluster(config, template_dir=mariadb_template_dir(request.config, tmp_path))
    with pytest.raises(ShardStartError) as caught:
        await cluster.start()
    assert (caught.value.keyspace, caught.value.shard) == ("lookup", "0")
    assert "exited with code" in str(caught.value)
    assert "mysql.db" in str(caught.value)  # quoted from the error log
    # The shards that did start were stopped again.
    assert not any(cluster.is_running(s.keyspace, s.shard) for s in cluster.local_shards)


def test_shards_exit_when_the_process_that_started_them_is_killed(
    pytestconfig: pytest.Config, tmp_path: Path
) -> None:
    template = mariadb_template_dir(pytestconfig, tmp_path)
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        from proxy.cluster import LocalCluster
        from tests.conftest import example_cluster_config

        async def main():
            cluster = LocalCluster(
                example_cluster_config(Path({str(tmp_path / "data")!r})),
                template_dir=Path({str(template)!r}),
            )
            await cluster.start()
            pids = [cluster.pid(s.keyspace, s.shard) for s in cluster.local_shards]
            print(" ".join(map(str, pids)), flush=True)
            await asyncio.sleep(3600)

        asyncio.run(main())
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 3
        assert all(process_exists(pid) for pid in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30
        while any(process_exists(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(process_exists(pid) for pid in pids)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


async def test_a_failing_schema_statement_is_reported_and_leaves_no_half_made_data_dir(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    (tmp_path / "ks.json").write_text('{"sharded": false}')
    (tmp_path / "ks.sql").write_text(
        "CREATE TABLE t (id bigint primary key);\nINSERT INTO t VALUES (1), (1);\n"
    )
    (tmp_path / "cluster.yaml").write_text(
        "users: [{user: root}]\n"
        f"local: {{data_dir: data, base_port: {find_free_port_range(1)}}}\n"
        "keyspaces: {ks: {vschema: ks.json, schema: ks.sql, shards: ['0']}}\n"
    )
    config = load_config(tmp_path / "cluster.yaml")
    template = mariadb_template_dir(request.config, tmp_path)
    with pytest.raises(SchemaError) as caught:
        await LocalCluster(config, template_dir=template).start()
    assert "statement 2 failed on shard ks/0" in str(caught.value)
    assert "Duplicate entry" in str(caught.value)
    assert not (tmp_path / "data" / "ks" / "0").exists()

    (tmp_path / "ks.sql").write_text(
        "CREATE TABLE t (id bigint primary key);\nINSERT INTO t VALUES (1), (2);\n"
    )
    async with LocalCluster(config, template_dir=template) as cluster:
        assert await query(cluster.endpoint("ks", "0"), "SELECT id FROM t") == [(1,), (2,)]


async def test_a_shard_not_ready_in_time_is_an_error_quoting_its_log(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # mariadbd needs well over a millisecond to open its port, so a zero deadline always expires.
    cluster = LocalCluster(
        example_cluster_config(tmp_path / "data"),
        template_dir=mariadb_template_dir(request.config, tmp_path),
        ready_timeout_s=0,
    )
    with pytest.raises(ShardStartError) as caught:
        await cluster.start()
    assert "not ready on port" in str(caught.value)
    assert "last lines of" in str(caught.value)
    assert not any(cluster.is_running(s.keyspace, s.shard) for s in cluster.local_shards)
