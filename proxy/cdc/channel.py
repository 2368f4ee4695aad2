"""A bounded channel from one producer thread to the asyncio loop, drained in batches.

The binlog reader is a blocking library, so it runs in its own thread. Waking the loop
costs a ``call_soon_threadsafe`` (a self-pipe write) and, worse, a handoff of the GIL
between the threads. So ``put`` does not wake the consumer by itself: the producer calls
``announce()`` when it is about to block (nothing more to read right now), and ``put``
wakes only once ``wake_batch`` items are waiting. A busy shard is thus handed over in
batches while an idle one is handed each item immediately. The bound gives
backpressure: a consumer held back (skew, slow client) stops the reader thread, which
stops reading the socket.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class ChannelClosed(Exception):
    """The consumer closed the channel; the producer must stop."""


class ThreadToLoopChannel(Generic[T]):
    def __init__(
        self, loop: asyncio.AbstractEventLoop, capacity: int, wake_batch: int = 64
    ) -> None:
        self._loop = loop
        self._capacity = capacity
        self._wake_batch = min(wake_batch, capacity)
        self._items: deque[T] = deque()
        self._cond = threading.Condition()
        self._waiter: asyncio.Future[None] | None = None
        self._wake_scheduled = False
        self._closed = False
        self._finished = False
        self._error: BaseException | None = None

    # -- producer thread side ------------------------------------------------------------

    def put(self, item: T) -> None:
        """Queue ``item``; blocks while the channel is full; raises ChannelClosed. Wakes
        the consumer only when ``wake_batch`` items are waiting (see ``announce``)."""
        with self._cond:
            items = self._items
            if len(items) >= self._capacity:
                # Full: make sure the consumer knows before we wait for it.
                wake = self._claim_wakeup()
                if wake:
                    self._loop.call_soon_threadsafe(self._wake)
                while len(items) >= self._capacity and not self._closed:
                    self._cond.wait()
            if self._closed:
                raise ChannelClosed
            items.append(item)
            wake = len(items) >= self._wake_batch and self._claim_wakeup()
        if wake:
            self._loop.call_soon_threadsafe(self._wake)

    def announce(self) -> None:
        """Wake the consumer if it waits and items are queued (the producer is about to
        block, so nothing would otherwise deliver them)."""
        with self._cond:
            wake = bool(self._items) and self._claim_wakeup()
        if wake:
            self._loop.call_soon_threadsafe(self._wake)

    def finish(self, error: BaseException | None = None) -> None:
        """The producer is done; ``error`` (if any) is raised to the consumer after the
        items already queued."""
        with self._cond:
            self._finished = True
            self._error = error
            wake = self._claim_wakeup()
        if wake:
            try:
                self._loop.call_soon_threadsafe(self._wake)
            except RuntimeError:
                # The loop is already closed: nobody is left to read the channel.
                pass

    @property
    def closed(self) -> bool:
        return self._closed

    def _claim_wakeup(self) -> bool:
        if self._waiter is not None and not self._wake_scheduled:
            self._wake_scheduled = True
            return True
        return False

    # -- loop side -----------------------------------------------------------------------

    def _wake(self) -> None:
        with self._cond:
            self._wake_scheduled = False
            waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get_batch(self) -> list[T]:
        """Everything queued so far (at least one item); ``[]`` once the producer finished
        cleanly; raises the producer's error once everything before it was taken."""
        while True:
            with self._cond:
                if self._items:
                    batch = list(self._items)
                    self._items.clear()
                    self._cond.notify_all()
                    return batch
                if self._finished:
                    if self._error is not None:
                        raise self._error
                    return []
                waiter = self._loop.create_future()
                self._waiter = waiter
            try:
                await waiter
            finally:
                with self._cond:
                    if self._waiter is waiter:
                        self._waiter = None

    def close(self) -> None:
        """Stop accepting items and release a producer blocked in ``put``."""
        with self._cond:
            self._closed = True
            self._items.clear()
            self._cond.notify_all()
