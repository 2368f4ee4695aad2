"""Receive, process and ack commerce.customer_events messages through the proxy (`make run`).

    .venv/bin/python examples/messaging/worker.py            # every message
    .venv/bin/python examples/messaging/worker.py 1          # only tenant 1 (STREAM ... WHERE)
"""

import asyncio
import sys

from proxy.messaging.client import MessageQueue


async def main(tenant: str | None) -> None:
    where = f"tenant_id = {int(tenant)}" if tenant else None
    async with MessageQueue("customer_events", host="127.0.0.1", port=15306, db="commerce", where=where) as q:
        async for msg in q:
            print(f"processing {msg.id}: {msg.values['message']}")
            await q.ack([msg.id])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
