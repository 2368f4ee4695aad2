"""The session's ``VCursor``: how engine primitives reach shards.

Inside a transaction every statement runs on the shard connection pinned for it;
outside one each statement borrows a pooled connection (autocommit) and returns it
in a ``finally``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from proxy.engine.result import Result
from proxy.engine.sequence import SequenceAllocator
from proxy.pools import ShardConnection, ShardPools
from proxy.transaction import ShardTransaction

if TYPE_CHECKING:
    from vschema.model import VSchema


class SessionVCursor:
    def __init__(
        self,
        vschema_getter: Callable[[], VSchema],
        pools: ShardPools,
        transaction_getter: Callable[[], ShardTransaction | None],
        sequences: SequenceAllocator,
        settings: Callable[[], Mapping[str, str]] = dict,
    ) -> None:
        self._vschema = vschema_getter
        self.pools = pools
        self._tx = transaction_getter
        self.sequences = sequences
        self.settings = settings
        # The shards the session's current statement reached (the session clears it): whether a
        # write refused at a resharding switch can run again whole (proxy/resharding/write_hold.py).
        self.reached: set[tuple[str, str]] = set()
        # The last statement sent to each shard (never cleared: one entry per shard). For the shards
        # of ``reached``, a committed INSERT into a message table is cached from its rows as each
        # shard ran them (proxy/messaging/inserted.py).
        self.last_sent: dict[tuple[str, str], str] = {}
        # While an own INSERT into a message table runs: (its keyspace, the comment its
        # statements to that keyspace's shards start with; proxy/messaging/own_mark.py).
        self.mark: tuple[str, str] | None = None
        # While an own autocommit INSERT into a message table runs: (its keyspace, what its
        # statement to a shard becomes, given the shard and the statement as marked:
        # ``MessagingService.preclaim``).
        self.preclaim: tuple[str, Callable[[str, str], str]] | None = None

    @property
    def vschema(self) -> VSchema:
        return self._vschema()

    async def execute_shard(self, keyspace: str, shard: str, sql: str) -> Result:
        mark = self.mark
        if mark is not None and mark[0] == keyspace:
            sql = mark[1] + sql
        preclaim = self.preclaim
        if preclaim is not None and preclaim[0] == keyspace:
            sql = preclaim[1](shard, sql)
        self.reached.add((keyspace, shard))
        self.last_sent[(keyspace, shard)] = sql
        tx = self._tx()
        if tx is not None:
            sc = await tx.connection(keyspace, shard)
            return await sc.execute(sql)
        pool = self.pools.get(keyspace, shard)
        async with pool.connection() as sc:
            await sc.apply_settings(self.settings())
            return await sc.execute(sql)

    async def execute_multi(self, keyspace: str, queries: Sequence[tuple[str, str]]) -> list[Result]:
        if len(queries) == 1:
            shard, sql = queries[0]
            return [await self.execute_shard(keyspace, shard, sql)]
        # Every shard's answer is awaited before an error is raised: the caller may roll the
        # statement back on these very connections (an implicit transaction refused by one shard),
        # which must not happen while another shard's query is still in flight on its connection.
        results = await asyncio.gather(*(self.execute_shard(keyspace, s, q) for s, q in queries), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return results  # type: ignore[return-value]  # no exception among them

    async def stream_shard(self, keyspace: str, shard: str, sql: str) -> AsyncGenerator[Result, None]:
        self.reached.add((keyspace, shard))
        self.last_sent[(keyspace, shard)] = sql
        tx = self._tx()
        if tx is not None:
            sc = await tx.connection(keyspace, shard)
            gen = sc.stream(sql, keep_on_abandon=True)
            try:
                async for chunk in gen:
                    yield chunk
            finally:
                await gen.aclose()
            return
        pool = self.pools.get(keyspace, shard)
        sc = await pool.acquire()
        try:
            await sc.apply_settings(self.settings())
            gen = sc.stream(sql)
            try:
                async for chunk in gen:
                    yield chunk
            finally:
                await gen.aclose()
        finally:
            pool.release(sc)

    @property
    def in_transaction(self) -> bool:
        return self._tx() is not None

    @asynccontextmanager
    async def scratch(self, keyspace: str, shard: str) -> AsyncIterator[ShardConnection]:
        self.reached.add((keyspace, shard))
        self.last_sent[(keyspace, shard)] = ""  # its statements are not known here
        pool = self.pools.get(keyspace, shard)
        async with pool.connection() as sc:
            await sc.apply_settings(self.settings())
            yield sc

    async def next_sequence_values(self, keyspace: str, table: str, count: int) -> int:
        shard = self.vschema.shards(keyspace)[0]
        pool = self.pools.get(keyspace, shard)

        async def run_autocommit(sql: str) -> Result:
            # A reservation must not roll back with the session's transaction.
            async with pool.connection() as sc:
                return await sc.execute(sql)

        return await self.sequences.next_values(keyspace, table, count, run_autocommit)
