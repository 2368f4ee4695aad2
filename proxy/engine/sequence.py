"""Sequences: ids from ``vitess_sequence`` tables, reserved in blocks.

A sequence table (unsharded keyspace) has one row ``id = 0`` with ``next_id`` (the
next id to hand out) and ``cache`` (the block size). ``SequenceAllocator`` reserves
``max(cache, n)`` ids at a time with ONE autocommit statement::

    UPDATE seq SET next_id = LAST_INSERT_ID(next_id + <block>) WHERE id = 0

whose OK packet's last-insert-id is the new ``next_id`` (the block's end), so two
proxies reserving at once get disjoint blocks without a transaction or a lock held
across round trips. Ids are served from the block in memory until it runs out.

The VCursor's ``next_sequence_values(keyspace, table, count)`` delegates here, passing
``run_autocommit(sql) -> Result`` that runs a statement on the sequence's shard
outside the session's transaction (a reservation must not roll back with it).
The ``SequenceNext`` primitive (``SELECT NEXT n VALUES FROM seq``) calls the VCursor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

from mysql_mimic.types import ColumnType

from proxy.engine.result import Result, local_result
from proxy.engine.vcursor import VCursor
from proxy.errors import ER_UNKNOWN_ERROR, ProxyError
from rewriter.nodes import SequenceNext
from sqltext.quoting import quote_identifier

RunSQL = Callable[[str], Awaitable[Result]]
logger = logging.getLogger(__name__)


class SequenceAllocator:
    """Per-process cache of reserved id blocks, one per sequence table."""

    def __init__(self) -> None:
        self._blocks: dict[tuple[str, str], tuple[int, int]] = {}  # next, end (exclusive)
        self._cache_sizes: dict[tuple[str, str], int] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def forget(self, keyspace: str, table: str) -> None:
        """Drop a cached block (e.g. after the sequence row was reset by hand)."""
        self._blocks.pop((keyspace, table), None)
        self._cache_sizes.pop((keyspace, table), None)

    async def next_values(self, keyspace: str, table: str, count: int, run_autocommit: RunSQL) -> int:
        """Reserve ``count`` consecutive ids; returns the first."""
        if count < 1:
            raise ProxyError(ER_UNKNOWN_ERROR, f"VT13001: sequence {table}: number of values must be positive, got {count}")
        key = (keyspace, table)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            nxt, end = self._blocks.get(key, (0, 0))
            if end - nxt >= count:
                self._blocks[key] = (nxt + count, end)
                return nxt
            cache = self._cache_sizes.get(key)
            if cache is None:
                res = await run_autocommit(f"select cache from {quote_identifier(table)} where id = 0")
                if not res.rows:
                    raise ProxyError(ER_UNKNOWN_ERROR, f"VT13001: sequence table {keyspace}.{table} has no row with id 0")
                raw = res.rows[0][0]
                cache = int(raw) if raw is not None else 1
                self._cache_sizes[key] = max(cache, 1)
            # ids left in the current block are not contiguous with a new one: drop them
            block = max(cache, count)
            res = await run_autocommit(
                f"update {quote_identifier(table)} set next_id = last_insert_id(next_id + {block}) where id = 0"
            )
            if res.affected_rows != 1 or not res.insert_id:
                raise ProxyError(ER_UNKNOWN_ERROR, f"VT13001: could not reserve ids from sequence {keyspace}.{table}")
            new_end = int(res.insert_id)
            start = new_end - block
            self._blocks[key] = (start + count, new_end)
            logger.info("sequence block reserved",
                        extra={"keyspace": keyspace, "table": table, "first": start, "size": block})
            return start


DEFAULT_ALLOCATOR = SequenceAllocator()


async def execute(node: SequenceNext, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    n = int(node.count.resolve(bindvars))
    first = await vcursor.next_sequence_values(node.keyspace, node.table, n)
    return local_result(["nextval"], [[first]], [ColumnType.LONGLONG])


async def stream(node: SequenceNext, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    yield await execute(node, vcursor, bindvars)


__all__ = ["DEFAULT_ALLOCATOR", "SequenceAllocator"]
