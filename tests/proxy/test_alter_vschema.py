"""Live vschema (issue 12): Vitess's vschema DDL through real proxy processes over the session's
real shards, stored in the cluster (``_shardgate.vschema`` on commerce/-80) and followed by every
proxy process started from the same cluster file, within a second, surviving restarts."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from tests.proxy.sessions_support import dsn_cluster_file
from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy
from vschema.loader import build_vschema

PROPAGATION_BAR_S = 1.0
# How long the tests that are not about propagation's speed wait for a change to arrive (it
# returns as soon as it has): the bar above, which the speed tests measure, is a goal, not a
# deadline for every wait of a loaded machine.
SETTLE_S = 10.0


@pytest.fixture(scope="module")
def proxies(local_cluster, tmp_path_factory) -> Iterator[tuple[ProxyProcess, ProxyProcess]]:
    """Two separate proxy processes from one cluster file."""
    logs = tmp_path_factory.mktemp("live-vschema")
    a = start_proxy(local_cluster.config.path, local_cluster.endpoints, logs / "a.log")
    try:
        b = start_proxy(local_cluster.config.path, local_cluster.endpoints, logs / "b.log")
    except BaseException:
        stop_proxy(a)
        raise
    try:
        yield a, b
    finally:
        stop_proxy(a)
        stop_proxy(b)


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:6]}"


def run(p: ProxyProcess, database: str | None, *statements: str) -> list[tuple[Any, ...]]:
    """Run statements through a proxy; the rows of the last one."""
    conn = p.connect(database, autocommit=True)
    try:
        with conn.cursor() as c:
            for sql in statements:
                c.execute(sql)
            return list(c.fetchall())
    finally:
        conn.close()


def error_of(p: ProxyProcess, database: str | None, sql: str) -> tuple[int, str]:
    with pytest.raises(pymysql.err.MySQLError) as e:
        run(p, database, sql)
    return e.value.args[0], e.value.args[1]


def until(check: Callable[[], bool], within: float) -> float:
    """Seconds until ``check()`` holds (polled every 10 ms); fails after ``within`` seconds."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > within:
            pytest.fail(f"not seen within {within} s")
        time.sleep(0.01)
    return time.monotonic() - start


def table_vindexes(p: ProxyProcess, table: str) -> list[tuple[Any, ...]]:
    try:
        return run(p, "commerce", f"show vschema vindexes on commerce.{table}")
    except pymysql.err.MySQLError:
        return []


def vexplain_route(p: ProxyProcess, sql: str) -> dict[str, Any]:
    (plan,) = run(p, "commerce", f"vexplain plan {sql}")[0]
    return json.loads(plan)


def shard_of(local_cluster, keyspace_id_of: int) -> str:
    config = local_cluster.config
    vs = build_vschema({n: (ks.vschema, list(ks.shards)) for n, ks in config.keyspaces.items()})
    ksid = vs.keyspaces["commerce"].vindexes["hash"].map([keyspace_id_of])[0]
    return vs.shard_for("commerce", ksid)


def ids_on_shard(p: ProxyProcess, table: str, shard: str) -> set[int]:
    return {int(r[0]) for r in run(p, f"commerce:{shard}", f"select id from {table}")}


@pytest.fixture
def sharded_table(proxies) -> Iterator[str]:
    """A new table on every commerce shard, not yet in the vschema."""
    a, _ = proxies
    name = _name("live_t")
    run(a, "commerce", f"create table {name} (id bigint not null, k bigint, note varchar(20), primary key (id))")
    try:
        yield name
    finally:
        run(a, "commerce", f"drop table if exists {name}")


def test_add_vindex_makes_a_table_routable_by_it_on_every_proxy_within_a_second(
    proxies, sharded_table, local_cluster
) -> None:
    a, b = proxies
    t = sharded_table
    code, _ = error_of(b, "commerce", f"insert into {t} (id, k) values (1, 1)")
    assert code == 1146  # not in the vschema yet: a sharded keyspace refuses it

    started = time.monotonic()
    run(a, "commerce", f"alter vschema on commerce.{t} add vindex hash(id)")
    until(lambda: bool(table_vindexes(b, t)), PROPAGATION_BAR_S)
    elapsed = time.monotonic() - started  # from sending the change to proxy A until B has it
    assert elapsed < PROPAGATION_BAR_S, f"proxy B saw the change after {elapsed:.3f} s"

    assert table_vindexes(b, t) == [("id", "hash", "hash", "", "")]
    route = vexplain_route(b, f"select * from {t} where id = 7")
    assert (route["OperatorType"], route["Variant"], route["Vindex"]) == ("Route", "EqualUnique", "hash")
    ids = list(range(1, 21))
    run(b, "commerce", f"insert into {t} (id, k) values " + ", ".join(f"({i}, {i})" for i in ids))
    for shard in ("-80", "80-"):
        assert ids_on_shard(a, t, shard) == {i for i in ids if shard_of(local_cluster, i) == shard}


def test_change_is_measured_under_a_second_on_the_other_proxy(proxies, sharded_table) -> None:
    a, b = proxies
    t = sharded_table
    timings = []
    for vindex in ("hash", "live_xx"):
        started = time.monotonic()
        using = "" if vindex == "hash" else " using xxhash"
        run(a, "commerce", f"alter vschema on commerce.{t} add vindex {vindex}({'id' if vindex == 'hash' else 'k'}){using}")
        until(lambda v=vindex: any(r[1] == v for r in table_vindexes(b, t)), PROPAGATION_BAR_S)
        timings.append(time.monotonic() - started)
    assert max(timings) < PROPAGATION_BAR_S, timings
    assert [r[1] for r in table_vindexes(b, t)] == ["hash", "live_xx"]


def test_add_table_and_sequence_to_an_unsharded_keyspace(proxies) -> None:
    a, b = proxies
    t, seq = _name("live_u"), _name("live_seq")
    run(a, "lookup", f"alter vschema add table {t}", f"alter vschema add sequence lookup.{seq}")
    until(lambda: (t,) in run(b, "lookup", "show vschema tables"), SETTLE_S)
    tables = [r[0] for r in run(b, "lookup", "show vschema tables")]
    assert tables == sorted(tables) and {"dual", t, seq, "customer_seq"} <= set(tables)
    assert error_of(a, "lookup", f"alter vschema add table lookup.{t}") == (
        1815, f"vschema already contains table {t} in keyspace lookup")
    assert error_of(a, "lookup", f"alter vschema add sequence {seq}") == (
        1815, f"vschema already contains sequence {seq} in keyspace lookup")
    run(a, None, f"alter vschema drop table lookup.{t}", f"alter vschema drop sequence lookup.{seq}")
    until(lambda: (t,) not in run(b, "lookup", "show vschema tables"), SETTLE_S)
    assert (seq,) not in run(b, "lookup", "show vschema tables")


def test_auto_increment_from_a_sequence_fills_the_column(proxies, sharded_table) -> None:
    a, b = proxies
    t, seq = sharded_table, _name("live_seq")
    run(a, "lookup", f"create table {seq} (id bigint, next_id bigint, cache bigint, primary key (id)) "
        "comment 'vitess_sequence'", f"insert into {seq} values (0, 1000, 10)")
    try:
        run(a, "commerce", f"alter vschema add sequence lookup.{seq}",
            f"alter vschema on {t} add vindex hash(id)",
            f"alter vschema on {t} add auto_increment id using lookup.{seq}")
        code, message = error_of(a, "commerce", f"alter vschema on {t} add auto_increment k using lookup.{seq}")
        assert (code, message) == (
            1815, f'vschema already contains auto inc column:"id" sequence:"lookup.{seq}" on table {t} '
            "in keyspace commerce")
        assert error_of(a, "commerce", f"alter vschema drop sequence {seq}") == (
            1815, "drop sequence table: unsupported on sharded keyspace commerce")
        until(lambda: _inserts_with_generated_id(b, t), SETTLE_S)
        generated = sorted(int(r[0]) for r in run(a, "commerce", f"select id from {t}"))
        assert len(generated) == 1 and generated[0] >= 1000
        run(a, "commerce", f"alter vschema on {t} drop auto_increment", f"alter vschema drop sequence lookup.{seq}")
        # no auto_increment any more: the sharding column must be given again
        assert error_of(a, "commerce", f"insert into {t} (k) values (2)") == (
            1105, "VT09003: INSERT query does not have sharding column 'id' in the column list")
    finally:
        run(a, "lookup", f"drop table if exists {seq}")


def _inserts_with_generated_id(p: ProxyProcess, table: str) -> bool:
    try:
        run(p, "commerce", f"insert into {table} (k, note) values (1, 'generated')")
    except pymysql.err.MySQLError:
        return False
    return True


def test_create_and_drop_vindex_follow_vitess(proxies) -> None:
    a, b = proxies
    v = _name("live_v")
    run(a, "commerce", f"alter vschema create vindex {v} using xxhash")
    until(lambda: (("commerce", v, "xxhash", "", "") in run(b, None, "show vschema vindexes")), SETTLE_S)
    assert error_of(a, "commerce", f"alter vschema create vindex commerce.{v} using hash") == (
        1815, f"vindex {v} already exists in keyspace commerce")
    assert error_of(a, "commerce", "alter vschema drop vindex hash") == (
        1815, "can not drop vindex cause hash still defined on table corder")
    run(a, None, f"alter vschema drop vindex commerce.{v}")
    assert error_of(a, None, f"alter vschema drop vindex commerce.{v}") == (
        1815, f"vindex {v} does not exists in keyspace commerce")
    until(lambda: all(r[1] != v for r in run(b, None, "show vschema vindexes")), SETTLE_S)


def test_show_vschema_vindexes_lists_params_and_owner(proxies) -> None:
    a, _ = proxies
    rows = run(a, None, "show vschema vindexes")
    assert ("commerce", "corder_order_id_lkp", "consistent_lookup_unique",
            "from=order_id; table=lookup.corder_order_id_idx; to=keyspace_id", "corder") in rows
    assert [r[:2] for r in rows] == sorted(r[:2] for r in rows)
    assert run(a, "commerce", "show vschema vindexes on corder") == [
        ("customer_id", "hash", "hash", "", ""),
        ("order_id", "corder_order_id_lkp", "consistent_lookup_unique",
         "from=order_id; table=lookup.corder_order_id_idx; to=keyspace_id", "corder"),
    ]
    assert error_of(a, "commerce", "show vschema vindexes on nowhere") == (
        1146, "table 'nowhere' does not exist in keyspace 'commerce'")
    assert run(a, "lookup", "show vschema vindexes on product") == []  # unsharded: no vindexes
    assert error_of(a, None, "show vschema tables")[0] == 1046


def test_refused_changes_leave_every_proxy_unchanged(proxies, sharded_table) -> None:
    a, b = proxies
    t = sharded_table
    before_a = run(a, None, "show vschema vindexes")
    refused = {
        # Vitess's own checks (ApplyVSchemaDDL)
        f"alter vschema add table commerce.{t}": (1815, "add vschema table: unsupported on sharded keyspace commerce"),
        "alter vschema add sequence commerce.s": (1815, "add sequence table: unsupported on sharded keyspace commerce"),
        f"alter vschema on commerce.{t} add vindex nope(id)": (1815, "vindex nope does not exist in keyspace commerce"),
        f"alter vschema on commerce.{t} add vindex hash(id) using xxhash": (
            1815, "vindex hash defined with type hash not xxhash"),
        f"alter vschema on commerce.{t} drop vindex hash": (1815, f"table commerce.{t} not defined in vschema"),
        "alter vschema on commerce.corder drop vindex nope": (1815, "vindex nope not defined in table commerce.corder"),
        f"alter vschema on commerce.{t} add auto_increment id using lookup.customer_seq": (
            1815, f"vschema does not contain table {t} in keyspace commerce"),
        # the built vschema's checks: the change is validated before it is stored
        f"alter vschema on commerce.{t} add vindex live_lkp(k) using lookup with table=`lookup.x`, from=k, "
        "to=keyspace_id": (1105, f"keyspace commerce: primary vindex live_lkp is not Unique for table {t}"),
        f"alter vschema on commerce.{t} add vindex live_bad(k) using no_such_type": (1105, "no_such_type"),
        "alter vschema on nowhere.t add vindex hash(id)": (1049, "VT05003: unknown database 'nowhere' in vschema"),
        "alter vschema add vindex x": (1064, "syntax error at position 25 near 'vindex'"),
    }
    for sql, (code, text) in refused.items():
        got_code, got_text = error_of(a, "commerce", sql)
        assert got_code == code, (sql, got_text)
        assert text in got_text, (sql, got_text)
    assert error_of(a, None, f"alter vschema on {t} add vindex hash(id)") == (1046, "No database selected")
    time.sleep(0.5)  # two polls: nothing may arrive
    assert run(a, None, "show vschema vindexes") == before_a
    assert run(b, None, "show vschema vindexes") == before_a
    assert table_vindexes(a, t) == table_vindexes(b, t) == []


def test_drop_table_and_drop_col_vindex_take_the_table_out(proxies, sharded_table) -> None:
    a, b = proxies
    t = sharded_table
    run(a, "commerce", f"alter vschema on {t} add vindex hash(id)", f"alter vschema on {t} add vindex live_k(k) using xxhash")
    until(lambda: len(table_vindexes(b, t)) == 2, SETTLE_S)
    run(a, "commerce", f"alter vschema on {t} drop vindex live_k")
    until(lambda: len(table_vindexes(b, t)) == 1, SETTLE_S)
    run(a, "commerce", f"alter vschema drop table {t}")
    until(lambda: not table_vindexes(b, t), SETTLE_S)
    assert error_of(b, "commerce", f"select * from {t}")[0] == 1146
    # the last vindex of a table dropped: the table leaves the vschema (Vitess)
    run(a, "commerce", f"alter vschema on {t} add vindex hash(id)", f"alter vschema on {t} drop vindex hash")
    assert error_of(a, "commerce", f"show vschema vindexes on {t}")[0] == 1146


def test_create_queue_through_one_proxy_is_usable_through_the_other(proxies) -> None:
    a, b = proxies
    q = _name("live_q")
    run(a, "commerce", f"create queue {q} (body varchar(20)) with (vt_poller_interval=0.5)")
    try:
        until(lambda: bool(table_vindexes(b, q)), SETTLE_S)
        sub = b.connect("commerce", cursorclass=pymysql.cursors.SSCursor, autocommit=True, read_timeout=15)
        stream = sub.cursor()
        try:
            stream.execute("set workload = olap")
            stream.execute(f"stream * from {q}")
            run(b, "commerce", f"insert into {q} (id, body) values (42, 'from b')")
            assert stream.fetchone() == (42, "from b")
        finally:
            if stream._result is not None:  # a STREAM never ends: drop the connection under it
                stream._result.unbuffered_active = False
            stream._result = None
            sub._force_close()
    finally:
        run(a, "commerce", f"drop table if exists {q}")


def test_changes_survive_restarting_every_proxy_and_leave_the_files_alone(local_cluster, tmp_path) -> None:
    files = {name: ks.vschema_path.read_text() for name, ks in local_cluster.config.keyspaces.items()}
    a = start_proxy(local_cluster.config.path, local_cluster.endpoints, tmp_path / "a.log")
    b = start_proxy(local_cluster.config.path, local_cluster.endpoints, tmp_path / "b.log")
    v = _name("live_restart")
    try:
        run(a, "commerce", f"alter vschema create vindex {v} using xxhash")
        until(lambda: any(r[1] == v for r in run(b, None, "show vschema vindexes")), SETTLE_S)
    finally:
        stop_proxy(a)
        stop_proxy(b)
    a = start_proxy(local_cluster.config.path, local_cluster.endpoints, tmp_path / "a2.log")
    b = start_proxy(local_cluster.config.path, local_cluster.endpoints, tmp_path / "b2.log")
    try:
        for p in (a, b):
            assert ("commerce", v, "xxhash", "", "") in run(p, None, "show vschema vindexes")
        run(b, None, f"alter vschema drop vindex commerce.{v}")
        until(lambda: all(r[1] != v for r in run(a, None, "show vschema vindexes")), SETTLE_S)
    finally:
        stop_proxy(a)
        stop_proxy(b)
    assert {name: ks.vschema_path.read_text() for name, ks in local_cluster.config.keyspaces.items()} == files


def test_deleting_a_keyspace_row_reseeds_it_from_its_file(proxies, local_cluster) -> None:
    a, b = proxies
    t = _name("live_reset")
    run(a, "lookup", f"alter vschema add table {t}")
    until(lambda: (t,) in run(b, "lookup", "show vschema tables"), SETTLE_S)
    e = local_cluster.endpoints[("commerce", "-80")]
    direct = pymysql.connect(host=e.host, port=e.port, user=e.user, password=e.password, autocommit=True)
    try:
        with direct.cursor() as c:
            c.execute("delete from _shardgate.vschema where keyspace = 'lookup'")
    finally:
        direct.close()
    until(lambda: (t,) not in run(b, "lookup", "show vschema tables"), SETTLE_S)
    until(lambda: (t,) not in run(a, "lookup", "show vschema tables"), SETTLE_S)
    assert {r[0] for r in run(a, "lookup", "show vschema tables")} == {
        "dual", *local_cluster.config.keyspaces["lookup"].vschema["tables"]}


def test_topic_created_through_one_proxy_is_served_by_the_other_within_a_second(proxies) -> None:
    a, b = proxies
    topic = _name("live_topic")
    started = time.monotonic()
    run(a, "commerce", f"create topic {topic}")
    try:
        # B installs the topic's runtime on the announcement, before any statement names it there
        until(lambda: f"topic={topic}" in b.log_text(), PROPAGATION_BAR_S)
        assert time.monotonic() - started < PROPAGATION_BAR_S
    finally:
        run(a, "commerce", f"drop topic if exists {topic}")


def test_concurrent_changes_through_two_proxies_are_all_kept(proxies) -> None:
    from concurrent.futures import ThreadPoolExecutor

    a, b = proxies
    prefix = _name("live_cc")
    names = [f"{prefix}_{i}" for i in range(16)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda iv: run((a, b)[iv[0] % 2], "commerce", f"alter vschema create vindex {iv[1]} using xxhash"),
                      enumerate(names)))
    try:
        for p in (a, b):
            until(lambda p=p: {r[1] for r in run(p, None, "show vschema vindexes")} >= set(names), SETTLE_S)
    finally:
        for n in names:
            run(a, None, f"alter vschema drop vindex commerce.{n}")


def test_every_worker_of_a_multi_process_proxy_follows_a_change(proxies, local_cluster, tmp_path) -> None:
    import subprocess
    import sys

    import yaml

    from tests.proxy_process import REPO, free_port

    a, _ = proxies
    config = local_cluster.config
    doc = yaml.safe_load(config.path.read_text())
    doc.pop("local", None)
    for name, ks in config.keyspaces.items():
        doc["keyspaces"][name] = {"vschema": str(ks.vschema_path), "shards": {
            shard: f"mysql://{e.user}:{e.password}@{e.host}:{e.port}/{e.database}" if e.password
            else f"mysql://{e.user}@{e.host}:{e.port}/{e.database}"
            for (k, shard), e in local_cluster.endpoints.items() if k == name}}
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    port = free_port()
    log = (tmp_path / "serve.log").open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "proxy.cli", "serve", "-c", str(cfg), "--port", str(port),
                             "--workers", "2"], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    served = ProxyProcess("127.0.0.1", port, proc, tmp_path / "serve.log")
    try:
        until(lambda: served.log_text().count("proxy listening") == 2 and _answers(served), 30)
        v = _name("live_workers")
        run(a, "commerce", f"alter vschema create vindex {v} using xxhash")
        # Fresh connections land on either worker (SO_REUSEPORT): every one knows the vindex,
        # 20 in a row, once both have it (waited for, not assumed after a 1 s sleep).
        until(lambda: all(any(r[1] == v for r in run(served, None, "show vschema vindexes")) for _ in range(20)),
              SETTLE_S)
        run(a, None, f"alter vschema drop vindex commerce.{v}")
    finally:
        stop_proxy(served)
    assert served.log_text().count("vschema installed") >= 2 * 2  # each worker: at start, and the change


def _answers(p: ProxyProcess) -> bool:
    try:
        run(p, None, "select 1")
    except pymysql.err.MySQLError:
        return False
    return True


def test_vschema_store_setting_names_a_shard_of_the_cluster(local_cluster, tmp_path) -> None:
    import yaml

    from proxy.config import ConfigError, load_config

    base = local_cluster.config
    assert base.vschema_store_location == ("commerce", "-80")  # default: first shard of the first keyspace
    doc = yaml.safe_load(base.path.read_text())
    path = base.path.with_name("cluster-vschema-store.yaml")
    for setting, field in (({"keyspace": "nowhere"}, "vschema_store.keyspace"),
                           ({"keyspace": "lookup", "shard": "-80"}, "vschema_store.shard"),
                           ({"poll_seconds": 0}, "vschema_store.poll_seconds"),
                           ({"table": "x"}, "vschema_store")):
        path.write_text(yaml.safe_dump({**doc, "vschema_store": setting}))
        with pytest.raises(ConfigError, match=field):
            load_config(path)
    path.write_text(yaml.safe_dump({**doc, "vschema_store": {"keyspace": "lookup", "poll_seconds": 0.1}}))
    loaded = load_config(path)
    assert (loaded.vschema_store_location, loaded.vschema_store.poll_seconds) == (("lookup", "0"), 0.1)


def test_vschema_ddl_only_for_the_users_of_vschema_ddl_authorized_users(local_cluster, tmp_path) -> None:
    """Vitess's ``vschema_ddl_authorized_users``: others get Vitess's refusal and nothing changes."""
    users = [{"user": "root", "password": ""}, {"user": "app", "password": "app-pw"}]
    cfg = dsn_cluster_file(local_cluster, tmp_path, users=users, vschema_ddl_authorized_users="root")
    p = start_proxy(cfg, local_cluster.endpoints, tmp_path / "acl.log")
    v = _name("acl_vindex")
    try:
        app = pymysql.connect(host=p.host, port=p.port, user="app", password="app-pw", database="commerce",
                              autocommit=True)
        try:
            for sql in (f"alter vschema create vindex {v} using hash",
                        f"create queue {_name('acl_q')} (body varchar(20))",
                        f"create topic {_name('acl_t')}"):
                with pytest.raises(pymysql.err.OperationalError) as e, app.cursor() as c:
                    c.execute(sql)
                assert e.value.args == (1045, "User 'app' is not authorized to perform vschema operations")
        finally:
            app.close()
        assert v not in {row[1] for row in run(p, "commerce", "show vschema vindexes")}
        run(p, "commerce", f"alter vschema create vindex {v} using hash")  # root is on the list
        assert v in {row[1] for row in run(p, "commerce", "show vschema vindexes")}
    finally:
        try:
            run(p, "commerce", f"alter vschema drop vindex {v}")
        finally:
            stop_proxy(p)

