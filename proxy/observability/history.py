"""QPS and latency of the last minutes, for the status page's chart.

Sampled from the statement latency histogram every ``interval`` seconds (the group's,
under ``--workers``: the same merged figures a scrape reads), so each point is what the
whole proxy did in that interval: statements per second, mean and 99th percentile latency.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from proxy.observability.figures import Figures, quantile

DURATION = "shardgate_query_duration_seconds"


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    at: float  # end of the interval, epoch seconds
    qps: float
    mean_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True, slots=True)
class _Reading:
    at: float
    count: float
    total_seconds: float
    buckets: tuple[tuple[float, float], ...]


class QueryHistory:
    def __init__(self, interval: float = 10.0, minutes: int = 15) -> None:
        self.interval = interval
        self.points: deque[HistoryPoint] = deque(maxlen=int(minutes * 60 / interval))
        self._last: _Reading | None = None

    def sample(self, figures: Figures, now: float) -> None:
        reading = _Reading(
            now,
            figures.total(DURATION, DURATION + "_count"),
            figures.total(DURATION, DURATION + "_sum"),
            tuple(figures.histogram_buckets(DURATION)),
        )
        last, self._last = self._last, reading
        if last is None or reading.at <= last.at or reading.count < last.count:
            return  # the first reading, or a worker's figures went away: no interval to show
        n = reading.count - last.count
        seconds = reading.at - last.at
        mean = (reading.total_seconds - last.total_seconds) / n * 1000 if n else None
        before = dict(last.buckets)
        delta = [(le, count - before.get(le, 0.0)) for le, count in reading.buckets]
        p99 = quantile(delta, 0.99) if n else None
        self.points.append(HistoryPoint(now, n / seconds, mean, p99 * 1000 if p99 is not None else None))
