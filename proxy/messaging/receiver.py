"""A subscriber's end inside one manager: where its batches go and which messages it takes.

One subscription (a ``STREAM``) has one ``Receiver`` per shard it covers, all feeding the
subscription's queue. A receiver is *busy* from the moment a manager picks it for a batch
until the subscription has handed that batch to its client and asked for the next one, so
each subscriber has at most one batch outstanding per shard.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from proxy.engine.result import Result, Row
from proxy.errors import ProxyError


@dataclass(slots=True)
class Delivery:
    """One item of a subscription's queue: a batch (``result``, or ``payloads``), or the end
    of the stream (``error``)."""

    receiver: Receiver
    result: Result | None = None
    error: ProxyError | None = None
    # A batch's rows as text-protocol row payloads, when every one was encoded once
    # (``CachedMessage.payload``): the subscription frames them as one block.
    payloads: list[bytes] | None = None


@dataclass(eq=False, slots=True)
class Receiver:
    queue: asyncio.Queue[Delivery]
    # Python predicate over a streamed row (text-protocol bytes); None takes everything.
    accepts: Callable[[Row], bool] | None = None
    # The same predicate as SQL, pushed into the poller when every receiver has one.
    predicate_sql: str | None = None
    busy: bool = False
    closed: bool = False
    on_free: list[Callable[[], None]] = field(default_factory=list)

    def takes(self, row: Row) -> bool:
        return self.accepts is None or self.accepts(row)

    def offer(self, result: Result) -> None:
        self.queue.put_nowait(Delivery(self, result=result))

    def offer_payloads(self, payloads: list[bytes]) -> None:
        """A batch whose rows were all encoded once (``CachedMessage.payload``)."""
        self.queue.put_nowait(Delivery(self, payloads=payloads))

    def end(self, error: ProxyError) -> None:
        """The manager stops serving this receiver (table dropped or changed, shutdown)."""
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(Delivery(self, error=error))

    def free(self) -> None:
        """The client has taken the last batch: the manager may send the next one."""
        self.busy = False
        for callback in self.on_free:
            callback()
