"""Writes routed by the proxy reach the stream from the shard the vindex chose, with the same
images as direct writes."""

from __future__ import annotations

import asyncio

from proxy.cdc import VStream
from tests.cdc.conftest import collect_groups, new_id, rows_of

CUSTOMER = "commerce.customer"


def customer_ids(groups) -> list[int]:
    return [
        (after or before)["customer_id"] for _s, _op, before, after in rows_of(groups, CUSTOMER)
    ]


def run_through_proxy(proxy, *statements: str) -> None:
    conn = proxy.connect("commerce", autocommit=True)
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


async def test_insert_update_delete_through_the_proxy_are_streamed(commerce_endpoints, cdc_proxy):
    customer_id = new_id() % 1_000_000_000
    async with VStream(commerce_endpoints, [CUSTOMER]) as stream:
        await asyncio.to_thread(
            run_through_proxy,
            cdc_proxy,
            f"INSERT INTO customer (customer_id, email, tenant_id) VALUES ({customer_id}, 'p@x', 1)",
            f"UPDATE customer SET tenant_id = 2 WHERE customer_id = {customer_id}",
            f"DELETE FROM customer WHERE customer_id = {customer_id}",
        )
        groups = await collect_groups(stream, lambda g: customer_ids(g).count(customer_id) == 3)
    changes = [c for c in rows_of(groups, CUSTOMER) if (c[3] or c[2])["customer_id"] == customer_id]
    assert [op for _s, op, _b, _a in changes] == ["insert", "update", "delete"]
    assert len({shard for shard, *_rest in changes}) == 1  # the row lives on one shard
    (_s, _o, _b, inserted), (_s2, _o2, before, after), (_s3, _o3, deleted, _a3) = changes
    assert inserted["tenant_id"] == 1
    assert (before["tenant_id"], after["tenant_id"]) == (1, 2)
    assert deleted["tenant_id"] == 2 and deleted["email"] == inserted["email"]
