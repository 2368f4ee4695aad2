"""examples/topics end to end against a test cluster's proxy: the publisher changes rows and
publishes in one transaction; two independent consumers (one from the beginning, one from a point
in time) both see every committed event in the same order, never a rolled-back one; a consumer
stopped and restarted with its position file continues without a duplicate or a gap."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from tests.topics.conftest import eventually, read_all, run

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "topics"
CUSTOMER = 9_140_000  # the customers these orders go to (the table is shared by the session's tests)


def _command(script: str, port: int, topic: str, *args: str) -> list[str]:
    return [sys.executable, str(EXAMPLES / script), "--port", str(port), "--topic", topic, *args]


def _publish(port: int, topic: str, orders: int, first_order_id: int) -> str:
    done = subprocess.run(_command("publisher.py", port, topic, "--orders", str(orders), "--first-order-id",
                                   str(first_order_id), "--first-customer-id", str(CUSTOMER)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


async def _consume(port: int, topic: str, count: int, *args: str) -> list[tuple[str, dict]]:
    proc = await asyncio.create_subprocess_exec(*_command("consumer.py", port, topic, "--count", str(count), *args),
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()[-3000:]
    lines = [line.split(" ", 3) for line in out.decode().splitlines()]
    return [(message_id, json.loads(event)) for _, message_id, _, event in lines]


async def test_publisher_and_two_independent_consumers(topic_proxy, topics, tmp_path):
    topic = topics.prefix[:40]
    topics.made.append(("commerce", topic))  # the publisher creates it; the fixture drops it
    await run(topic_proxy, "commerce", f"DROP TOPIC IF EXISTS `{topic}`")
    port = topic_proxy.port
    first, second = 7_140_000_000, 7_140_000_100
    assert "published 5 orders" in await asyncio.to_thread(_publish, port, topic, 5, first)

    async def first_visible() -> bool:  # a transaction's events get their ids (publish time) at a pass
        return len(await read_all(topic_proxy, "commerce", topic)) == 5

    await eventually(first_visible, what="the first orders' pass")
    await asyncio.sleep(0.05)
    later_ms = int(time.time() * 1000)
    await asyncio.sleep(0.05)

    # 5 + 9 committed events (the publisher rolls back every tenth order)
    everything = asyncio.ensure_future(_consume(port, topic, 14, "--name", "a"))
    from_time = asyncio.ensure_future(_consume(port, topic, 9, "--name", "b", "--from-time", str(later_ms)))
    position = tmp_path / "position.txt"
    resumed_first = await _consume(port, topic, 3, "--name", "c", "--position-file", str(position))
    assert "published 9 orders with their events, rolled back 1" in await asyncio.to_thread(
        _publish, port, topic, 10, second)
    resumed_rest = await _consume(port, topic, 11, "--name", "c", "--position-file", str(position))
    a, b = await everything, await from_time

    ids = [m for m, _ in a]
    assert ids == sorted(ids) and len(set(ids)) == 14
    orders = [e["order_id"] for _, e in a]
    assert orders == [first + n for n in range(5)] + [second + n for n in range(9)]  # order 9 rolled back
    assert b == a[5:]  # from the point in time: the second run's events, the same ids, the same order
    assert resumed_first + resumed_rest == a  # restarted from its saved position: no duplicate, no gap

    # Each event's order row exists (same transaction), the rolled-back order's does not.
    rows = await run(topic_proxy, "commerce", f"SELECT order_id FROM corder WHERE order_id IN"
                                              f" ({', '.join(str(o) for o in [*orders, second + 9])}) ORDER BY order_id")
    assert [r[0] for r in rows] == orders
    joined = await run(topic_proxy, "commerce", f"SELECT o.order_id, e.message_id FROM `{topic}` e JOIN corder o"
                                                " ON o.order_id = e.order_id ORDER BY e.message_id")
    assert joined == [(o, m) for o, (m, _) in zip(orders, a, strict=True)]  # the README's join
    await run(topic_proxy, "commerce", f"DELETE FROM corder WHERE customer_id BETWEEN {CUSTOMER} AND {CUSTOMER + 4}")
    await run(topic_proxy, "commerce", f"DELETE FROM customer WHERE customer_id BETWEEN {CUSTOMER} AND {CUSTOMER + 4}")
