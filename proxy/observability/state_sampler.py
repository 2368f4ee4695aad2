"""Figures that are state, read from the proxy into the metrics: once a second and before a
scrape. Under ``--workers`` each worker writes its own, and a scrape sums them.

Read here, not hooked into the code that changes them: shard pools, the plan cache,
client sessions and their transactions, message tables (the counters of ``SHOW
VITESS_MESSAGES``), 2PC counters, and the lag of the CDC streams behind their shards.
Plain counters kept elsewhere (plan cache hits, pool waits, messages sent...) become
Prometheus counters by what they grew since the last sample.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from proxy import twopc
from proxy.cdc.positions import GtidPosition
from proxy.errors import ProxyError
from proxy.observability import metrics
from proxy.observability.cdc_streams import CDC_STREAMS, CdcStreams
from proxy.observability.metrics import add_to_counter
from rewriter import DEFAULT_CACHE

if TYPE_CHECKING:
    from proxy.cluster_state import ClusterState
    from proxy.session import ProxySession

logger = logging.getLogger(__name__)

MESSAGE_EVENTS = ("sent", "acked", "delayed", "parked", "purged")
TOPIC_EVENTS = ("passes", "sequenced", "direct", "batches", "batched", "fed")


def transactions_behind(head: GtidPosition, position: GtidPosition) -> int:
    """Transactions in ``head`` that ``position`` has not reached, over every GTID domain."""
    read = {g.domain: g.seq for g in position}
    return sum(max(0, g.seq - read.get(g.domain, 0)) for g in head)


class StateSampler:
    def __init__(self, proxy: ClusterState, sessions: Iterable[ProxySession], cdc: CdcStreams = CDC_STREAMS) -> None:
        self.proxy = proxy
        self.sessions = sessions
        self.cdc = cdc
        self._last: dict[str, dict[Any, float]] = {}
        self._pool_keys: set[tuple[str, str]] = set()

    def _counter(self, counter: Any, labels: tuple[str, ...], value: float) -> None:
        add_to_counter(counter, self._last.setdefault(counter._name, {}), labels, value)

    def sample(self) -> None:
        """Everything that needs no I/O."""
        self._pools()
        self._plan_cache()
        self._sessions()
        self._messaging()
        self._topics()
        self._twopc()

    def _pools(self) -> None:
        pools = self.proxy.pools.pools
        # A shard retired by a resharding switch has no pool any more: 0, not a frozen last value
        # (set, not removed: multi-process metrics cannot remove a series).
        for keyspace, shard in self._pool_keys - set(pools):
            for gauge in (metrics.POOL_CAPACITY, metrics.POOL_SIZE, metrics.POOL_IN_USE, metrics.POOL_WAITERS):
                gauge.labels(keyspace, shard).set(0)
        self._pool_keys = set(pools)
        for (keyspace, shard), pool in pools.items():
            inner = pool._pool
            size = inner.size if inner is not None else 0
            free = inner.freesize if inner is not None else 0
            metrics.POOL_CAPACITY.labels(keyspace, shard).set(pool.maxsize)
            metrics.POOL_SIZE.labels(keyspace, shard).set(size)
            metrics.POOL_IN_USE.labels(keyspace, shard).set(size - free)
            metrics.POOL_WAITERS.labels(keyspace, shard).set(pool.waiting)
            self._counter(metrics.POOL_ACQUIRES, (keyspace, shard), pool.acquires)
            self._counter(metrics.POOL_WAITS, (keyspace, shard), pool.waits)
            self._counter(metrics.POOL_WAIT_SECONDS, (keyspace, shard), pool.wait_seconds)
        for (keyspace, shard), links in self.proxy.fast_links.links.items():
            metrics.FAST_PATH_LINKS.labels(keyspace, shard).set(links.open)
            self._counter(metrics.FAST_PATH_STATEMENTS, (keyspace, shard), links.served)

    def _plan_cache(self) -> None:
        self._counter(metrics.PLAN_CACHE_HITS, (), DEFAULT_CACHE.hits)
        self._counter(metrics.PLAN_CACHE_MISSES, (), DEFAULT_CACHE.misses)
        metrics.PLAN_CACHE_SIZE.set(len(DEFAULT_CACHE))

    def _sessions(self) -> None:
        sessions = list(self.sessions)
        metrics.CLIENT_CONNECTIONS.set(len(sessions))
        metrics.TRANSACTIONS_OPEN.set(sum(1 for s in sessions if s.tx is not None))

    def _messaging(self) -> None:
        service = self.proxy.messaging
        for (keyspace, shard, name), m in list(service.managers.items()):
            labels = (keyspace, shard, name)
            metrics.MESSAGES_QUEUED.labels(*labels).set(len(m.cache))
            metrics.MESSAGES_IN_FLIGHT.labels(*labels).set(m.in_flight)
            metrics.MESSAGE_SUBSCRIBERS.labels(*labels).set(len(m.receivers))
            c = m.counters
            for event in MESSAGE_EVENTS:
                self._counter(metrics.MESSAGES, (*labels, event), getattr(c, event))

    def _topics(self) -> None:
        last = self._last.setdefault(metrics.TOPIC_EVENTS._name, {})
        for (keyspace, name), rt in list(self.proxy.topics.runtimes.items()):
            for event in TOPIC_EVENTS:
                labels = (keyspace, name, event)
                value = getattr(rt.counters, event)
                if value < last.get(labels, 0.0):
                    last[labels] = 0.0  # a re-created topic's runtime counts from 0 again
                self._counter(metrics.TOPIC_EVENTS, labels, value)

    def _twopc(self) -> None:
        counters = twopc.manager_for(self.proxy).counters.snapshot()
        in_doubt = counters.pop("in_doubt", 0)
        metrics.TWOPC_IN_DOUBT.set(in_doubt)
        for event, value in counters.items():
            self._counter(metrics.TWOPC_EVENTS, (event,), value)

    async def sample_cdc_lag(self) -> None:
        """How far each open VSTREAM is behind its shards' binlog heads: one
        ``@@gtid_binlog_pos`` per shard streamed from, on a pooled connection."""
        streams = list(self.cdc.open_streams.values())
        if not streams:
            return
        heads: dict[tuple[str, str], GtidPosition] = {}
        for key in sorted({key for s in streams for key in s.stream.readers}):
            try:
                async with self.proxy.pools.get(*key).connection() as sc:
                    res = await sc.execute("select @@gtid_binlog_pos")
                heads[key] = GtidPosition.parse((res.rows[0][0] or b"").decode())
            except ProxyError as e:
                logger.info("cdc lag: binlog head unknown", extra={"keyspace": key[0], "shard": key[1],
                                                                    "error": e.message})
        now = time.time()
        worst: dict[tuple[str, str, str], tuple[float, int]] = {}
        for s in streams:
            for key, reader in list(s.stream.readers.items()):
                head = heads.get(key)
                if head is None:
                    continue
                fig = s.shard(key)
                behind = transactions_behind(head, reader.position)
                since = fig.last_commit_time or s.opened
                fig.lag_transactions = behind
                fig.lag_seconds = max(0.0, now - since) if behind else 0.0
                labels = (s.table, *key)
                seconds, txns = worst.get(labels, (0.0, 0))
                worst[labels] = (max(seconds, fig.lag_seconds), max(txns, behind))
        for labels, (seconds, txns) in worst.items():
            metrics.CDC_LAG_SECONDS.labels(*labels).set(seconds)
            metrics.CDC_LAG_TRANSACTIONS.labels(*labels).set(txns)
