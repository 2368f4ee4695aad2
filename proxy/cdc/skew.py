"""Skew minimization: keep the shards of a stream aligned in commit time.

Each shard reports the commit time of the transaction it is about to deliver (and, from
heartbeats, the time up to which it has nothing more). A shard whose next transaction is
more than ``max_skew`` seconds ahead of the *lowest* time among the shards is held until
the gap closes. The laggard (the lowest) therefore never waits, and heartbeats never wait:
they only move their shard's time forward. A hold longer than ``max_hold`` ends the
stream with ``SkewHoldTimeoutError``. Until every shard of the stream has reported a time,
the lowest time is unknown and shards that report are held (a shard that has not reported
may be the furthest behind); each shard reports within a heartbeat period of starting.

Differences from Vitess, on purpose: Vitess declares one skew at a time against the
laggard and also compares with a "lowest timestamp" that is never set, so every stream
but the laggard pauses whenever any skew is declared; here each shard is compared with
the real lowest time, so a shard within ``max_skew`` of the laggard keeps flowing. Times
are sub-second estimates of commit time on this host's clock (see ``binlog_decoder``),
not Vitess's whole-second binlog timestamps.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Hashable, Iterable

from proxy.cdc.errors import SkewHoldTimeoutError

logger = logging.getLogger(__name__)

DEFAULT_MAX_SKEW = 2.0
DEFAULT_MAX_HOLD = 600.0


class SkewAligner:
    def __init__(
        self,
        streams: Iterable[Hashable],
        max_skew: float = DEFAULT_MAX_SKEW,
        max_hold: float = DEFAULT_MAX_HOLD,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_skew = max_skew
        self.max_hold = max_hold
        self._monotonic = monotonic
        self._streams = frozenset(streams)
        self._times: dict[Hashable, float] = {}
        self._unreported = set(self._streams)
        self._changed = asyncio.Event()
        self._waiting = 0
        self.holds = 0
        self.longest_hold = 0.0

    def time_of(self, stream: Hashable) -> float | None:
        return self._times.get(stream)

    def lowest(self) -> float:
        """The lowest time of all streams; -inf while some stream has not reported."""
        if self._unreported or not self._times:
            return -math.inf
        return min(self._times.values())

    def replace_streams(self, removed: Iterable[Hashable], added: Iterable[Hashable]) -> None:
        """Streams ended and began (a resharding switch moved the stream to new shards): the
        ended ones hold nobody back any more, the new ones count once they report."""
        removed, added = set(removed), set(added)
        self._streams = (self._streams - removed) | added
        for stream in removed:
            self._times.pop(stream, None)
        self._unreported = (self._unreported - removed) | added
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def update(self, stream: Hashable, event_time: float) -> None:
        """Record ``stream``'s time without waiting (heartbeats)."""
        self._times[stream] = event_time
        if self._unreported:
            self._unreported.discard(stream)
        if self._waiting:
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()

    async def wait_for_turn(
        self, stream: Hashable, event_time: float, name: tuple[str, str] = ("", "")
    ) -> None:
        """Record ``stream``'s time and return once it is within ``max_skew`` of the
        lowest time; raises SkewHoldTimeoutError after ``max_hold`` seconds held."""
        self.update(stream, event_time)
        if len(self._streams) < 2 or event_time - self.lowest() <= self.max_skew:
            return
        started = self._monotonic()
        self.holds += 1
        logger.debug(
            "holding shard for skew",
            extra={
                "keyspace": name[0],
                "shard": name[1],
                "ahead_s": round(event_time - self.lowest(), 3),
            },
        )
        try:
            while event_time - self.lowest() > self.max_skew:
                remaining = started + self.max_hold - self._monotonic()
                if remaining <= 0:
                    raise SkewHoldTimeoutError(name[0], name[1], self._monotonic() - started)
                changed = self._changed
                self._waiting += 1
                try:
                    async with asyncio.timeout(remaining):
                        await changed.wait()
                except TimeoutError:
                    continue  # re-checked above: raises once the hold is too long
                finally:
                    self._waiting -= 1
        finally:
            self.longest_hold = max(self.longest_hold, self._monotonic() - started)
