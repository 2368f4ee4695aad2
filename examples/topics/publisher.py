"""Place orders: each one changes rows and publishes an ``order placed`` event in ONE transaction, so
the event exists exactly when the order does (`make run` first).

    .venv/bin/python examples/topics/publisher.py --orders 10

Per order, in one two-phase-commit transaction (the order's row, its lookup-vindex row and the
topic may live on three shards; ``twopc`` makes the commit atomic across them)::

    BEGIN;
    INSERT INTO corder (order_id, customer_id, sku, price) VALUES (...);     -- the state change
    UPDATE customer SET email = ... WHERE customer_id = ...;                  -- another row changed
    INSERT INTO order_events (order_id, customer_id, payload) VALUES (...);   -- the notification
    COMMIT;

Every tenth order is rolled back after its INSERTs: its event is never seen by any consumer.
"""

from __future__ import annotations

import asyncio
import json
import time

import aiomysql
from cli_options import arguments, topic_ddl


async def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=10)
    parser.add_argument("--first-order-id", type=int, default=time.time_ns() // 1000)
    parser.add_argument("--first-customer-id", type=int, default=1000, help="orders go to 5 customers from here")
    args = parser.parse_args()
    conn = await aiomysql.connect(host=args.host, port=args.port, user=args.user, password=args.password,
                                  db=args.keyspace, autocommit=True)
    try:
        async with conn.cursor() as cur:
            await cur.execute(topic_ddl(args.topic))
            await cur.execute("SET transaction_mode = 'twopc'")
            committed = rolled_back = 0
            for n in range(args.orders):
                order_id, customer_id = args.first_order_id + n, args.first_customer_id + n % 5
                event = json.dumps({"event": "order placed", "order_id": order_id, "customer_id": customer_id})
                await cur.execute("BEGIN")
                await cur.execute("INSERT INTO customer (customer_id, email) VALUES (%s, %s)"
                                  " ON DUPLICATE KEY UPDATE email = VALUES(email)",
                                  (customer_id, f"last-order-{order_id}@example.com"))
                await cur.execute("INSERT INTO corder (order_id, customer_id, sku, price) VALUES (%s, %s, %s, %s)",
                                  (order_id, customer_id, f"SKU-{n % 3}", 100 + n))
                await cur.execute(f"INSERT INTO `{args.topic}` (order_id, customer_id, payload) VALUES (%s, %s, %s)",
                                  (order_id, customer_id, event))
                if n % 10 == 9:
                    await cur.execute("ROLLBACK")  # neither the order nor its event ever existed
                    rolled_back += 1
                else:
                    await cur.execute("COMMIT")
                    committed += 1
    finally:
        conn.close()
    print(f"published {committed} orders with their events, rolled back {rolled_back}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
