"""CDAP's REST API for topics (mirroring CDAP's own messaging HTTP tests), with aiohttp as the client."""

from __future__ import annotations

import asyncio
import base64
import time

from proxy.topics.names import place
from tests.topics.conftest import eventually, read_all, run


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


async def call(http, method: str, url: str, body=None) -> tuple[int, object]:
    async with http.request(method, url, json=body) as r:
        data = await r.json(content_type=None) if (await r.read()) else None
        return r.status, data


async def poll_all(http, url: str, body: dict | None = None) -> list[dict]:
    status, data = await call(http, "POST", url + "/poll", body or {})
    assert status == 200, data
    assert isinstance(data, list)
    return data


async def test_topic_metadata_create_duplicate_invalid_ttl_list_get_update_delete_and_404s(topic_proxy, http):
    base = f"{topic_proxy.rest}/commerce/topics"
    name = "rest_meta_topic"
    await call(http, "DELETE", f"{base}/{name}")
    assert (await call(http, "PUT", f"{base}/{name}", {"ttl": "3600", "owner": "cdap"}))[0] == 200
    status, body = await call(http, "PUT", f"{base}/{name}", {})
    assert status == 409 and "already exists" in body["error"]
    for bad in ({"ttl": "abc"}, {"ttl": "0"}, {"ttl": "-5"}, {"ttl": "1.5"}):
        assert (await call(http, "PUT", f"{base}/rest_bad_ttl", bad))[0] == 400
    assert (await call(http, "PUT", f"{base}/rest_bad_ttl", ["not", "a", "map"]))[0] == 400
    status, listed = await call(http, "GET", base)
    assert status == 200 and name in listed and "rest_bad_ttl" not in listed
    status, meta = await call(http, "GET", f"{base}/{name}")
    assert status == 200
    assert meta["name"] == name and meta["properties"] == {"ttl": "3600", "owner": "cdap"}
    assert meta["shard"] == place("commerce", ["-80", "80-"], True, name) and meta["generation"] == 1
    # PUT .../properties replaces the properties (a missing TTL falls back to the default)
    assert (await call(http, "PUT", f"{base}/{name}/properties", {"ttl": "10"}))[0] == 200
    assert (await call(http, "GET", f"{base}/{name}"))[1]["properties"] == {"ttl": "10"}
    assert (await call(http, "PUT", f"{base}/{name}/properties", {"ttl": "x"}))[0] == 400
    assert (await call(http, "PUT", f"{base}/nope/properties", {"ttl": "10"}))[0] == 404
    # SQL sees the same topic
    shown = await run(topic_proxy, "commerce", f"SHOW TOPICS FROM commerce LIKE '{name}'")
    assert [(r[1], r[4]) for r in shown] == [(name, 10)]
    assert (await call(http, "DELETE", f"{base}/{name}"))[0] == 200
    for method, path in (("DELETE", ""), ("GET", ""), ("POST", "/publish"), ("POST", "/poll")):
        status, _ = await call(http, method, f"{base}/{name}{path}", {"messages": [b64("x")]})
        assert status == 404, (method, path, status)
    assert (await call(http, "GET", f"{topic_proxy.rest}/nosuchks/topics"))[0] == 404


async def test_publish_and_poll_inclusive_exclusive_by_time_and_limit(topic_proxy, http, topics):
    name = await topics.create("lookup")
    url = f"{topic_proxy.rest}/lookup/topics/{name}"
    status, body = await call(http, "POST", url + "/publish", {"messages": [b64(f"m{i}") for i in range(5)]})
    assert status == 200 and body == {"published": 5}

    async def five() -> bool:
        return len(await poll_all(http, url)) == 5

    await eventually(five)
    await asyncio.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    await asyncio.sleep(0.05)
    assert (await call(http, "POST", url + "/publish", {"messages": ["late-1", "late-2"], "encoding": "text"}))[0] == 200

    async def seven() -> bool:
        return len(await poll_all(http, url)) == 7

    await eventually(seven)
    everything = await poll_all(http, url)
    payloads = [base64.b64decode(m["payload"]) for m in everything]
    assert payloads == [b"m0", b"m1", b"m2", b"m3", b"m4", b"late-1", b"late-2"]
    ids = [m["id"] for m in everything]
    assert ids == sorted(ids) and len(set(ids)) == 7
    third = ids[2]
    assert [m["id"] for m in await poll_all(http, url, {"startFrom": third, "inclusive": True})] == ids[2:]
    assert [m["id"] for m in await poll_all(http, url, {"startFrom": third, "inclusive": False})] == ids[3:]
    assert [m["id"] for m in await poll_all(http, url, {"startFrom": third, "limit": 2})] == ids[2:4]
    by_time = await poll_all(http, url, {"startFrom": middle_ms, "encoding": "text"})
    assert [m["payload"] for m in by_time] == ["late-1", "late-2"]
    assert all(m["publishTime"] >= middle_ms for m in by_time)
    assert await poll_all(http, url, {"startFrom": ids[-1], "inclusive": False}) == []
    # reuse of the same request gives the same answer (no consumer state on the server)
    assert await poll_all(http, url, {"startFrom": third}) == await poll_all(http, url, {"startFrom": third})
    # bad requests
    for bad in ({"startFrom": "xyz"}, {"limit": 0}, {"limit": "5"}, {"inclusive": "yes"}):
        assert (await call(http, "POST", url + "/poll", bad))[0] == 400
    assert (await call(http, "POST", url + "/publish", {"messages": []}))[0] == 400
    assert (await call(http, "POST", url + "/publish", {"messages": ["***"]}))[0] == 400
    # SQL readers see the same sequence
    assert [r[0] for r in await read_all(topic_proxy, "lookup", name)] == ids


async def test_store_publish_rollback_transactional_trio(topic_proxy, http, topics):
    name = await topics.create("commerce")
    url = f"{topic_proxy.rest}/commerce/topics/{name}"
    assert (await call(http, "POST", url + "/store", {"transactionWritePointer": 1001,
                                                       "messages": [b64("s1"), b64("s2")]}))[0] == 200
    assert (await call(http, "POST", url + "/store", {"transactionWritePointer": 1001, "messages": [b64("s3")]}))[0] == 200
    assert (await call(http, "POST", url + "/store", {"transactionWritePointer": 2002, "messages": [b64("doomed")]}))[0] == 200
    assert (await call(http, "POST", url + "/publish", {"messages": [b64("plain")]}))[0] == 200

    async def plain_only() -> bool:
        return [base64.b64decode(m["payload"]) for m in await poll_all(http, url)] == [b"plain"]

    await eventually(plain_only, what="the non-transactional message alone")
    await asyncio.sleep(0.3)
    assert await plain_only(), "stored payloads stay invisible until their commit marker"

    # the commit marker: stored payloads (and the marker's own) appear together, in store order
    status, body = await call(http, "POST", url + "/publish", {"transactionWritePointer": 1001, "messages": [b64("s4")]})
    assert status == 200 and body["transactionWritePointer"] == 1001
    status, body = await call(http, "POST", url + "/rollback", {"transactionWritePointer": 2002})
    assert status == 200 and body["rolledBack"] == 1

    async def committed() -> bool:
        return len(await poll_all(http, url)) == 5

    await eventually(committed)
    got = await poll_all(http, url)
    assert [base64.b64decode(m["payload"]) for m in got] == [b"plain", b"s1", b"s2", b"s3", b"s4"]
    # resume from an id inside the run
    assert [base64.b64decode(m["payload"]) for m in await poll_all(http, url, {"startFrom": got[2]["id"],
                                                                               "inclusive": False})] == [b"s3", b"s4"]
    # a published pointer cannot be rolled back; one without a pointer is a bad request
    assert (await call(http, "POST", url + "/rollback", {"transactionWritePointer": 1001}))[0] == 409
    assert (await call(http, "POST", url + "/rollback", {}))[0] == 400
    assert (await call(http, "POST", url + "/store", {"messages": [b64("x")]}))[0] == 400
    await asyncio.sleep(0.3)
    assert b"doomed" not in [base64.b64decode(m["payload"]) for m in await poll_all(http, url)]


async def test_a_5_mb_message_round_trips_over_rest_and_sql(topic_proxy, http, topics):
    name = await topics.create("commerce")
    url = f"{topic_proxy.rest}/commerce/topics/{name}"
    big = bytes(range(256)) * (5 * 1024 * 1024 // 256)
    assert (await call(http, "POST", url + "/publish", {"messages": [b64(big)]}))[0] == 200

    async def arrived() -> bool:
        return len(await poll_all(http, url)) == 1

    await eventually(arrived, within=10)
    assert base64.b64decode((await poll_all(http, url))[0]["payload"]) == big
    rows = await read_all(topic_proxy, "commerce", name)
    assert bytes(rows[0][2]) == big


async def test_a_publish_beyond_one_statement_to_the_shard_is_stored_whole_and_read_in_order(topic_proxy, http, topics):
    """Ten 1 MiB messages: ~20 MiB of hex literals, past the shard's 16 MiB max_allowed_packet
    for one statement (a direct publish's script would be refused by the shard): stored in
    several statements of one transaction, read back whole and in order."""
    name = await topics.create("commerce")
    url = f"{topic_proxy.rest}/commerce/topics/{name}"
    assert (await call(http, "POST", url + "/publish", {"messages": [b64("first"), b64("second")]}))[0] == 200
    big = [bytes([i]) * 1024 + bytes(range(256)) * 4096 for i in range(10)]  # 1 MiB + 1 KiB each, distinct
    status, body = await call(http, "POST", url + "/publish", {"messages": [b64(m) for m in big]})
    assert (status, body) == (200, {"published": 10})
    assert (await call(http, "POST", url + "/publish", {"messages": [b64("last")]}))[0] == 200

    async def all_sequenced() -> bool:
        return len(await read_all(topic_proxy, "commerce", name)) == 13

    await eventually(all_sequenced, within=20, what="every message sequenced")
    rows = await read_all(topic_proxy, "commerce", name)
    assert [bytes(r[2]) for r in rows] == [b"first", b"second", *big, b"last"]
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    # Poll reads them too, one at a time past the poll's byte cap, in the same order.
    polled: list[bytes] = []
    start: dict[str, object] = {}
    while len(polled) < 13:
        page = await poll_all(http, url, start)
        assert page, polled
        polled += [base64.b64decode(m["payload"]) for m in page]
        start = {"startFrom": page[-1]["id"], "inclusive": False}
    assert polled == [b"first", b"second", *big, b"last"]
    # A message whose row alone passes a statement: refused, nothing stored.
    status, body = await call(http, "POST", url + "/publish", {"messages": [b64("small"), b64(b"z" * (9 << 20))]})
    assert status == 413 and "larger than a statement" in body["error"]
    await asyncio.sleep(0.5)  # passes (poll_seconds 0.2) would have sequenced anything stored
    assert len(await read_all(topic_proxy, "commerce", name)) == 13


async def test_a_dropped_and_recreated_topic_never_shows_old_messages(topic_proxy, http, topics):
    name = await topics.create("commerce")
    url = f"{topic_proxy.rest}/commerce/topics/{name}"
    await call(http, "POST", url + "/publish", {"messages": [b64("old-1"), b64("old-2")]})

    async def two() -> bool:
        return len(await poll_all(http, url)) == 2

    await eventually(two)
    old_ids = [m["id"] for m in await poll_all(http, url)]
    assert (await call(http, "DELETE", url))[0] == 200
    assert (await call(http, "PUT", url, {"ttl": "600"}))[0] == 200
    status, meta = await call(http, "GET", url)
    assert meta["generation"] == 2
    assert await poll_all(http, url) == []
    await call(http, "POST", url + "/publish", {"messages": [b64("new")]})

    async def one() -> bool:
        return len(await poll_all(http, url)) == 1

    await eventually(one)
    new = await poll_all(http, url, {"startFrom": None})
    assert [base64.b64decode(m["payload"]) for m in new] == [b"new"]
    assert new[0]["id"] > max(old_ids), "ids keep growing across generations"


async def test_a_poll_limit_past_the_chunk_reads_one_chunk_and_a_limit_below_one_is_a_bad_request(topic_proxy, http,
                                                                                                  topics):
    """CDAP's clients send ``Integer.MAX_VALUE`` when they set no limit: a chunk, not a 400."""
    name = await topics.create("commerce")
    url = f"{topic_proxy.rest}/commerce/topics/{name}"
    assert (await call(http, "POST", url + "/publish", {"messages": [b64(f"m{i}") for i in range(3)]}))[0] == 200

    async def three() -> bool:
        return len(await poll_all(http, url)) == 3

    await eventually(three)
    for limit in (2**31 - 1, 10**12):
        assert len(await poll_all(http, url, {"limit": limit})) == 3
    for limit in (0, -1):
        status, body = await call(http, "POST", url + "/poll", {"limit": limit})
        assert status == 400 and "limit" in body["error"]
    assert (await call(http, "POST", url + "/poll", {"limit": "10"}))[0] == 400


async def test_store_needs_messages_and_a_pointer_may_come_as_decimal_text(topic_proxy, http, topics):
    """CDAP refuses a store without payloads (400). Tephra's write pointers pass 2**53, so a
    JSON client may send one as text: it is the same pointer as the number."""
    name = await topics.create("commerce")
    url = f"{topic_proxy.rest}/commerce/topics/{name}"
    pointer = 1732500000000000001  # > 2**53: a double would round it
    status, body = await call(http, "POST", url + "/store", {"transactionWritePointer": pointer, "messages": []})
    assert status == 400 and "messages" in body["error"]
    assert (await call(http, "POST", url + "/store", {"transactionWritePointer": str(pointer),
                                                       "messages": [b64("t1")]}))[0] == 200
    assert (await call(http, "POST", url + "/store", {"transactionWritePointer": pointer,
                                                       "messages": [b64("t2")]}))[0] == 200
    assert (await call(http, "POST", url + "/store", {"transactionWritePointer": "12abc",
                                                       "messages": [b64("x")]}))[0] == 400
    status, body = await call(http, "POST", url + "/publish", {"transactionWritePointer": str(pointer), "messages": []})
    assert status == 200 and body == {"transactionWritePointer": pointer, "published": 2}

    async def both() -> bool:
        return [base64.b64decode(m["payload"]) for m in await poll_all(http, url)] == [b"t1", b"t2"]

    await eventually(both)
    # Publishing the pointer again adds nothing; rolling back a pointer never stored is a no-op.
    status, body = await call(http, "POST", url + "/publish", {"transactionWritePointer": pointer, "messages": []})
    assert status == 200 and body["published"] == 0
    status, body = await call(http, "POST", url + "/rollback", {"transactionWritePointer": 424242})
    assert status == 200 and body["rolledBack"] == 0
    await asyncio.sleep(0.3)
    assert await both()
