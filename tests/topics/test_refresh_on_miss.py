"""Concurrent misses share one registry refresh, and never spin on one that has just ended.

A refresh whose task has ended but whose done callback has not run yet used to be awaited again
and again by ``TopicService.refresh_on_miss``: awaiting a done future does not yield, so the loop
never let that callback run (a proxy at 100% CPU, serving nobody, after many statements hit a
dropped topic's 1146 at once: tests/topics/test_faults.py hung on it once in a full run)."""

from __future__ import annotations

import asyncio
import threading
import time

from proxy.topics.service import TopicService


def _service_whose_refresh_just_ended() -> tuple[TopicService, list[float]]:
    """The service's refresh bookkeeping only: a registry last read before the miss, and an ended
    refresh still registered (its done callback not run yet)."""
    service = object.__new__(TopicService)
    calls: list[float] = []

    async def refresh(keyspace: str | None = None) -> None:
        started = time.monotonic()
        calls.append(started)
        await asyncio.sleep(0)
        service._read_since["commerce"] = started

    service.refresh = refresh  # type: ignore[method-assign]
    service._read_since = {"commerce": time.monotonic() - 60}
    ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    ended.set_result(None)
    service._refreshing = {"commerce": ended}
    return service, calls


def test_a_miss_after_a_refresh_ended_starts_a_new_one_instead_of_spinning():
    outcome: list[object] = []

    async def main() -> None:
        service, calls = _service_whose_refresh_just_ended()
        await asyncio.wait_for(service.refresh_on_miss("commerce"), 5)
        outcome.append(len(calls))

    # In a thread: a loop that never yields cannot be timed out from inside it.
    worker = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "refresh_on_miss spun on a refresh that had already ended"
    assert outcome == [1]


def test_concurrent_misses_share_one_refresh():
    async def main() -> int:
        service, calls = _service_whose_refresh_just_ended()
        service._refreshing = {}
        await asyncio.gather(*(service.refresh_on_miss("commerce") for _ in range(8)))
        return len(calls)

    assert asyncio.run(main()) == 1
