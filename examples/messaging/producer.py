"""Enqueue messages into commerce.customer_events through the proxy (`make run` first).

    .venv/bin/python examples/messaging/producer.py 10
"""

import asyncio
import json
import sys
import time

from proxy.messaging.client import MessageQueue


async def main(count: int) -> None:
    async with MessageQueue("customer_events", host="127.0.0.1", port=15306, db="commerce") as q:
        base = time.time_ns() // 1000
        batch = [{"id": base + i, "tenant_id": i % 3, "message": json.dumps({"n": i})} for i in range(count)]
        await q.enqueue(batch)
        print(f"enqueued {count} messages")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10))
