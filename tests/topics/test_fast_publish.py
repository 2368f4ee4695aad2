"""Publishing on the fast path: an autocommit ``INSERT INTO topic ... VALUES`` goes from the
client's packet to the topic's shard without a parse or a plan, and wakes the topic's
sequencer once it succeeded, as the commit hook does on the normal path."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest_asyncio

from proxy.cluster_state import ClusterState
from proxy.fast_path.routing import fast_route
from proxy.session import ProxySession
from proxy.topics import direct
from tests.proxy.sessions_support import fast_path_statements
from tests.proxy_process import free_port, start_proxy, stop_proxy
from tests.topics.conftest import TopicProxy, connect, read_all, run


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def slow_probe_proxy(local_cluster, tmp_path_factory) -> AsyncIterator[TopicProxy]:
    """A proxy whose sequencers probe only every 30 s: a message visible sooner was sequenced
    because its publish woke the sequencer."""
    base = local_cluster.config.path
    cfg = base.parent / "topics-slow-probe.yaml"
    http_port = free_port()
    cfg.write_text(base.read_text() + f"\nhttp: {{host: 127.0.0.1, port: {http_port}}}\n"
                   "topics: {poll_seconds: 30, follow_poll_seconds: 30, refresh_seconds: 30}\n")
    log = tmp_path_factory.mktemp("topics-slow-probe") / "proxy.log"
    p = TopicProxy(start_proxy(cfg, local_cluster.endpoints, log), http_port)
    try:
        yield p
    finally:
        stop_proxy(p.process)


async def _visible_within(p: TopicProxy, topic: str, count: int, seconds: float) -> list[bytes]:
    deadline = time.monotonic() + seconds
    while True:
        rows = await read_all(p, "commerce", topic)
        if len(rows) >= count or time.monotonic() > deadline:
            return [bytes(r[2]) for r in rows]


async def test_each_autocommit_publish_is_sequenced_at_once_not_at_the_next_probe(slow_probe_proxy):
    p, name = slow_probe_proxy, "fast_publish_wake"
    await run(p, "commerce", f"DROP TOPIC IF EXISTS {name}")
    await run(p, "commerce", f"CREATE TOPIC {name}")
    try:
        expected: list[bytes] = []
        for i in range(5):
            await run(p, "commerce", f"INSERT INTO {name} (payload) VALUES ('m{i}')")  # the fast path
            expected.append(f"m{i}".encode())
            assert await _visible_within(p, name, len(expected), 3.0) == expected
        # The normal path's publishes (qualified from another keyspace, in a transaction) still wake it.
        await run(p, "lookup", f"INSERT INTO commerce.{name} (payload) VALUES ('qualified')")
        expected.append(b"qualified")
        assert await _visible_within(p, name, len(expected), 3.0) == expected
        await run(p, "commerce", f"BEGIN; INSERT INTO {name} (payload) VALUES ('in tx'); COMMIT")
        expected.append(b"in tx")
        assert await _visible_within(p, name, len(expected), 3.0) == expected
    finally:
        await run(p, "commerce", f"DROP TOPIC IF EXISTS {name}")


async def test_a_publish_in_a_transaction_is_sequenced_at_its_commit_and_never_if_rolled_back(slow_probe_proxy):
    p, name = slow_probe_proxy, "fast_publish_tx"
    await run(p, "commerce", f"DROP TOPIC IF EXISTS {name}")
    # A user column: the transaction's INSERTs go to the shard as written (without one they
    # are kept to the COMMIT, proxy.topics.kept: tests/topics/test_kept_rows.py).
    await run(p, "commerce", f"CREATE TOPIC {name} (note VARCHAR(10))")
    conn = await connect(p, "commerce")
    try:
        async with conn.cursor() as cur:
            before = fast_path_statements(f"http://127.0.0.1:{p.http_port}/metrics")
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO {name} (payload) VALUES ('in tx')")  # the fast path
            assert await _visible_within(p, name, 1, 1.0) == []  # not committed
            await cur.execute("COMMIT")  # wakes the sequencer (its probe is 30 s away)
            assert await _visible_within(p, name, 1, 3.0) == [b"in tx"]
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO {name} (payload) VALUES ('rolled back')")
            await cur.execute("ROLLBACK")
            await cur.execute(f"INSERT INTO {name} (payload) VALUES ('after')")
            assert await _visible_within(p, name, 2, 3.0) == [b"in tx", b"after"]
            # The two INSERTs, the COMMIT and the ROLLBACK, and the autocommit INSERT.
            assert fast_path_statements(f"http://127.0.0.1:{p.http_port}/metrics") - before >= 5
    finally:
        conn.close()
        await run(p, "commerce", f"DROP TOPIC IF EXISTS {name}")


async def test_only_an_autocommit_insert_values_into_a_topic_qualifies(topic_proxy, local_cluster):
    name = "fast_publish_route"
    await run(topic_proxy, "commerce", f"DROP TOPIC IF EXISTS {name}")
    await run(topic_proxy, "commerce", f"CREATE TOPIC {name} (order_id BIGINT)")
    state = ClusterState(local_cluster.config, local_cluster.endpoints)
    try:
        await state.topics.refresh("commerce")
        info = state.topics.lookup("commerce", name)
        assert info is not None
        session = ProxySession(state)
        session.use_target("commerce")
        route = fast_route(session, f"INSERT INTO {name} (payload, order_id) VALUES ('x', 1)")
        assert route is not None and route.topic == ("commerce", name) and route.inserted_table is None
        assert (route.keyspace, route.shard, route.plan) == ("commerce", info.shard, "Topic")
        # Straight into the log table (only the view's columns are named).
        assert route.query.decode() == f"INSERT INTO `_tms_{name}` (payload, order_id) VALUES ('x', 1)"
        assert route.publish is None  # one message: fewer than topics.direct_min_rows (8 by default)
        qualified = fast_route(session, f"insert into commerce.`{name}` (payload) values ('y'), ('z')")
        assert qualified is not None and qualified.query.decode().startswith(f"insert into `_tms_{name}` (payload)")
        # Quoted names (the lexer's path) are decided alike; a column the view does not show, or
        # the generated message_id, sends the INSERT through the view.
        quoted = fast_route(session, f"INSERT INTO {name} (`payload`, `Order_Id`) VALUES ('x', 1)")
        assert quoted is not None and quoted.query.decode().startswith(f"INSERT INTO `_tms_{name}` (`payload`")
        for through_view in ("(payload, message_id)", "(payload, seq)", "(payload, `seq`)", "(payload /* c */, seq)",
                             "(payload,)"):
            viewed = fast_route(session, f"INSERT INTO {name} {through_view} VALUES ('x', 1)")
            assert viewed is not None and viewed.query.decode().startswith(f"INSERT INTO {name} ("), through_view
            assert viewed.publish is None
        # Eight messages: a direct publish (proxy.topics.direct), the INSERT, with the ids, inside
        # its multi-statement; what is not rewritten exactly keeps the deferred path (ids from a
        # pass): IGNORE, ON DUPLICATE KEY, a comment among the rows. One naming publish_time is
        # not the fast path's: the normal path refuses it (1235, test_admin_sql).
        eight = ", ".join(f"('m{i}', {i})" for i in range(8))
        batch = fast_route(session, f"INSERT INTO {name} (payload, order_id) VALUES {eight}")
        assert batch is not None and batch.publish is not None and batch.publish.rows == 8
        script = direct.publish_script((batch.publish,))
        assert f";INSERT INTO `_tms_{name}` (payload, order_id, seq, publish_time) VALUES ('m0', 0, " in script
        for deferred in (f"INSERT IGNORE INTO {name} (payload, order_id) VALUES {eight}",
                         f"INSERT INTO {name} (payload, order_id) VALUES {eight} ON DUPLICATE KEY UPDATE order_id = 1",
                         f"INSERT INTO {name} (payload, order_id) VALUES {eight} /* c */"):
            kept = fast_route(session, deferred)
            assert kept is not None and kept.publish is None and kept.query.decode().lower().startswith("insert"), deferred
        for other in (f"REPLACE INTO {name} (payload) VALUES ('x')",
                      f"INSERT INTO {name} (payload, publish_time) VALUES {eight}",
                      f"INSERT INTO {name} (payload) SELECT email FROM customer",
                      f"SELECT * FROM {name}",
                      f"INSERT INTO {name} (payload) VALUES ('x'); INSERT INTO {name} (payload) VALUES ('y')"):
            assert fast_route(session, other) is None, other
        session.begin_transaction()
        assert fast_route(session, f"INSERT INTO {name} (payload) VALUES ('x')") is None
        # Unless the caller runs it in the transaction (its sequencer woken at the COMMIT).
        in_tx = fast_route(session, f"INSERT INTO {name} (payload) VALUES ('x')", in_transaction=True)
        assert in_tx is not None and in_tx.topic == ("commerce", name)
        in_tx = fast_route(session, f"INSERT INTO {name} (payload, order_id) VALUES {eight}", in_transaction=True)
        assert in_tx is not None and in_tx.publish is None
        assert in_tx.query.decode() == f"INSERT INTO `_tms_{name}` (payload, order_id) VALUES {eight}"
    finally:
        await state.topics.stop()
        await run(topic_proxy, "commerce", f"DROP TOPIC IF EXISTS {name}")
