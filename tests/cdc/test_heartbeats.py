"""Stream heartbeats: an idle stream says so every ``heartbeat_interval`` seconds."""

from __future__ import annotations

import asyncio
import time

from proxy.cdc import HeartbeatEvent, VStream
from tests.cdc.conftest import PROBE


async def test_idle_stream_yields_heartbeats_at_the_requested_interval(
    commerce_endpoints, probe_table
):
    async with VStream(commerce_endpoints, [PROBE], heartbeat_interval=0.3) as stream:
        start = stream.vgtid
        arrivals = []
        async with asyncio.timeout(5):
            async for group in stream:
                arrivals.append((time.monotonic(), group))
                if len(arrivals) == 3:
                    break
    assert all(group.is_heartbeat for _t, group in arrivals)
    assert all(isinstance(group.events[0], HeartbeatEvent) for _t, group in arrivals)
    gaps = [b[0] - a[0] for a, b in zip(arrivals, arrivals[1:], strict=False)]
    assert all(0.25 <= gap <= 1.0 for gap in gaps)
    assert arrivals[-1][1].vgtid == start
