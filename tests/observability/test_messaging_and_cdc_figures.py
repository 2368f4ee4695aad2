"""Message tables and CDC streams in ``/metrics``: the counters of ``SHOW VITESS_MESSAGES``
per message table and shard, and per VSTREAM table and shard the events, bytes and lag."""

from __future__ import annotations

import asyncio
import uuid

import pymysql
import pymysql.cursors

from tests.observability.conftest import ObservedProxy, run
from tests.observability.test_metrics import delta, eventually, ids_on

MESSAGE_COLUMNS = ("Sent", "Acked", "Delayed", "Parked", "Purged")


def show_messages(p: ObservedProxy) -> dict[tuple[str, str, str], dict[str, int]]:
    conn = p.connect()
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as c:
            c.execute("show vitess_messages")
            return {(r["Keyspace"], r["Shard"], r["Table"]): {k: int(r[k]) for k in (*MESSAGE_COLUMNS, "InFlight")}
                    for r in c.fetchall()}
    finally:
        conn.close()


async def test_message_counters_are_those_of_show_vitess_messages(observed_proxy: ObservedProxy) -> None:
    ids = ids_on("-80", 2) + ids_on("80-", 1)
    before = await observed_proxy.scrape()
    stream_conn = observed_proxy.connect(cursorclass=pymysql.cursors.SSCursor)
    writer = observed_proxy.connect()
    try:
        cur = stream_conn.cursor()
        cur.execute("set workload = 'olap'")
        cur.execute("stream * from customer_events")
        for i in ids:
            run(writer, f"insert into customer_events(id, message) values ({i}, '{{\"n\": {i}}}')")
        loop = asyncio.get_running_loop()
        received = []
        while len(received) < len(ids):
            row = await asyncio.wait_for(loop.run_in_executor(None, cur.fetchone), 10)
            if int(row[0]) in ids:
                received.append(int(row[0]))
        assert sorted(received) == sorted(ids)
        run(writer, f"update customer_events set time_acked = 1 where id in ({', '.join(map(str, ids))})")

        async def metrics_match_show() -> bool:
            shown = show_messages(observed_proxy)
            figures = await observed_proxy.scrape()
            events = figures.by("shardgate_messages", "shardgate_messages_total", "keyspace", "shard", "table",
                                "event")
            in_flight = figures.by("shardgate_messages_in_flight", None, "keyspace", "shard", "table")
            return all(
                events.get((*key, col.lower()), 0.0) == row[col] for key, row in shown.items() for col in MESSAGE_COLUMNS
            ) and all(in_flight.get(key, 0.0) == row["InFlight"] for key, row in shown.items())

        await eventually(metrics_match_show, what="shardgate_messages_* equal to SHOW VITESS_MESSAGES")
        after = await observed_proxy.scrape()
        assert delta(after, before, "shardgate_messages", table="customer_events", event="sent") >= len(ids)
        assert delta(after, before, "shardgate_messages", table="customer_events", shard="-80", event="acked") == 2
        assert delta(after, before, "shardgate_messages", table="customer_events", shard="80-", event="acked") == 1
        assert after.total("shardgate_message_subscribers", table="customer_events") == 2  # one per shard
    finally:
        stream_conn.close()
        writer.close()


async def test_vstream_events_bytes_and_lag_per_shard(observed_proxy: ObservedProxy) -> None:
    (a,), (b,) = ids_on("-80", 1), ids_on("80-", 1)
    email = "cdc-" + uuid.uuid4().hex
    before = await observed_proxy.scrape()
    conn = observed_proxy.connect(cursorclass=pymysql.cursors.SSCursor)
    writer = observed_proxy.connect()
    try:
        cur = conn.cursor()
        cur.execute("set workload = 'olap'")
        cur.execute("vstream * from customer limit 2")
        streaming = await observed_proxy.scrape()
        assert streaming.total("shardgate_cdc_streams_open", table="commerce.customer") == 1
        run(writer, f"insert into customer(customer_id, email) values ({a}, '{email}'), ({b}, '{email}')")
        rows = await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, cur.fetchall), 10)
        assert sorted(int(r[1]) for r in rows) == sorted([a, b])

        async def caught_up() -> bool:
            figures = await observed_proxy.scrape()
            return figures.total("shardgate_cdc_streams_open", table="commerce.customer") == 0
        await eventually(caught_up, what="the VSTREAM ended after its LIMIT")
    finally:
        conn.close()
        writer.close()
    after = await observed_proxy.scrape()
    for shard in ("-80", "80-"):
        labels = {"table": "commerce.customer", "keyspace": "commerce", "shard": shard}
        # each transaction: BEGIN, the row, COMMIT, VGTID at least
        assert delta(after, before, "shardgate_cdc_events", **labels) >= 3
        assert delta(after, before, "shardgate_cdc_bytes", **labels) >= len(email)
        assert after.total("shardgate_cdc_lag_transactions", **labels) == 0
