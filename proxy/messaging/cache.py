"""The in-memory message cache of one manager: a bounded heap plus an in-flight set.

Order is Vitess's: ``priority`` ascending, then ``time_next`` descending (within a priority
the newest due message goes first). Adding an id already queued or in flight is a silent
no-op; a popped id stays "in flight" until the manager has claimed (postponed) it, so a
concurrent poll cannot queue it again. Beyond Vitess, an acked id is dropped from the queue.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter

from proxy.engine.result import Row


@dataclass(slots=True)
class CachedMessage:
    id: bytes
    priority: int
    time_next: int | None
    epoch: int
    row: Row  # the streamed columns, text-protocol bytes
    # ``row`` as the payload of a text-protocol row packet, encoded once when the message is
    # cached from an INSERT's values (``proxy.messaging.rows``); None: encoded when sent.
    payload: bytes | None = field(default=None, compare=False, repr=False)
    # Claimed as it was inserted (the INSERT wrote the claim's epoch and this ``time_next``,
    # ``MessageManager.preclaim``): sent without a claim while well before that time; 0: not.
    claimed_until: int = field(default=0, compare=False)


# A heap entry: a run of messages of one priority and time_next, in order: (key, ids, messages).
# The key is (priority, -time_next, seq) of the run's first message; a run's messages take
# consecutive sequence numbers from its key's on (message i: key seq + i), so runs never
# interleave and the heap orders runs, not messages. A commit's 50-row INSERT is one run:
# pushed, popped and checked at C speed (``map``, set operations), where a heap entry and a
# Python step per message were a third of the manager's CPU per message (BENCHMARKS.md,
# msgproxy).
_Run = tuple[tuple[int, int, int], list[bytes], list[CachedMessage]]
_PRIORITY_AND_TIME = attrgetter("priority", "time_next")


def _key(first: CachedMessage, seq: int) -> tuple[int, int, int]:
    """A run's heap key: Vitess's order (priority, then the latest time_next first), then
    the cache's arrival order."""
    return (first.priority, -(first.time_next or 0), seq)


_ID = attrgetter("id")


def _disjoint(skip: Container[bytes], ids: list[bytes]) -> bool:
    if isinstance(skip, dict):
        return skip.keys().isdisjoint(ids)
    if isinstance(skip, (set, frozenset)):
        return skip.isdisjoint(ids)
    return not any(i in skip for i in ids)


class MessageCache:
    def __init__(self, size: int) -> None:
        self.size = max(size, 1)
        self._heap: list[_Run] = []
        self._heaped = 0  # messages in the heap's runs, live or not
        self._queued: dict[bytes, CachedMessage] = {}
        self._in_flight: set[bytes] = set()
        self._seq = 0

    def __len__(self) -> int:
        return len(self._queued)

    @property
    def in_flight(self) -> frozenset[bytes]:
        return frozenset(self._in_flight)

    def contains(self, message_id: bytes) -> bool:
        return message_id in self._queued or message_id in self._in_flight

    def holds_any(self, ids: list[bytes]) -> bool:
        """Whether any of ``ids`` is queued or being claimed (at C speed)."""
        return not (self._queued.keys().isdisjoint(ids) and self._in_flight.isdisjoint(ids))

    def _push(self, msg: CachedMessage) -> None:
        seq = self._seq
        self._seq = seq + 1
        self._queued[msg.id] = msg
        heapq.heappush(self._heap, (_key(msg, seq), [msg.id], [msg]))
        self._heaped += 1

    def add(self, msg: CachedMessage) -> bool:
        """False only when the cache is full; a known id is accepted and ignored."""
        if self.contains(msg.id):
            return True
        if len(self._queued) >= self.size:
            return False
        self._push(msg)
        return True

    def add_new(self, msgs: Iterable[CachedMessage], skip: Container[bytes], *, beyond_size: bool = False) -> bool:
        """``add`` for each message whose id is not in ``skip``. The usual call, a commit's
        messages all new and of one priority and time_next, goes in as one run. False when the
        cache filled before the last was added; ``beyond_size``: added even then (messages
        already claimed on the shard, which no poll would read before their ack wait ends)."""
        msgs = msgs if isinstance(msgs, list) else list(msgs)
        if not msgs:
            return True
        queued = self._queued
        ids = list(map(_ID, msgs))
        if (
            (beyond_size or len(ids) <= self.size - len(queued))
            and queued.keys().isdisjoint(ids)
            and self._in_flight.isdisjoint(ids)
            and _disjoint(skip, ids)
            and len(set(map(_PRIORITY_AND_TIME, msgs))) == 1
            and len(set(ids)) == len(ids)
        ):
            first = msgs[0]
            seq = self._seq
            self._seq = seq + len(ids)
            queued.update(zip(ids, msgs, strict=True))
            heapq.heappush(self._heap, (_key(first, seq), ids, msgs))
            self._heaped += len(ids)
            return True
        in_flight = self._in_flight
        for msg in msgs:
            mid = msg.id
            if mid in queued or mid in in_flight or mid in skip:
                continue
            if len(queued) >= self.size and not beyond_size:
                return False
            self._push(msg)
        return True

    def pop(self, limit: int, accept: Callable[[CachedMessage], bool] | None = None) -> list[CachedMessage]:
        """Up to ``limit`` messages in order (those ``accept`` takes), moved to in flight."""
        if accept is not None:
            return self._pop_accepted(limit, accept)
        taken: list[CachedMessage] = []
        heap, queued, in_flight = self._heap, self._queued, self._in_flight
        while heap and len(taken) < limit:
            key, ids, msgs = heap[0]
            need = limit - len(taken)
            if len(ids) <= need:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, ((key[0], key[1], key[2] + need), ids[need:], msgs[need:]))
                ids, msgs = ids[:need], msgs[:need]
            self._heaped -= len(ids)
            got = list(map(queued.pop, ids, repeat(None, len(ids))))
            if got == msgs:  # all still queued (list equality tests identity first)
                in_flight.update(ids)
                taken.extend(msgs)
                continue
            for mid, msg, was in zip(ids, msgs, got, strict=True):
                if was is msg:
                    in_flight.add(mid)
                    taken.append(msg)
                elif was is not None:
                    queued[mid] = was  # another message of that id is queued (its own run): kept
        return taken

    def _pop_accepted(self, limit: int, accept: Callable[[CachedMessage], bool]) -> list[CachedMessage]:
        taken: list[CachedMessage] = []
        skipped: list[_Run] = []
        heap, queued = self._heap, self._queued
        while heap and len(taken) < limit:
            key, ids, msgs = heapq.heappop(heap)
            self._heaped -= len(ids)
            for i, (mid, msg) in enumerate(zip(ids, msgs, strict=True)):
                if len(taken) >= limit:
                    heapq.heappush(heap, ((key[0], key[1], key[2] + i), ids[i:], msgs[i:]))
                    self._heaped += len(ids) - i
                    break
                if queued.get(mid) is not msg:
                    continue
                if accept(msg):
                    del queued[mid]
                    self._in_flight.add(mid)
                    taken.append(msg)
                else:
                    skipped.append(((key[0], key[1], key[2] + i), [mid], [msg]))
        for run in skipped:  # still queued: back in the heap at their places
            heapq.heappush(heap, run)
            self._heaped += 1
        return taken

    def peek_any(self, accept: Callable[[CachedMessage], bool]) -> bool:
        """Whether some queued message would be accepted (without popping)."""
        return any(accept(m) for m in self._queued.values())

    def release(self, ids: list[bytes]) -> None:
        """The claim of popped ids finished: they may be queued again by a later poll."""
        self._in_flight.difference_update(ids)

    def discard(self, ids: list[bytes]) -> int:
        """Drop queued ids (acked meanwhile); returns how many were queued."""
        queued = self._queued
        if queued.keys().isdisjoint(ids):
            return 0  # as a rule: acked messages were sent, not queued (or of another shard)
        dropped = len(ids) - list(map(queued.pop, ids, repeat(None, len(ids)))).count(None)
        if dropped and self._heaped > 2 * len(queued) + 64:
            runs: list[_Run] = []
            for key, run_ids, msgs in self._heap:
                live = [i for i, (mid, msg) in enumerate(zip(run_ids, msgs, strict=True)) if queued.get(mid) is msg]
                if live:
                    # The key's seq stays: the run's messages keep their order inside its range.
                    runs.append((key, [run_ids[i] for i in live], [msgs[i] for i in live]))
            heapq.heapify(runs)
            self._heap = runs
            self._heaped = sum(len(r[1]) for r in runs)
        return dropped

    def claimed_ahead(self) -> list[CachedMessage]:
        """The queued messages their INSERT wrote already claimed (``claimed_until`` set)."""
        return [m for m in self._queued.values() if m.claimed_until]

    def clear(self) -> None:
        self._heap.clear()
        self._heaped = 0
        self._queued.clear()
