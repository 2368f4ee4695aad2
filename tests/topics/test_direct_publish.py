"""Direct publishes (proxy/topics/direct.py): a publish whose transaction the proxy owns (an
autocommit ``INSERT INTO topic ... VALUES``, on the fast path or the normal path, and REST's
publish without a pointer) of at least ``topics.direct_min_rows`` messages (2 in these tests'
proxies, 1 in ``quiet_proxy``) takes its ids in the write, under the topic's mark lock; the
deferred path (a client's transaction, a REST commit marker, anything not rewritten) keeps
NULL ids and a sequencer pass. Both interleave into one order, seen alike by every reader."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator

import mysql.connector
import pymysql
import pytest
import pytest_asyncio

from proxy.topics import direct, ids
from proxy.topics.schema import UNSEQUENCED_MS, UNSEQUENCED_SEQ
from tests.proxy_process import free_port, start_proxy, stop_proxy
from tests.topics.conftest import (
    EARLIER_LOG_DDL,
    TopicProxy,
    blocking_connect,
    connect,
    eventually,
    read_all,
    run,
    shard_conn,
    shard_rows,
    topic_events,
)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def quiet_proxy(local_cluster, tmp_path_factory) -> AsyncIterator[TopicProxy]:
    """A proxy whose sequencers probe only every 30 s: whatever becomes visible through it sooner
    was made visible by its publish, and its pass counter moves only when a publish asks a pass."""
    base = local_cluster.config.path
    cfg = base.parent / "topics-direct-quiet.yaml"
    http_port = free_port()
    cfg.write_text(
        base.read_text() + f"\nhttp: {{host: 127.0.0.1, port: {http_port}}}\n"
        "topics: {poll_seconds: 30, follow_poll_seconds: 30, refresh_seconds: 30, direct_min_rows: 1}\n"
    )
    log = tmp_path_factory.mktemp("topics-direct-quiet") / "proxy.log"
    p = TopicProxy(start_proxy(cfg, local_cluster.endpoints, log), http_port)
    try:
        yield p
    finally:
        stop_proxy(p.process)



async def _visible(p: TopicProxy, topic: str, count: int) -> bool:
    return len(await read_all(p, "commerce", topic)) >= count


def _show(p: TopicProxy, topic: str) -> dict[str, object]:
    conn = blocking_connect(p, "commerce")
    try:
        with conn.cursor() as cur:
            cur.execute(f"SHOW TOPICS FROM commerce LIKE '{topic}'")
            names = [d[0] for d in cur.description]
            return dict(zip(names, cur.fetchone(), strict=True))
    finally:
        conn.close()


async def test_direct_publishes_are_readable_at_their_ok_without_a_sequencer_pass(quiet_proxy):
    p, name = quiet_proxy, "direct_at_once"
    await run(p, "commerce", f"DROP TOPIC IF EXISTS {name}")
    await run(p, "commerce", f"CREATE TOPIC {name}")
    try:
        # The pass a newly served topic gets (rows may wait from a dead proxy) has run.
        await eventually(
            lambda: asyncio.sleep(0, topic_events(p, name).get("passes", 0) >= 1),
            what="first pass",
        )
        passes = topic_events(p, name).get("passes", 0)
        publisher, reader = await connect(p, "commerce"), await connect(p, "commerce")
        olap = await connect(p, "commerce")  # OLAP sessions take the normal path: direct there too
        try:
            async with olap.cursor() as cur:
                await cur.execute("SET WORKLOAD = OLAP")
            sent: list[bytes] = []
            total_bytes = 0
            for i in range(12):
                rows = [f"m{i}-{k}-" + "x" * i for k in range(1 + i % 3)]
                conn = olap if i % 4 == 3 else publisher
                async with conn.cursor() as cur:
                    await cur.execute(
                        f"INSERT INTO {name} (payload) VALUES " + ", ".join(["(%s)"] * len(rows)),
                        rows,
                    )
                    assert cur.rowcount == len(rows)
                sent += [r.encode() for r in rows]
                total_bytes += sum(len(r) for r in rows)
                # Readable as soon as the OK is in: no pass ran for them (the counter below).
                async with reader.cursor() as cur:
                    await cur.execute(
                        f"SELECT message_id, payload FROM {name} WHERE message_id > '' ORDER BY message_id"
                    )
                    got = await cur.fetchall()
                assert [bytes(r[1]) for r in got] == sent
            message_ids = [r[0] for r in got]
            assert message_ids == sorted(message_ids) and len(set(message_ids)) == len(sent)
            events = topic_events(p, name)
            assert events.get("passes", 0) == passes, events
            assert events.get("direct") == 12, events
            show = _show(p, name)
            assert (show["Messages"], show["Bytes"], show["Last_id"]) == (
                len(sent),
                total_bytes,
                message_ids[-1],
            )
        finally:
            for c in (publisher, reader, olap):
                c.close()
    finally:
        await run(p, "commerce", f"DROP TOPIC IF EXISTS {name}")


async def test_a_direct_publish_that_does_not_fit_the_rest_of_the_millisecond_starts_the_next(
    topic_proxy, topics, local_cluster, http
):
    """The ids rule of ids.assign, in the write's SQL, with a script's rows in one millisecond
    (direct.MAX_ROWS): a mark at sequence 0xFFFD (and in the future: the id's time never runs
    behind the last id) takes a 2-row publish to 0xFFFF; the next one, 3 rows, starts the next
    ms from 0."""
    name = await topics.create("commerce")
    shard = await shard_conn(local_cluster, topic_proxy, name)
    try:
        future_ms = int(time.time() * 1000) + 3_600_000
        await shard_rows(
            shard,
            f"UPDATE _tms_topics SET last_ms = {future_ms}, last_seq = 65533 WHERE name = '{name}'",
        )
        for values in ("('x'), ('y')", "('a'), ('b'), ('c')"):
            await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES {values}")
        expected = [
            ids.make_id(future_ms, 0xFFFE),
            ids.make_id(future_ms, 0xFFFF),
            ids.make_id(future_ms + 1, 0),
            ids.make_id(future_ms + 1, 1),
            ids.make_id(future_ms + 1, 2),
        ]
        rows = await shard_rows(
            shard, f"SELECT message_id, publish_time, seq, payload FROM `_tms_{name}` ORDER BY _pk"
        )
        assert [(r[0], r[1], r[2], bytes(r[3])) for r in rows] == [
            (expected[0], future_ms, 0xFFFE, b"x"),
            (expected[1], future_ms, 0xFFFF, b"y"),
            (expected[2], future_ms + 1, 0, b"a"),
            (expected[3], future_ms + 1, 1, b"b"),
            (expected[4], future_ms + 1, 2, b"c"),
        ]
        assert await shard_rows(
            shard, f"SELECT last_ms, last_seq, messages, bytes FROM _tms_topics WHERE name = '{name}'"
        ) == [(future_ms + 1, 2, 5, 5)]
        # REST's publish without a pointer is direct too: it continues after the mark.
        url = f"{topic_proxy.rest}/commerce/topics/{name}/publish"
        async with http.post(
            url, json={"messages": [base64.b64encode(m).decode() for m in (b"d", b"e")]}
        ) as r:
            assert r.status == 200
        rows = await shard_rows(
            shard, f"SELECT message_id FROM `_tms_{name}` WHERE payload IN ('d', 'e') ORDER BY _pk"
        )
        assert rows == [(ids.make_id(future_ms + 1, 3),), (ids.make_id(future_ms + 1, 4),)]
    finally:
        shard.close()


async def test_a_failing_direct_publish_answers_its_error_and_writes_nothing(
    topic_proxy, topics, local_cluster
):
    name = await topics.create("commerce", spec="(n INT NOT NULL)")
    shard = await shard_conn(local_cluster, topic_proxy, name)
    conn, olap = await connect(topic_proxy, "commerce"), await connect(topic_proxy, "commerce")
    try:
        async with olap.cursor() as cur:
            await cur.execute("SET WORKLOAD = OLAP")  # the normal path
        async with conn.cursor() as cur:
            await cur.execute(f"INSERT INTO `{name}` (payload, n) VALUES ('ok', 1), ('ok', 2)")
        mark = await shard_rows(
            shard,
            f"SELECT last_ms, last_seq, messages, bytes FROM _tms_topics WHERE name = '{name}'",
        )
        for c in (conn, olap):
            for bad, code in (
                (f"INSERT INTO `{name}` (payload, n) VALUES ('x', 2), ('y', NULL)", 1048),
                (f"INSERT INTO `{name}` (payload, n) VALUES ('x', 2), ('z', 'not a number')", 1366),
                (f"INSERT INTO `{name}` (payload, nosuch) VALUES ('x', 1)", 1054),
            ):
                async with c.cursor() as cur:
                    try:
                        await cur.execute(bad)
                        raise AssertionError(f"no error for {bad}")
                    except pymysql.err.MySQLError as e:
                        assert e.args[0] == code, (bad, e.args)
                # Nothing written, the mark where it was (the script's transaction rolled back).
                assert await shard_rows(shard, f"SELECT payload FROM `_tms_{name}`") == [
                    (b"ok",),
                    (b"ok",),
                ]
                assert (
                    await shard_rows(
                        shard,
                        f"SELECT last_ms, last_seq, messages, bytes FROM _tms_topics WHERE name = '{name}'",
                    )
                    == mark
                )
            # The session goes on publishing.
            async with c.cursor() as cur:
                await cur.execute(
                    f"INSERT INTO `{name}` (payload, n) VALUES ('after', 3), ('after', 4)"
                )
                assert cur.rowcount == 2
            await shard_rows(shard, f"DELETE FROM `_tms_{name}` WHERE payload = 'after'")
            mark = await shard_rows(
                shard,
                f"SELECT last_ms, last_seq, messages, bytes FROM _tms_topics WHERE name = '{name}'",
            )
    finally:
        conn.close()
        olap.close()
        shard.close()


async def _autocommit_publisher(p: TopicProxy, topic: str, tag: str, count: int) -> list[bytes]:
    conn = await connect(p, "commerce")
    sent: list[bytes] = []
    try:
        async with conn.cursor() as cur:
            for k in range(count):
                batch = [f"{tag}-{k}-{j}" for j in range(1 + k % 3)]
                await cur.execute(
                    f"INSERT INTO `{topic}` (payload) VALUES " + ", ".join(["(%s)"] * len(batch)),
                    batch,
                )
                sent += [m.encode() for m in batch]
    finally:
        conn.close()
    return sent


async def _transaction_publisher(p: TopicProxy, topic: str, tag: str, count: int) -> list[bytes]:
    conn = await connect(p, "commerce")
    sent: list[bytes] = []
    try:
        async with conn.cursor() as cur:
            for k in range(count):
                await cur.execute("BEGIN")
                batch = [f"{tag}-{k}-{j}" for j in range(2)]
                for m in batch:
                    await cur.execute(f"INSERT INTO `{topic}` (payload) VALUES (%s)", (m,))
                if k % 5 == 4:
                    await cur.execute("ROLLBACK")
                    continue
                await cur.execute("COMMIT")
                sent += [m.encode() for m in batch]
    finally:
        conn.close()
    return sent


async def _rest_pointer_publisher(
    http, p: TopicProxy, topic: str, tag: str, count: int
) -> list[bytes]:
    url = f"{p.rest}/commerce/topics/{topic}"
    sent: list[bytes] = []
    for k in range(count):
        pointer = 700_000 + k
        stored = [f"{tag}-{k}-s".encode()]
        marker = [f"{tag}-{k}-m".encode()]
        for action, messages in (("/store", stored), ("/publish", marker)):
            body = {"transactionWritePointer": pointer, "messages": [base64.b64encode(m).decode() for m in messages]}
            async with http.post(url + action, json=body) as r:
                assert r.status == 200
        sent += stored + marker
    return sent


async def test_direct_and_deferred_publishes_through_two_proxies_give_every_reader_one_order(
    topic_proxy, other_proxy, topics, follow, http
):
    """8 publishers over two proxies: autocommit (direct), BEGIN..COMMIT (deferred, some rolled
    back) and REST store/publish with a pointer (deferred). Followers on both proxies receive the
    one sequence the topic ends with, strictly increasing, nothing lost or twice, none late
    (a follower reads only ids after the last it has: a late arrival would be missing)."""
    topic = await topics.create("commerce")
    assert (
        await read_all(other_proxy, "commerce", topic) == []
    )  # the other proxy learns of it (a miss)
    followers = [
        await follow("commerce", f"STREAM * FROM `{topic}`", p) for p in (topic_proxy, other_proxy)
    ]
    results = await asyncio.gather(
        _autocommit_publisher(topic_proxy, topic, "da", 30),
        _autocommit_publisher(other_proxy, topic, "db", 30),
        _autocommit_publisher(topic_proxy, topic, "dc", 30),
        _transaction_publisher(topic_proxy, topic, "ta", 20),
        _transaction_publisher(other_proxy, topic, "tb", 20),
        _transaction_publisher(other_proxy, topic, "tc", 20),
        _autocommit_publisher(other_proxy, topic, "dd", 30),
        _rest_pointer_publisher(http, other_proxy, topic, "r", 15),
    )
    sent = [m for r in results for m in r]
    for f in followers:
        await f.wait_for(len(sent), within=20)
    final = await read_all(topic_proxy, "commerce", topic)
    assert final == await read_all(other_proxy, "commerce", topic)
    message_ids = [r[0] for r in final]
    assert message_ids == sorted(message_ids) and len(set(message_ids)) == len(message_ids) == len(
        sent
    )
    assert sorted(bytes(r[2]) for r in final) == sorted(sent)
    for f in followers:
        assert [(r[0], bytes(r[2])) for r in f.rows] == [(r[0], bytes(r[2])) for r in final]
    # Each publisher's messages in its own commit order.
    for r in results:
        mine = set(r)
        assert [bytes(row[2]) for row in final if bytes(row[2]) in mine] == r
    show = _show(topic_proxy, topic)
    assert (show["Messages"], show["Bytes"]) == (len(sent), sum(len(m) for m in sent))


def _ok_of(conn: pymysql.Connection, sql: str) -> tuple[int, int, int, int, bytes]:
    """What the client read from an INSERT's OK packet: affected rows, last insert id, status flags,
    warnings, info."""
    with conn.cursor() as cur:
        cur.execute(sql)
        r = conn._result
        assert r is not None
        return cur.rowcount, cur.lastrowid, conn.server_status, r.warning_count, r.message


async def test_a_direct_publish_answers_one_ok_packet_as_a_plain_insert_does(
    topic_proxy, topics, local_cluster
):
    """The script's seven answers come to the client as the INSERT's OK alone: its affected rows,
    last insert id (the first row's key), warnings and info text, the status flags of an
    autocommit statement (no MORE_RESULTS), and the sequence id a single OK has (the next
    statement reads fine) — on the fast path, the normal path, and mysql-connector's prepared
    statements (binary protocol), as for the same INSERT on the deferred path (IGNORE)."""
    name = await topics.create("commerce")
    shard = await shard_conn(local_cluster, topic_proxy, name)
    values = ", ".join(f"('m{i}')" for i in range(8))
    conn = blocking_connect(topic_proxy, "commerce")
    try:
        answers = []
        for workload in ("OLTP", "OLAP"):  # the fast path, then the normal path
            with conn.cursor() as cur:
                cur.execute(f"SET WORKLOAD = {workload}")
            direct = _ok_of(conn, f"INSERT INTO `{name}` (payload) VALUES {values}")
            deferred = _ok_of(conn, f"INSERT IGNORE INTO `{name}` (payload) VALUES {values}")
            answers.append((direct, deferred))
            with conn.cursor() as cur:  # the connection is in step
                cur.execute("SELECT 1")
                assert cur.fetchall() == ((1,),)
        keys = await shard_rows(
            shard, f"SELECT _pk, message_id IS NOT NULL FROM `_tms_{name}` ORDER BY _pk"
        )
        firsts = [keys[k][0] for k in (0, 8, 16, 24)]
        for (direct, deferred), (first_direct, first_deferred) in zip(
            answers, [firsts[:2], firsts[2:]], strict=True
        ):
            # (PyMySQL's info keeps the text's length byte: "&" is 38.)
            assert direct == (8, first_direct, 2, 0, b"&Records: 8  Duplicates: 0  Warnings: 0")
            assert deferred == (8, first_deferred, 2, 0, b"&Records: 8  Duplicates: 0  Warnings: 0")
        assert [bool(k[1]) for k in keys[:8]] == [
            True
        ] * 8  # the direct ones had their ids in the write
    finally:
        conn.close()
    connector = mysql.connector.connect(
        host="127.0.0.1",
        port=topic_proxy.port,
        user="root",
        password="",
        database="commerce",
        autocommit=True,
        use_pure=True,
    )
    try:
        # The deferred (IGNORE) rows' pass first: a direct publish behind rows still waiting for
        # theirs goes without ids (and is readable only at the next pass), which the read below
        # would not show at once (seen with passes held 150 ms).
        await eventually(lambda: _visible(topic_proxy, name, 32), what="the deferred rows' pass")
        cur = connector.cursor(prepared=True)
        cur.execute(f"INSERT INTO `{name}` (payload) VALUES (%s), (%s), (%s)", ("p1", "p2", "p3"))
        assert cur.rowcount == 3
        first = cur.lastrowid
        cur.close()
        cur = connector.cursor()
        cur.execute(f"SELECT payload FROM `{name}` WHERE payload LIKE 'p%' ORDER BY message_id")
        assert cur.fetchall() == [
            (b"p1",),
            (b"p2",),
            (b"p3",),
        ]  # readable at once: ids from the write
        cur.close()
        assert (
            await shard_rows(shard, f"SELECT MIN(_pk) FROM `_tms_{name}` WHERE payload LIKE 'p%'")
        ) == [(first,)]
    finally:
        connector.close()
        shard.close()


@pytest.mark.parametrize("layout", ["current", "earlier"])
async def test_a_direct_publish_behind_waiting_rows_writes_the_logs_defaults_and_the_pass_orders_it_after_them(
    quiet_proxy, local_cluster, layout
):
    """A committed row waits for its pass when a direct publish comes: the publish's rows go
    without ids, with the log's defaults (0 / -1 on the current layout, which the pass then
    updates in place; NULL on a log of the earlier layout), and the pass gives them ids after
    the waiting row, all after what was visible before (no late arrival)."""
    p, name = quiet_proxy, f"direct_behind_{layout}"
    await run(p, "commerce", f"DROP TOPIC IF EXISTS {name}")
    await run(p, "commerce", f"CREATE TOPIC {name}")
    shard, locker = await shard_conn(local_cluster, p, name), await shard_conn(local_cluster, p, name)
    try:
        await eventually(lambda: asyncio.sleep(0, topic_events(p, name).get("passes", 0) >= 1), what="first pass")
        if layout == "earlier":
            await shard_rows(shard, f"DROP TABLE `_tms_{name}`")
            await shard_rows(shard, EARLIER_LOG_DDL.format(name=name))
        await run(p, "commerce", f"INSERT INTO {name} (payload) VALUES ('m0')")  # direct: its id at once
        (before,) = await read_all(p, "commerce", name)
        # A committed row waiting for its pass (written behind the proxy's back, so no pass is
        # woken), kept from its pass by a row lock until the direct publish's rows are read. Another
        # proxy of this module (other_proxy, fast probes) may sequence it before the lock is taken:
        # then that row is just one more visible message, and a new one is written.
        waiting_seq = UNSEQUENCED_SEQ if layout == "current" else None
        for attempt in range(1, 6):
            waiting = f"w{attempt}".encode()
            await shard_rows(shard, f"INSERT INTO `_tms_{name}` (payload) VALUES ('{waiting.decode()}')")
            (waiting_pk,) = (await shard_rows(shard, "SELECT LAST_INSERT_ID()"))[0]
            await shard_rows(locker, "BEGIN")
            locked = await shard_rows(locker, f"SELECT seq FROM `_tms_{name}` WHERE _pk = {waiting_pk} FOR UPDATE")
            if locked == [(waiting_seq,)]:
                break
            await shard_rows(locker, "COMMIT")
        else:
            pytest.fail("every waiting row was sequenced before it could be locked")
        visible = await read_all(p, "commerce", name)
        assert visible[0] == before
        try:
            await run(p, "commerce", f"INSERT INTO {name} (payload) VALUES ('d1'), ('d2')")
            written = await shard_rows(
                shard, f"SELECT publish_time, seq, message_id FROM `_tms_{name}` WHERE payload IN ('d1', 'd2')")
            expected = (UNSEQUENCED_MS, UNSEQUENCED_SEQ, None) if layout == "current" else (None, None, None)
            assert written == [expected, expected]
            assert await read_all(p, "commerce", name) == visible  # nothing more visible before the pass
        finally:
            await shard_rows(locker, "COMMIT")

        async def sequenced() -> bool:
            return len(await read_all(p, "commerce", name)) == len(visible) + 3

        await eventually(sequenced, what="the waiting row and the direct publish's rows sequenced")
        rows = await read_all(p, "commerce", name)
        assert [bytes(r[2]) for r in rows] == [*(bytes(r[2]) for r in visible), waiting, b"d1", b"d2"]
        message_ids = [r[0] for r in rows]
        assert message_ids == sorted(message_ids) and len(set(message_ids)) == len(rows)
        assert message_ids[0] == before[0]
        assert await shard_rows(shard, f"SELECT COUNT(*) FROM `_tms_{name}` WHERE message_id IS NULL") == [(0,)]
    finally:
        shard.close()
        locker.close()
        await run(p, "commerce", f"DROP TOPIC IF EXISTS {name}")


async def test_waiting_rows_take_their_defaults_without_waiting_for_a_transaction_publishing_behind_them(
    quiet_proxy, local_cluster
):
    """The UPDATE that gives a direct publish's waiting rows the log's defaults names their keys:
    a transaction that inserted the next row and is still open does not hold it (nor the
    publish's answer) up, as a key range's lock of the key after it did."""
    p, name = quiet_proxy, "direct_defaults_open_tx"
    await run(p, "commerce", f"DROP TOPIC IF EXISTS {name}")
    await run(p, "commerce", f"CREATE TOPIC {name}")
    shard, other = await shard_conn(local_cluster, p, name), await shard_conn(local_cluster, p, name)
    log = f"`_tms_{name}`"
    try:
        for _attempt in range(5):
            # Two committed rows as a direct publish behind waiting rows leaves them (NULL ids).
            await shard_rows(shard, f"INSERT INTO {log} (payload, publish_time, seq) VALUES ('d1', NULL, NULL), ('d2', NULL, NULL)")
            (first,) = (await shard_rows(shard, "SELECT LAST_INSERT_ID()"))[0]
            await shard_rows(other, "BEGIN")
            await shard_rows(other, f"INSERT INTO {log} (payload) VALUES ('open')")  # the next key, not committed
            try:
                started = time.monotonic()
                for statement in direct.defaults_statements(log, [(first, first + 1)]):
                    await shard_rows(shard, statement)
                elapsed = time.monotonic() - started
                written = await shard_rows(shard, f"SELECT publish_time, seq FROM {log} WHERE _pk IN ({first}, {first + 1})")
            finally:
                await shard_rows(other, "ROLLBACK")
            # A pass of a proxy on these shards may sequence the two committed rows before the
            # UPDATE (seen once in a full run): they then have ids, not NULL; try new rows.
            if all(seq is not None and seq >= 0 for _, seq in written):
                continue
            # Held by the open transaction's lock, the UPDATE would wait for innodb_lock_wait_timeout
            # (50 s): 5 s shows it was not, on a busy machine too (0.5 s was the bound).
            assert elapsed < 5
            assert written == [(UNSEQUENCED_MS, UNSEQUENCED_SEQ), (UNSEQUENCED_MS, UNSEQUENCED_SEQ)]
            break
        else:
            pytest.fail("a pass sequenced the test's rows before the UPDATE in every attempt")
    finally:
        shard.close()
        other.close()
        await run(p, "commerce", f"DROP TOPIC IF EXISTS {name}")


async def test_a_direct_publish_counts_only_its_own_rows_bytes_with_deferred_rows_inserted_meanwhile(
    topic_proxy, topics, local_cluster
):
    """The ``bytes`` counter adds the rows from the script's first key that have an id
    (direct.py): a deferred row committed by another session after the script's INSERT has a
    later key but no id, and is not counted (under READ COMMITTED, where the script's later read
    sees it), nor is an uncommitted one waited for. The script runs statement by statement on the
    topic's shard, the other session's INSERTs between."""
    name = await topics.create("commerce")
    log = f"`_tms_{name}`"
    script = await shard_conn(local_cluster, topic_proxy, name)
    other = await shard_conn(local_cluster, topic_proxy, name)
    try:
        await shard_rows(script, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        ins = direct.read_direct(
            f"INSERT INTO {log} (payload) VALUES ('abc'), ('de')", len("INSERT INTO "), len("INSERT INTO ") + len(log), name
        )
        assert ins is not None
        statements = direct.publish_script((ins,)).split(";")
        for statement in statements[: direct.ANSWER + 2]:  # to the INSERT and its first key
            await shard_rows(script, statement)
        await shard_rows(other, f"INSERT INTO {log} (payload) VALUES ('later, deferred')")  # committed
        await shard_rows(other, "BEGIN")
        await shard_rows(other, f"INSERT INTO {log} (payload) VALUES ('open, deferred')")  # uncommitted
        for statement in statements[direct.ANSWER + 2 :]:
            await asyncio.wait_for(shard_rows(script, statement), 5)
        assert await shard_rows(
            script, f"SELECT messages, bytes FROM _tms_topics WHERE name = '{name}'"
        ) == [(2, 5)]
        await shard_rows(other, "COMMIT")
        # The pass counts the deferred rows once they are in order after the direct ones.
        async def counted() -> bool:
            got = await shard_rows(script, f"SELECT messages, bytes FROM _tms_topics WHERE name = '{name}'")
            return got == [(4, 5 + len("later, deferred") + len("open, deferred"))]

        await eventually(counted, what="the pass's counters")
        rows = await read_all(topic_proxy, "commerce", name)
        assert [bytes(r[2]) for r in rows] == [b"abc", b"de", b"later, deferred", b"open, deferred"]
        assert await shard_rows(script, f"SELECT SUM(payload_bytes) FROM {log}") == [(5 + 15 + 14,)]
    finally:
        script.close()
        other.close()
