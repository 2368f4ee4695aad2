"""The CDC streams this process serves (``VSTREAM`` statements), with per-shard figures:
events read, bytes sent, and how far each is behind its shard's binlog head.

``proxy.vstream_statement`` opens one ``StreamFigures`` per statement and tells it about
every delivered group; the state sampler measures the lag once a second from the shard's
``@@gtid_binlog_pos`` (the head) and the stream's reader position (what it has read).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy.observability import metrics

ShardKey = tuple[str, str]


class PositionedReader(Protocol):
    @property
    def position(self) -> Any: ...  # a proxy.cdc.positions.GtidPosition


class ReadersOwner(Protocol):
    @property
    def readers(self) -> Mapping[ShardKey, PositionedReader]: ...


@dataclass
class ShardStreamFigures:
    events: int = 0
    bytes: int = 0
    last_commit_time: float = 0.0  # of the last transaction delivered from the shard
    lag_seconds: float = 0.0
    lag_transactions: int = 0
    children: tuple[Any, Any] | None = None  # (events, bytes) Prometheus children


@dataclass
class StreamFigures:
    id: int
    table: str
    stream: ReadersOwner
    opened: float = field(default_factory=time.time)
    shards: dict[ShardKey, ShardStreamFigures] = field(default_factory=dict)

    def delivered(self, keyspace: str, shard: str, events: int, nbytes: int, commit_time: float) -> None:
        """A transaction (or heartbeat) of ``keyspace/shard`` went to the client."""
        fig = self.shards.get((keyspace, shard))
        if fig is None:
            fig = self.shards[(keyspace, shard)] = ShardStreamFigures()
        if fig.children is None:
            fig.children = (metrics.CDC_EVENTS.labels(self.table, keyspace, shard),
                            metrics.CDC_BYTES.labels(self.table, keyspace, shard))
        fig.events += events
        fig.bytes += nbytes
        if commit_time:
            fig.last_commit_time = commit_time
        fig.children[0].inc(events)
        if nbytes:
            fig.children[1].inc(nbytes)

    def shard(self, key: ShardKey) -> ShardStreamFigures:
        fig = self.shards.get(key)
        if fig is None:
            fig = self.shards[key] = ShardStreamFigures()
        return fig


class CdcStreams:
    def __init__(self) -> None:
        self.open_streams: dict[int, StreamFigures] = {}
        self._ids = itertools.count(1)

    def open(self, table: str, stream: ReadersOwner) -> StreamFigures:
        figures = StreamFigures(next(self._ids), table, stream)
        self.open_streams[figures.id] = figures
        metrics.CDC_STREAMS_OPEN.labels(table).inc()
        return figures

    def close(self, figures: StreamFigures) -> None:
        if self.open_streams.pop(figures.id, None) is not None:
            metrics.CDC_STREAMS_OPEN.labels(figures.table).dec()
            for keyspace, shard in figures.shards:
                # a stream that is gone is not behind: its lag series fall back to 0
                metrics.CDC_LAG_SECONDS.labels(figures.table, keyspace, shard).set(0)
                metrics.CDC_LAG_TRANSACTIONS.labels(figures.table, keyspace, shard).set(0)


CDC_STREAMS = CdcStreams()
