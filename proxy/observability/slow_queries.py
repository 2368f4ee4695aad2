"""The slowest recent statements of this process, for the status page.

Kept per minute: the ``keep`` slowest statements of each of the last ``minutes``
minutes. A statement is offered only when it is slower than ``floor`` (the fastest kept
this minute once the minute's list is full), so the query path pays one float compare.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

SQL_CHARS = 500


@dataclass(frozen=True, slots=True)
class SlowQuery:
    seconds: float
    at: float  # epoch seconds
    sql: str
    statement: str
    plan: str
    keyspace: str
    rows: int
    failed: bool

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class SlowQueries:
    def __init__(self, keep: int = 20, minutes: int = 10) -> None:
        self.keep = keep
        self.floor = 0.0
        self._minute = 0
        self._current: list[tuple[float, int, SlowQuery]] = []  # min-heap on seconds
        self._past: deque[list[SlowQuery]] = deque(maxlen=minutes - 1)
        self._seq = itertools.count()

    def _roll(self, minute: int) -> None:
        if minute != self._minute:
            if self._current:
                self._past.append([q for _, _, q in self._current])
            self._current = []
            self._minute = minute
            self.floor = 0.0

    def tick(self) -> None:
        """Start a new minute if one began (the floor falls back to 0)."""
        self._roll(int(time.time() // 60))

    def offer(self, seconds: float, sql: str, statement: str, plan: str, keyspace: str, rows: int,
              failed: bool) -> None:
        now = time.time()
        self._roll(int(now // 60))
        entry = (seconds, next(self._seq),
                 SlowQuery(seconds, now, sql[:SQL_CHARS], statement, plan, keyspace, rows, failed))
        if len(self._current) < self.keep:
            heapq.heappush(self._current, entry)
        else:
            heapq.heappushpop(self._current, entry)
        if len(self._current) >= self.keep:
            self.floor = self._current[0][0]

    def slowest(self, limit: int = 20) -> list[SlowQuery]:
        """The slowest statements of the last minutes, slowest first."""
        self.tick()
        everything = [q for _, _, q in self._current]
        for minute in self._past:
            everything.extend(minute)
        return sorted(everything, key=lambda q: q.seconds, reverse=True)[:limit]


SLOW_QUERIES = SlowQueries()
