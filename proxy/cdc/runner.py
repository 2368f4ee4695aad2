"""``shardgate cdc``: stream a cluster's changes as newline-delimited JSON.

``start`` is ``current``, ``beginning``, ``snapshot`` (copy the tables first), a VGTID
JSON, or ``since=<time>`` where time is epoch seconds or ISO-8601
(``since=2026-01-31T12:00:00Z``). ``fmt`` is ``debezium`` (one
envelope per changed row) or ``vstream`` (one object per event, VGTID included). The
function returns the VGTID after the last transaction written, for the CLI to print as
the resume position (None if it stopped during a snapshot's table copy, which cannot be
resumed halfway); it runs until ``stop`` is set (or ``max_rows`` row changes were
written).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Literal, Protocol

from proxy.cdc.binlog_decoder import ShardEndpointLike
from proxy.cdc.debezium import debezium_envelopes
from proxy.cdc.errors import InvalidPositionError
from proxy.cdc.event_json import event_to_json
from proxy.cdc.json_values import dumps
from proxy.cdc.positions import GTID_BEGINNING, GTID_CURRENT, GTID_SNAPSHOT, Vgtid
from proxy.cdc.start_positions import ShardKey
from proxy.cdc.vstream import ShardLocator, VStream

logger = logging.getLogger(__name__)

OutputFormat = Literal["debezium", "vstream"]
SINCE_PREFIX = "since="
# How often run_cdc looks at its stop event while the stream is idle.
_STOP_POLL_SECONDS = 0.25


class TextOut(Protocol):
    def write(self, text: str, /) -> object: ...

    def flush(self) -> object: ...


def parse_start(start: str) -> tuple[str | Vgtid, datetime | float | None]:
    """``(start, since)`` for VStream from the CLI's ``--from`` text."""
    text = start.strip()
    if text in (GTID_CURRENT, GTID_BEGINNING, GTID_SNAPSHOT):
        return text, None
    if text.startswith(SINCE_PREFIX):
        value = text[len(SINCE_PREFIX) :].strip()
        try:
            return GTID_CURRENT, float(value)
        except ValueError:
            pass
        try:
            moment = datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidPositionError(
                f"since= needs epoch seconds or an ISO-8601 time, not {value!r}"
            ) from exc
        if moment.tzinfo is None:
            raise InvalidPositionError(f"since= time needs a time zone (e.g. Z): {value!r}")
        return GTID_CURRENT, moment
    return Vgtid.from_json(text), None


async def serving_endpoints_of(
    config: object, endpoints: Mapping[ShardKey, ShardEndpointLike] | None
) -> tuple[dict[ShardKey, ShardEndpointLike], ShardLocator]:
    """The shards serving now: the stored topology's (a reshard switched), else the cluster
    file's (``endpoints``: the file's shards where the caller has them); and a locator of the
    others (a reshard's sources and targets)."""
    # Imported here: the topology brings the pools and the cluster package, which the CDC core
    # (and its decoder processes) need not load.
    from proxy.resharding.topology import read_topology, serving_endpoints, shard_locator

    serving = serving_endpoints(await read_topology(config, endpoints))  # type: ignore[arg-type]
    return dict(serving), shard_locator(config, endpoints)  # type: ignore[arg-type]


async def run_cdc(
    config: object,
    tables: list[str],
    start: str,
    fmt: OutputFormat,
    out: TextOut,
    *,
    stop: asyncio.Event | None = None,
    minimize_skew: bool = False,
    heartbeat_interval: float = 0.0,
    max_rows: int | None = None,
    endpoints: Mapping[ShardKey, ShardEndpointLike] | None = None,
    include_reshard_journal_events: bool = False,
    stop_on_reshard: bool = False,
) -> Vgtid | None:
    """Write ``tables``' changes to ``out`` as NDJSON until ``stop``; returns the VGTID
    after the last written transaction (the start position if none was written).

    ``config`` is a ``proxy.config.ClusterConfig``; ``endpoints`` overrides its shards. The
    stream reads the shards serving now (the stored topology: proxy/resharding/topology.py)
    and follows a resharding switch to the new shards (the JOURNAL event written with
    ``include_reshard_journal_events``; ``stop_on_reshard`` ends there, the resume position
    then reads the journal again).
    An empty ``tables`` means every table.
    """
    if fmt not in ("debezium", "vstream"):
        raise ValueError(f"unknown CDC output format {fmt!r} (debezium or vstream)")
    start_position, since = parse_start(start)
    shard_endpoints, locate = await serving_endpoints_of(config, endpoints)
    stop = stop if stop is not None else asyncio.Event()
    poll = _STOP_POLL_SECONDS
    if heartbeat_interval > 0:
        poll = min(poll, heartbeat_interval)
    rows_written = 0
    async with VStream(
        shard_endpoints,
        tables or None,
        start=start_position,
        since=since,
        minimize_skew=minimize_skew,
        heartbeat_interval=poll,
        shard_locator=locate,
        include_reshard_journal_events=include_reshard_journal_events,
        stop_on_reshard=stop_on_reshard,
    ) as stream:
        last_heartbeat = asyncio.get_running_loop().time()
        async for group in stream:
            if group.is_heartbeat:
                now = asyncio.get_running_loop().time()
                if heartbeat_interval > 0 and fmt == "vstream":
                    if now - last_heartbeat >= heartbeat_interval:
                        last_heartbeat = now
                        out.write(dumps(event_to_json(group.events[0])) + "\n")
                        out.flush()
                if stop.is_set():
                    break
                continue
            if fmt == "debezium":
                lines = [dumps(envelope) for envelope in debezium_envelopes(group)]
            else:
                lines = [dumps(event_to_json(event)) for event in group.events]
            if lines:
                out.write("\n".join(lines) + "\n")
                out.flush()
            rows_written += group.row_count
            if stop.is_set() or (max_rows is not None and rows_written >= max_rows):
                break
        final = None if stream.copying else stream.vgtid
    logger.info(
        "cdc stopped",
        extra={"vgtid": final.to_json() if final else None, "rows": rows_written},
    )
    return final
