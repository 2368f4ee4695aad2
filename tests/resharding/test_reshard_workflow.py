"""The Reshard workflow end to end on real local shards, driven by ``shardgate reshard`` against a
``shardgate up`` process, while a writer keeps committing through the proxy."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest
import yaml

from proxy.cluster import LocalCluster, LocalShardSpec, plan_local_shards
from proxy.config import load_config
from proxy.topics.names import place
from tests.conftest import mariadb_template_dir
from tests.proxy_process import REPO
from tests.resharding.split import run_sql
from tests.resharding.workflow_cluster import (
    KEYSPACE,
    ChangeConsumer,
    UpProcess,
    Writer,
    kill_shard,
    reshard,
    serving_shards,
    shard_endpoints,
    status,
    write_cluster_file,
)
from vschema.keyrange import KeyRange
from vschema.vindexes.hash import HashVindex

SEED_ROWS = 3000
ORDERS = [(900_000 + i, i * 7 + 1) for i in range(40)]  # (order_id, customer_id): on every shard


def seed(up: UpProcess, first: int, count: int) -> set[int]:
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            for start in range(first, first + count, 500):
                ids = range(start, min(start + 500, first + count))
                cur.execute(
                    "insert into customer (customer_id, email, tenant_id) values "
                    + ", ".join(f"({i}, 'seed{i}', {i % 7})" for i in ids)
                )
    finally:
        conn.close()
    return set(range(first, first + count))


def wait_for(predicate, timeout: float = 120.0, what: str = "condition") -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def assert_rows_placed(config_path: Path, expected: set[int]) -> None:
    """Every expected customer on exactly the serving shard its hash names, and nothing else."""
    vindex = HashVindex("hash")
    seen: dict[int, str] = {}
    endpoints = shard_endpoints(config_path)
    for shard in serving_shards(config_path):
        rng = KeyRange.parse(shard)
        for (customer_id,) in run_sql(endpoints[shard], "select customer_id from customer"):
            assert customer_id not in seen, f"customer {customer_id} on {seen[customer_id]} and {shard}"
            seen[customer_id] = shard
            ksid = vindex.keyspace_id(customer_id)
            assert ksid is not None and rng.contains(ksid), f"customer {customer_id} on the wrong shard {shard}"
    missing = expected - set(seen)
    assert not missing, f"{len(missing)} committed rows lost, e.g. {sorted(missing)[:5]}"
    extra = set(seen) - expected
    assert not extra, f"rows nobody committed: {sorted(extra)[:5]}"


def assert_no_write_failed(writer: Writer, *, switches_with_several_sources: int = 0) -> None:
    """Writes at the switch wait (held by the proxy) instead of failing; a transaction the switch
    caught is rolled back as retryable (1213) and retried, like a deadlock victim.

    Known exception (serving side, reported): when several shards lose traffic at once (a reverse
    of a split, a merge), a transaction that wrote to one of them and is then held on another keeps
    the first one's table lock, so denying writes there waits for the hold to time out and that
    transaction fails with the hold's error (at most one per such switch)."""
    held_too_long = [e for e in writer.errors if "without the switch completing" in e and ", " in e.split("]")[0]]
    other = [e for e in writer.errors if e not in held_too_long]
    assert not other, other[:5]
    assert len(held_too_long) <= switches_with_several_sources, held_too_long
    assert len(writer.committed) > 100, "the writer hardly wrote"


def run_ok(config_path: Path, workflow: str, *verb: str) -> str:
    done = reshard(config_path, workflow, *verb)
    print(f"$ reshard {workflow} {' '.join(verb)}\n{done.stderr}")  # shown when a test fails
    assert done.returncode == 0, f"reshard {' '.join(verb)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_split_while_writing_then_vdiff_switch_and_complete(up: UpProcess) -> None:
    path = up.config_path
    expected = seed(up, 1, SEED_ROWS)
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            cur.executemany("insert into corder (order_id, customer_id, sku, price) values (%s, %s, 'sku', 1)", ORDERS)
    finally:
        conn.close()
    changes = ChangeConsumer(up)
    changes.start()
    writer = Writer(up, 1_000_000)
    writer.start()
    try:
        run_ok(path, "split", "create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--timeout", "120")
        assert status(path, "split")["state"] == "Running"
        report = run_ok(path, "split", "vdiff")
        assert "result: clean" in report, report
        run_ok(path, "split", "switch-traffic")
        assert serving_shards(path) == ("-40", "40-80", "80-")
        time.sleep(1.0)  # writes after the switch go to the targets
    finally:
        writer.stop()
    assert_no_write_failed(writer)
    # The change stream crossed the switch at the journal: every committed row exactly once, none
    # of the rows the copy and catch-up wrote into the targets.
    wait_for(lambda: writer.committed <= set(changes.seen), 60, "the change stream to see every committed row")
    changes.stop()
    counts = Counter(changes.seen)
    assert not [i for i, n in counts.items() if n > 1], "rows seen twice"
    assert set(counts) == writer.committed
    expected |= writer.committed
    run_ok(path, "split", "complete")
    assert status(path, "split")["state"] == "Completed"
    assert_rows_placed(path, expected)
    # Orders found by their lookup vindex (lookup rows keep naming keyspace ids, which did not change).
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            for order_id, customer_id in ORDERS:
                cur.execute("select customer_id from corder where order_id = %s", (order_id,))
                assert cur.fetchall() == ((customer_id,),)
    finally:
        conn.close()


def test_cancel_before_the_switch_removes_the_targets_and_progress_shows_in_metrics(up: UpProcess) -> None:
    path = up.config_path
    seed(up, 1, 500)
    run_ok(path, "early", "create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--timeout", "120")
    text = run_ok(path, "early", "status")
    assert "state Running" in text and "copy -80/customer:" in text and "stream -80 -> -40: lag" in text, text
    http = up.config.http  # type: ignore[attr-defined]

    def metrics_show_progress() -> bool:
        body = urllib.request.urlopen(f"http://{http.host}:{http.port}/metrics", timeout=5).read().decode()
        return (
            'shardgate_reshard_rows_copied{source="-80",table="customer",workflow="early"}' in body
            and 'shardgate_reshard_lag_seconds{source="-80",workflow="early"}' in body
        )

    wait_for(metrics_show_progress, 30, "reshard metrics")
    switch_first = reshard(path, "early", "complete")
    assert switch_first.returncode == 2 and "complete needs the traffic switched" in switch_first.stderr
    run_ok(path, "early", "cancel")
    assert status(path, "early")["state"] == "Cancelled"
    assert set(shard_endpoints(path)) == {"-80", "80-"}
    assert serving_shards(path) == ("-80", "80-")
    # The name and the shards may be used again.
    run_ok(path, "early", "create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--timeout", "120")
    assert status(path, "early")["state"] == "Running"


def test_bad_requests_are_refused_with_clear_errors(up: UpProcess) -> None:
    path = up.config_path
    gap = reshard(path, "bad", "create", "--source-shards", "-80", "--target-shards", "-40,50-80", "--no-wait")
    assert gap.returncode == 2 and "gap between -40 and 50-80" in gap.stderr, gap.stderr
    wide = reshard(path, "bad", "create", "--source-shards", "-80", "--target-shards", "-40,40-", "--no-wait")
    assert wide.returncode == 2 and "do not cover exactly the key range" in wide.stderr, wide.stderr
    unknown = reshard(path, "bad", "create", "--source-shards", "-40", "--target-shards", "-20,20-40", "--no-wait")
    assert unknown.returncode == 2 and "source shard commerce/-40 does not serve" in unknown.stderr
    both = reshard(path, "bad", "switch-traffic", "--reads-only", "--writes-only")
    assert both.returncode == 2 and "ERROR 1235 (42000)" in both.stderr, both.stderr
    missing = reshard(path, "nope", "status")
    assert missing.returncode == 2 and "workflow nope: not found" in missing.stderr
    unsharded = reshard(path, "bad", "create", "--source-shards", "0", "--target-shards", "-80,80-", "--no-wait",
                        keyspace="lookup")
    assert unsharded.returncode == 2 and "ERROR 1235 (42000)" in unsharded.stderr, unsharded.stderr
    assert "unsharded" in unsharded.stderr


def rows_copied(up: UpProcess) -> int:
    """Straight from the copy state on the store shard (lookup/0): a status command is too slow to
    catch a copy halfway."""
    store = shard_endpoints(up.config_path, "lookup")["0"]
    try:
        rows = run_sql(store, "select coalesce(sum(rows_copied), 0) from _shardgate.reshard_copy_state")
    except pymysql.MySQLError:
        return 0  # not created yet
    return int(rows[0][0])


def wait_caught_up(path: Path, workflow: str, timeout: float = 120.0) -> None:
    def caught_up() -> bool:
        st = status(path, workflow)
        return st["state"] in ("Running", "Switched") and bool(st["lag"]) and all(
            lag["lag_seconds"] <= 1.0 for lag in st["lag"]
        )

    wait_for(caught_up, timeout, f"workflow {workflow} to catch up")


def test_kill_9_during_the_copy_resumes_and_a_killed_target_recovers(up: UpProcess) -> None:
    path = up.config_path
    expected = seed(up, 1, 8000)
    run_ok(path, "split", "create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--no-wait")

    wait_for(lambda: rows_copied(up) > 0, 60, "the copy to start")
    up.kill()
    up.start()
    # The copy state survived the kill: the copy goes on from there, not from the start.
    halfway = rows_copied(up)
    source_rows = len(run_sql(shard_endpoints(path)["-80"], "select customer_id from customer"))
    assert 0 < halfway < source_rows, (halfway, source_rows)
    writer = Writer(up, 2_000_000)
    writer.start()
    try:
        wait_caught_up(path, "split")
        after = status(path, "split")
        # Resumed after the last saved chunk: the -80 half of the rows, each copied once or twice
        # at most for the chunk in flight at the kill.
        assert sum(c["rows_copied"] for c in after["copy_state"] if c["table"] == "customer") < 8000
        kill_shard(path, "-40")
        time.sleep(2.0)  # writes meanwhile: the target misses them until it is back
        wait_caught_up(path, "split")
        report = run_ok(path, "split", "vdiff")
        assert "result: clean" in report, report
    finally:
        writer.stop()
    assert_no_write_failed(writer)
    expected |= writer.committed
    run_ok(path, "split", "switch-traffic")
    run_ok(path, "split", "complete")
    assert_rows_placed(path, expected)


def test_reverse_traffic_switch_again_then_merge_back(up: UpProcess) -> None:
    path = up.config_path
    expected = seed(up, 1, 2000)
    writer = Writer(up, 3_000_000)
    writer.start()
    try:
        run_ok(path, "split", "create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--timeout", "120")
        run_ok(path, "split", "switch-traffic")
        assert serving_shards(path) == ("-40", "40-80", "80-")
        time.sleep(1.0)
        run_ok(path, "split", "reverse-traffic")
        assert serving_shards(path) == ("-80", "80-")
        time.sleep(1.0)  # the sources serve again, the targets follow them
        wait_caught_up(path, "split")
        run_ok(path, "split", "switch-traffic")
        time.sleep(1.0)
        run_ok(path, "split", "complete")
        run_ok(path, "merge", "create", "--source-shards", "-40,40-80", "--target-shards", "-80", "--timeout", "120")
        report = run_ok(path, "merge", "vdiff")
        assert "result: clean" in report, report
        run_ok(path, "merge", "switch-traffic")
        assert serving_shards(path) == ("-80", "80-")
        time.sleep(1.0)
    finally:
        writer.stop()
    assert_no_write_failed(writer, switches_with_several_sources=2)
    expected |= writer.committed
    run_ok(path, "merge", "complete")
    assert_rows_placed(path, expected)


def _on_shard(shard: str, first: int) -> int:
    """The first customer id from ``first`` whose keyspace id falls in ``shard``."""
    vindex, rng = HashVindex("hash"), KeyRange.parse(shard)
    return next(i for i in itertools.count(first) if rng.contains(vindex.keyspace_id(i) or b""))


def _email(up: UpProcess, customer_id: int, *, in_transaction: bool = False) -> list[tuple]:
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            if in_transaction:
                cur.execute("begin")
            cur.execute(f"select email from customer where customer_id = {customer_id}")
            rows = list(cur.fetchall())
            if in_transaction:
                cur.execute("commit")
            return rows
    finally:
        conn.close()


def _rows(up: UpProcess, sql: str) -> list[tuple]:
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def _insert(up: UpProcess, customer_id: int, email: str) -> None:
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"insert into customer (customer_id, email, tenant_id) values ({customer_id}, '{email}', 1)")
    finally:
        conn.close()


def test_reads_switch_first_then_the_writes_and_each_reverses(up: UpProcess) -> None:
    path = up.config_path
    seed(up, 1, 200)
    run_ok(path, "split", "create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--timeout", "120")
    endpoints = shard_endpoints(path)
    # A row written straight on a target only: a read through the proxy that finds it was
    # answered by the target; one that does not, by the source.
    probe = _on_shard("-40", 7_000_000)
    run_sql(endpoints["-40"], f"insert into customer (customer_id, email, tenant_id) values ({probe}, 'target-only', 1)")
    assert _email(up, probe) == []

    out = run_ok(path, "split", "switch-traffic", "--reads-only")
    assert "reads: -40,40-80,80-; writes: -80,80-" in out, out
    wait_for(lambda: _email(up, probe) == [(b"target-only",)], 10, "reads to go to the targets")
    assert serving_shards(path) == ("-80", "80-")
    assert (status(path, "split")["reads"], status(path, "split")["writes"]) == (["-40", "40-80", "80-"], ["-80", "80-"])
    tablets = {r[2]: r[4] for r in _rows(up, "show vitess_tablets") if r[1] == KEYSPACE}
    assert tablets == {"-80": "SERVING", "80-": "SERVING", "-40": "SERVING", "40-80": "SERVING"}, tablets
    assert [r[0] for r in _rows(up, "show vitess_shards") if r[0].startswith(KEYSPACE)] == [
        f"{KEYSPACE}/-80", f"{KEYSPACE}/80-"]  # the shards writes go to
    explained = _rows(up, f"vexplain queries select email from customer where customer_id = {probe}")
    assert [(ks, shard) for _g, ks, shard, _q in explained] == [(KEYSPACE, "-40")], explained
    # Writes still land on the source (the catch-up brings them to the target, reads then see them) ...
    written = _on_shard("-40", probe + 1)
    _insert(up, written, "after-reads")
    assert run_sql(endpoints["-80"], f"select email from customer where customer_id = {written}") == [(b"after-reads",)]
    wait_for(lambda: _email(up, written) == [(b"after-reads",)], 30, "the catch-up to copy the write")
    # ... and a transaction reads where it writes: the source.
    assert _email(up, probe, in_transaction=True) == []
    cancel = reshard(path, "split", "cancel")
    assert cancel.returncode == 2 and "reads were switched: use reverse-traffic first" in cancel.stderr, cancel.stderr

    run_ok(path, "split", "reverse-traffic")  # only the reads were switched: they go back
    wait_for(lambda: _email(up, probe) == [], 10, "reads to go back to the source")
    assert serving_shards(path) == ("-80", "80-")

    run_ok(path, "split", "switch-traffic", "--reads-only")
    wait_for(lambda: _email(up, probe) == [(b"target-only",)], 10, "reads to go to the targets again")
    run_ok(path, "split", "switch-traffic", "--writes-only")
    assert serving_shards(path) == ("-40", "40-80", "80-")
    late = _on_shard("-40", written + 1)
    _insert(up, late, "after-writes")  # on the target; the reverse stream copies it to the source
    assert run_sql(endpoints["-40"], f"select email from customer where customer_id = {late}") == [(b"after-writes",)]
    assert _email(up, probe) == [(b"target-only",)]

    run_ok(path, "split", "reverse-traffic")
    assert serving_shards(path) == ("-80", "80-")
    wait_for(lambda: _email(up, probe) == [], 10, "reads and writes to go back to the source")
    assert _email(up, late) == [(b"after-writes",)]  # the reverse stream brought it back


def _topic_on(shard: str, prefix: str) -> str:
    """A topic name that ``place`` puts on ``shard`` of commerce (-80, 80-)."""
    return next(f"{prefix}{i}" for i in itertools.count()
                if place(KEYSPACE, ["-80", "80-"], True, f"{prefix}{i}") == shard)


def test_shards_holding_topics_are_not_resharded_and_others_are(up: UpProcess) -> None:
    path = up.config_path
    on_source, elsewhere = _topic_on("-80", "events"), _topic_on("80-", "audit")
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"create topic {elsewhere}")
            # A topic on 80- does not stop a split of -80: placement by key range keeps it there.
            run_ok(path, "split", "create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--timeout", "120")
            cur.execute(f"create topic {on_source}")
    finally:
        conn.close()
    # Created on the source since `create`: the switch refuses, nothing changed, writes go on.
    refused = reshard(path, "split", "switch-traffic")
    assert refused.returncode == 2 and "ERROR 1235 (42000)" in refused.stderr, refused.stderr
    assert f"resharding shards of keyspace {KEYSPACE} that hold topics (-80: {on_source})" in refused.stderr
    assert serving_shards(path) == ("-80", "80-")
    assert status(path, "split")["state"] == "Running"
    _insert(up, _on_shard("-40", 8_000_000), "still-writable")
    run_ok(path, "split", "cancel")
    again = reshard(path, "split2", "create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--no-wait")
    assert again.returncode == 2 and f"(-80: {on_source})" in again.stderr, again.stderr


def test_split_of_dsn_shards_into_reshard_targets_hosted_by_serve(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Shards given by dsn (here: local instances the test runs) and the targets named in
    ``reshard_targets``; the workflow runs in ``shardgate serve``."""
    path = write_cluster_file(tmp_path / "local", mariadb_template_dir(request.config, tmp_path))
    config = load_config(path)
    cluster = LocalCluster(config)
    asyncio.run(cluster.start())
    serve: subprocess.Popen[bytes] | None = None
    try:
        spare = plan_local_shards(config)
        base = config.local.base_port  # type: ignore[union-attr]
        targets = {}
        for i, shard in enumerate(("-40", "40-80")):
            spec = LocalShardSpec("commerce", shard, len(spare) + i, base + len(spare) + i,
                                  config.local.data_dir / "targets" / shard.replace("-", "_"),  # type: ignore[union-attr]
                                  100 + len(spare) + i, len(spare) + i + 1)
            asyncio.run(cluster.start_added_shard(spec))
            targets[shard] = spec.endpoint
        dsn = tmp_path / "dsn"
        dsn.mkdir()
        doc = yaml.safe_load(path.read_text())
        doc.pop("local")
        doc.pop("resharding", None)
        for name, ks in doc["keyspaces"].items():
            for key in ("vschema", "schema"):
                ks[key] = str(path.parent / ks[key])
            ks["shards"] = {s: f"mysql://{e.user}@{e.host}:{e.port}/{e.database}"
                            for (k, s), e in cluster.endpoints.items() if k == name and s in config.keyspaces[name].shards}
        doc["keyspaces"]["commerce"]["reshard_targets"] = {
            s: f"mysql://{e.user}@{e.host}:{e.port}/{e.database}" for s, e in targets.items()
        }
        dsn_path = dsn / "cluster.yaml"
        dsn_path.write_text(yaml.safe_dump(doc))
        with (tmp_path / "serve.log").open("ab") as log:
            serve = subprocess.Popen([sys.executable, "-m", "proxy.cli", "serve", "-c", str(dsn_path)],
                                     cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        port = doc["listen"]["port"]
        wait_for(lambda: _listening(port), 60, "shardgate serve")
        conn = pymysql.connect(host="127.0.0.1", port=port, user="root", password="", database="commerce",
                               autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute("insert into customer (customer_id, email) values "
                            + ", ".join(f"({i}, 'dsn{i}')" for i in range(1, 1001)))
        finally:
            conn.close()
        run_ok(dsn_path, "dsn", "create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--timeout", "120")
        assert "result: clean" in run_ok(dsn_path, "dsn", "vdiff")
        run_ok(dsn_path, "dsn", "switch-traffic")
        run_ok(dsn_path, "dsn", "complete")
        assert serving_shards(dsn_path) == ("-40", "40-80", "80-")
        assert_rows_placed(dsn_path, set(range(1, 1001)))
    finally:
        if serve is not None:
            serve.terminate()
            serve.wait(30)
        asyncio.run(cluster.stop())


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


# Keys distinct under utf8mb4_general_ci whose Python order is not the collation's: capitals sort
# before small letters in Python, 'é' after 'z', trailing spaces count in Python and not in the
# collation ('c ' = 'c').
TEXT_KEYS = ["a", "B", "c ", "D", "é", "f", "Zed", "zoo", "ß", "Ob", "oc", "\t"] + [
    f"{'Kk'[i % 2]}ey {i:04d}{' ' * (i % 3)}" for i in range(600)
]


def _vdiff_tables(path: Path, workflow: str, table: str) -> list[dict]:
    done = reshard(path, workflow, "vdiff", "--json")
    assert done.returncode in (0, 1), done.stderr  # 1: differences found
    return [t for t in json.loads(done.stdout)["tables"] if t["table"] == table]


def start_up_with(
    request: pytest.FixtureRequest, tmp_path: Path, schema: str, vindexes: dict, tables: dict, lookup_schema: str = ""
) -> UpProcess:
    """``shardgate up`` on the example cluster with more commerce tables (``schema`` appended to
    the commerce schema file, ``vindexes``/``tables`` to its vschema) and ``lookup_schema``
    appended to the lookup keyspace's."""
    path = write_cluster_file(tmp_path, mariadb_template_dir(request.config, tmp_path))
    files = path.parent
    with (files / "commerce_schema.sql").open("a") as f:
        f.write("\n" + schema + "\n")
    with (files / "lookup_schema.sql").open("a") as f:
        f.write("\n" + lookup_schema + "\n")
    doc = json.loads((files / "commerce_vschema.json").read_text())
    doc["vindexes"].update(vindexes)
    doc["tables"].update(tables)
    (files / "commerce_vschema.json").write_text(json.dumps(doc))
    process = UpProcess(path, tmp_path / "up.log")
    process.start()
    return process


def test_vdiff_of_a_table_keyed_by_case_insensitive_text_is_clean_and_real_differences_still_show(up: UpProcess) -> None:
    path = up.config_path
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            # Added while serving: the workflow places rows by the vschema in force, not the file's.
            cur.execute("create table tag (name varchar(32) not null, note varchar(32), primary key (name)) "
                        "default charset utf8mb4 collate utf8mb4_general_ci")
            cur.execute("alter vschema on commerce.tag add vindex tag_name(name) using unicode_loose_md5")
            cur.executemany("insert into tag (name, note) values (%s, %s)", [(k, f"n{i}") for i, k in enumerate(TEXT_KEYS)])
    finally:
        conn.close()
    # A merge: the two sources' rows are merged by key in the proxy, as the shards order them.
    run_ok(path, "merge", "create", "--source-shards", "-80,80-", "--target-shards", "-", "--timeout", "120")
    [clean] = _vdiff_tables(path, "merge", "tag")
    assert (clean["compared"], clean["missing"], clean["extra"], clean["different"]) == (len(TEXT_KEYS), 0, 0, 0), clean
    # Real differences on the target: a row gone, a key's case changed, a value's case changed.
    target = shard_endpoints(path)["-"]
    run_sql(target, "delete from tag where name = 'D'", "update tag set name = 'ZOO' where name = 'zoo'",
            "update tag set note = upper(note) where name = 'c'")
    [found] = _vdiff_tables(path, "merge", "tag")
    assert (found["missing"], found["extra"], found["different"]) == (1, 0, 2), found
    assert sorted(found["examples"]) == sorted(["missing ('D',)", "different ('zoo',)", "different ('c ',)"])
    run_ok(path, "merge", "cancel")


@pytest.fixture
def up_with_keyless(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UpProcess]:
    """``plate``: no primary key, a unique key of NOT NULL columns; ``ticket``: sharded by a lookup
    vindex; ``loose``: no key at all."""
    process = start_up_with(
        request, tmp_path,
        "CREATE TABLE plate (id BIGINT NOT NULL, code VARCHAR(16) NOT NULL, owner BIGINT, UNIQUE KEY plate_id (id));\n"
        "CREATE TABLE ticket (id BIGINT NOT NULL, note VARCHAR(16), PRIMARY KEY (id));\n"
        "CREATE TABLE loose (a BIGINT, b BIGINT, UNIQUE KEY loose_a (a));\n"
        "CREATE TABLE typed (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, d DECIMAL(12,3), f FLOAT, g DOUBLE, dt DATE,"
        " tm TIME(3), ts TIMESTAMP(6) NULL, y YEAR, b BIT(5), e ENUM('x','y z'), st SET('a','b','c'), j JSON,"
        " bl BLOB, tx VARCHAR(64) CHARSET utf8mb4, bn BINARY(4), lt VARCHAR(16) CHARSET latin1);",
        {"ticket_lkp": {"type": "lookup_unique", "params": {"table": "lookup.ticket_idx", "from": "id", "to": "keyspace_id"}}},
        {"plate": {"column_vindexes": [{"column": "id", "name": "hash"}]},
         "ticket": {"column_vindexes": [{"column": "id", "name": "ticket_lkp"}]},
         "loose": {"column_vindexes": [{"column": "a", "name": "hash"}]},
         "typed": {"column_vindexes": [{"column": "id", "name": "hash"}]}},
        "CREATE TABLE ticket_idx (id BIGINT NOT NULL, keyspace_id VARBINARY(10), PRIMARY KEY (id));",
    )
    try:
        yield process
    finally:
        process.stop()


def _proxy_sql(up: UpProcess, *statements: str) -> None:
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()


def test_tables_without_a_primary_key_copy_by_a_not_null_unique_key_and_others_are_refused_by_name(
    up_with_keyless: UpProcess,
) -> None:
    up = up_with_keyless
    path = up.config_path
    create = ("create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--timeout", "120")
    # No key that identifies a row: refused (1235), the table and the reason named, nothing created.
    loose = reshard(path, "keys", *create)
    assert loose.returncode == 2 and "ERROR 1235 (42000)" in loose.stderr, loose.stderr
    assert "commerce.loose" in loose.stderr and "no primary key" in loose.stderr and "loose_a" in loose.stderr
    assert set(shard_endpoints(path)) == {"-80", "80-"}
    _proxy_sql(up, "drop table loose")
    # A lookup primary vindex: refused the same way.
    ticket = reshard(path, "keys", *create)
    assert ticket.returncode == 2 and "ERROR 1235 (42000)" in ticket.stderr, ticket.stderr
    assert "commerce.ticket" in ticket.stderr and "lookup primary vindex ticket_lkp" in ticket.stderr
    _proxy_sql(up, "drop table ticket")
    # A unique key of NOT NULL columns stands in for the primary key: copied, followed, switched.
    _proxy_sql(up, "insert into plate (id, code, owner) values "
               + ", ".join(f"({i}, 'p{i}', {i % 5})" for i in range(1, 401)))
    # Every kind of value the copy writes back from the source's text as it came (vdiff compares them).
    _proxy_sql(up, "insert into typed values "
               + ", ".join(f"({i}, -123456789.125, 1.5e-7, -1e300, '2024-02-29', '-838:59:58.5', '2038-01-19 03:14:07.999999',"
                           f" 2155, b'10101', 'y z', 'a,c', '{{\"k\": \"v\\\\\"q\", \"n\": [1, 2.5, null]}}',"
                           f" x'00ff27005c0a', 'it''s \\\\ 😀\\n\\ttab', x'00ff0001', 'café')" for i in range(1, 41))
               + ", " + ", ".join(f"({i}, null, null, null, null, null, null, null, null, null, null, null, null, null, null,"
                                  " null)" for i in range(41, 81))
               + ", (18446744073709551615, 0, 0, 0, '1000-01-01', '00:00:00', null, 1901, b'0', 'x', '', '[]', '', '', x'00000000', '')")
    run_ok(path, "keys", *create)
    _proxy_sql(up, "update plate set code = concat(code, '-x') where id <= 50",
               "delete from plate where id between 100 and 119",
               "insert into plate (id, code, owner) values " + ", ".join(f"({i}, 'n{i}', 1)" for i in range(401, 421)))
    wait_caught_up(path, "keys")
    assert "result: clean" in run_ok(path, "keys", "vdiff")
    run_ok(path, "keys", "switch-traffic")
    expected = {i: f"p{i}-x" if i <= 50 else f"p{i}" for i in range(1, 401) if not 100 <= i <= 119}
    expected |= {i: f"n{i}" for i in range(401, 421)}
    endpoints = shard_endpoints(path)
    vindex = HashVindex("hash")
    found: dict[int, str] = {}
    for shard in ("-40", "40-80"):
        for i, code in run_sql(endpoints[shard], "select id, code from plate"):
            assert KeyRange.parse(shard).contains(vindex.keyspace_id(i) or b""), f"plate {i} on {shard}"
            assert i not in found
            found[i] = code.decode() if isinstance(code, bytes) else code
    on_80 = {i: c for i, c in expected.items() if not KeyRange.parse("-80").contains(vindex.keyspace_id(i) or b"")}
    assert found == {i: c for i, c in expected.items() if i not in on_80}
