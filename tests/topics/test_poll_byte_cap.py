"""A read hands out at most ``topics.max_poll_bytes`` of payload (CDAP's ``messaging.max.poll.size``),
but always at least one message: a REST poll, the Python client's poll, and a STREAM follower's
batches (which then read on at once, so a follower still receives everything, in order)."""

from __future__ import annotations

import base64

from proxy.topics import TopicClient
from tests.topics.conftest import MAX_POLL_BYTES, eventually, read_all, run
from tests.topics.test_rest import call, poll_all

KB = 1024
SIZES = [400 * KB, 400 * KB, 400 * KB, 2 * MAX_POLL_BYTES, 100, 100]


def _payload(i: int, size: int) -> bytes:
    return (bytes([65 + i]) * size)[:size]


async def test_a_poll_returns_at_most_the_byte_cap_and_always_one_message(topic_proxy, http, topics, follow):
    assert MAX_POLL_BYTES == 1024 * KB  # the sizes below are chosen around it
    name = await topics.create("commerce")
    follower = await follow("commerce", f"STREAM * FROM `{name}`")
    payloads = [_payload(i, n) for i, n in enumerate(SIZES)]
    for p in payloads:  # one message per INSERT: a 2 MiB statement stays under max_allowed_packet
        await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES (X'{p.hex()}')")

    async def all_sequenced() -> bool:
        return len(await read_all(topic_proxy, "commerce", name)) == len(SIZES)

    await eventually(all_sequenced, within=10)
    url = f"{topic_proxy.rest}/commerce/topics/{name}"
    pages: list[list[bytes]] = []
    start: dict = {}
    while True:
        page = await poll_all(http, url, {**start, "limit": 100})
        if not page:
            break
        pages.append([base64.b64decode(m["payload"]) for m in page])
        start = {"startFrom": page[-1]["id"], "inclusive": False}
    # 400K+400K fit in 1 MiB, a third would not; the 2 MiB message comes alone; then the rest.
    assert [[len(p) for p in page] for page in pages] == [[400 * KB, 400 * KB], [400 * KB], [2 * MAX_POLL_BYTES],
                                                          [100, 100]]
    assert [p for page in pages for p in page] == payloads

    async with TopicClient("127.0.0.1", topic_proxy.port, keyspace="commerce") as client:
        first = await client.poll(name, limit=10, max_bytes=900 * KB)
        assert [m.payload for m in first] == payloads[:2]
        big = await client.poll(name, after=first[-1].id, inclusive=False, limit=10, max_bytes=10)
        assert [m.payload for m in big] == payloads[2:3]  # over the cap, but one message always comes
        assert len(await client.poll(name, limit=10, max_bytes=100 * MAX_POLL_BYTES)) == len(SIZES)

    rows = await follower.wait_for(len(SIZES), within=10)
    assert [bytes(r[2]) for r in rows] == payloads
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)


async def test_the_byte_cap_counts_only_visible_messages(topic_proxy, http, topics):
    """An expired message in the middle is neither returned nor counted against the cap."""
    name = await topics.create("commerce")
    big = 700 * KB
    await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES (X'{_payload(0, 10).hex()}')")
    await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload, ttl_seconds) VALUES"
                                       f" (X'{_payload(1, big).hex()}', 1)")
    await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES (X'{_payload(2, big).hex()}')")

    async def expired() -> bool:
        return [len(r[2]) for r in await read_all(topic_proxy, "commerce", name)] == [10, big]

    await eventually(expired, within=10)
    status, data = await call(http, "POST", f"{topic_proxy.rest}/commerce/topics/{name}/poll", {"limit": 10})
    assert status == 200
    assert [len(base64.b64decode(m["payload"])) for m in data] == [10, big]
