"""The in-memory message cache of one manager: a bounded heap plus an in-flight set.

Order is Vitess's: ``priority`` ascending, then ``time_next`` descending (within a priority
the newest due message goes first). Adding an id already queued or in flight is a silent
no-op; a popped id stays "in flight" until the manager has claimed (postponed) it, so a
concurrent poll cannot queue it again. Beyond Vitess, an acked id is dropped from the queue.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field

from proxy.engine.result import Row


@dataclass(slots=True)
class CachedMessage:
    id: bytes
    priority: int
    time_next: int | None
    epoch: int
    row: Row  # the streamed columns, text-protocol bytes
    seq: int = field(default=0, compare=False)

    def sort_key(self) -> tuple[int, int, int]:
        return (self.priority, -(self.time_next or 0), self.seq)


class MessageCache:
    def __init__(self, size: int) -> None:
        self.size = max(size, 1)
        self._heap: list[tuple[tuple[int, int, int], CachedMessage]] = []
        self._queued: dict[bytes, CachedMessage] = {}
        self._in_flight: set[bytes] = set()
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._queued)

    @property
    def in_flight(self) -> frozenset[bytes]:
        return frozenset(self._in_flight)

    def contains(self, message_id: bytes) -> bool:
        return message_id in self._queued or message_id in self._in_flight

    def add(self, msg: CachedMessage) -> bool:
        """False only when the cache is full; a known id is accepted and ignored."""
        if self.contains(msg.id):
            return True
        if len(self._queued) >= self.size:
            return False
        msg.seq = next(self._seq)
        self._queued[msg.id] = msg
        heapq.heappush(self._heap, (msg.sort_key(), msg))
        return True

    def add_new(self, msgs: Iterable[CachedMessage], skip: Container[bytes]) -> bool:
        """``add`` for each message whose id is not in ``skip``, inline: a commit caches its
        50-row INSERT's messages at once, and a call per message (``contains``, ``sort_key``)
        was a third of the cost. False when the cache filled before the last was added."""
        queued, in_flight, heap, seq = self._queued, self._in_flight, self._heap, self._seq
        room = self.size - len(queued)
        push = heapq.heappush
        for msg in msgs:
            mid = msg.id
            if mid in queued or mid in in_flight or mid in skip:
                continue
            if room <= 0:
                return False
            room -= 1
            msg.seq = n = next(seq)
            queued[mid] = msg
            push(heap, ((msg.priority, -(msg.time_next or 0), n), msg))
        return True

    def _pop_live(self) -> CachedMessage | None:
        while self._heap:
            _, msg = heapq.heappop(self._heap)
            if self._queued.get(msg.id) is msg:
                del self._queued[msg.id]
                return msg
        return None

    def pop(self, limit: int, accept: Callable[[CachedMessage], bool] | None = None) -> list[CachedMessage]:
        """Up to ``limit`` messages in order (those ``accept`` takes), moved to in flight."""
        taken: list[CachedMessage] = []
        if accept is None:
            # Every message goes: the loop of _pop_live inline (a method call per message).
            heap, queued, in_flight, heappop = self._heap, self._queued, self._in_flight, heapq.heappop
            while heap and len(taken) < limit:
                _, head = heappop(heap)
                if queued.get(head.id) is head:
                    del queued[head.id]
                    in_flight.add(head.id)
                    taken.append(head)
            return taken
        skipped: list[CachedMessage] = []
        while len(taken) < limit:
            msg = self._pop_live()
            if msg is None:
                break
            if accept is not None and not accept(msg):
                skipped.append(msg)
                continue
            self._in_flight.add(msg.id)
            taken.append(msg)
        for msg in skipped:
            self._queued[msg.id] = msg
            heapq.heappush(self._heap, (msg.sort_key(), msg))
        return taken

    def peek_any(self, accept: Callable[[CachedMessage], bool]) -> bool:
        """Whether some queued message would be accepted (without popping)."""
        return any(accept(m) for m in self._queued.values())

    def release(self, ids: list[bytes]) -> None:
        """The claim of popped ids finished: they may be queued again by a later poll."""
        self._in_flight.difference_update(ids)

    def discard(self, ids: list[bytes]) -> int:
        """Drop queued ids (acked meanwhile); returns how many were queued."""
        dropped = 0
        for i in ids:
            if self._queued.pop(i, None) is not None:
                dropped += 1
        if dropped and len(self._heap) > 2 * len(self._queued) + 64:
            self._heap = [(k, m) for k, m in self._heap if self._queued.get(m.id) is m]
            heapq.heapify(self._heap)
        return dropped

    def clear(self) -> None:
        self._heap.clear()
        self._queued.clear()
