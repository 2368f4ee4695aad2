"""What an engine primitive may ask of the session that runs it.

Mirrors Vitess's ``engine.VCursor``: primitives never touch pools or sockets; the
session's ``proxy.vcursor.SessionVCursor`` implements this protocol (pinning shard
connections inside a transaction, autocommit outside one), so every primitive can be
exercised alone against real shards with a small implementation of it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

from proxy.engine.result import Result

if TYPE_CHECKING:
    from vschema.model import VSchema


class ScratchConnection(Protocol):
    broken: bool

    async def execute(self, sql: str) -> Result: ...

    def stream(self, sql: str) -> AsyncGenerator[Result, None]: ...


class VCursor(Protocol):
    @property
    def vschema(self) -> VSchema: ...

    async def execute_shard(self, keyspace: str, shard: str, sql: str) -> Result:
        """Run one statement on one shard (inside the session's transaction when one
        is open) and return its whole result. Errors are raised as
        ``proxy.errors.ShardError`` carrying the MySQL code and naming the shard."""
        ...

    async def execute_multi(
        self, keyspace: str, queries: Sequence[tuple[str, str]]
    ) -> list[Result]:
        """Run ``(shard, sql)`` pairs concurrently; results in the same order."""
        ...

    def stream_shard(self, keyspace: str, shard: str, sql: str) -> AsyncGenerator[Result, None]:
        """Stream one statement's result: the first chunk has ``fields`` (and maybe
        rows), later chunks rows only. Closing the iterator early releases the
        shard connection at once."""
        ...

    @property
    def in_transaction(self) -> bool:
        """Whether statements run inside the session's open transaction."""
        ...

    def scratch(self, keyspace: str, shard: str) -> AbstractAsyncContextManager[ScratchConnection]:
        """A connection of the shard's own, outside the session's transaction, with the
        session's settings (for temporary tables); returned to its pool on exit."""
        ...

    async def next_sequence_values(self, keyspace: str, table: str, count: int) -> int:
        """Reserve ``count`` ids from a ``vitess_sequence`` table; returns the first."""
        ...
