"""Helpers shared by primitives for consuming and producing result streams."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

from proxy.engine.result import Field, Result, Row

CHUNK_ROWS = 500


async def collect(stream: AsyncIterator[Result]) -> Result:
    """A whole result from a stream (fields of the first chunk, all rows, DML counters)."""
    out = Result()
    first = True
    try:
        async for chunk in stream:
            if first:
                out.fields = chunk.fields
                first = False
            out.rows.extend(chunk.rows)
            out.affected_rows += chunk.affected_rows
            out.insert_id = out.insert_id or chunk.insert_id
            out.warnings += chunk.warnings
            if chunk.info:
                out.info = chunk.info
    finally:
        await aclose(stream)
    return out


async def aclose(stream: AsyncIterator[Result]) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


async def from_result(result: Result) -> AsyncGenerator[Result, None]:
    """Stream a complete result in bounded chunks (first chunk carries the fields)."""
    rows = result.rows
    if len(rows) <= CHUNK_ROWS:
        yield result
        return
    yield Result(fields=result.fields, rows=rows[:CHUNK_ROWS], affected_rows=result.affected_rows,
                 insert_id=result.insert_id, info=result.info, warnings=result.warnings)
    for i in range(CHUNK_ROWS, len(rows), CHUNK_ROWS):
        yield Result(rows=rows[i:i + CHUNK_ROWS])


class RowCursor:
    """Row-at-a-time reading of a chunked stream (for merges)."""

    __slots__ = ("stream", "rows", "pos", "fields", "done")

    def __init__(self, stream: AsyncIterator[Result]) -> None:
        self.stream = stream
        self.rows: list[Row] = []
        self.pos = 0
        self.fields: list[Field] = []
        self.done = False

    async def next(self) -> Row | None:
        while self.pos >= len(self.rows):
            if self.done:
                return None
            try:
                chunk = await self.stream.__anext__()
            except StopAsyncIteration:
                self.done = True
                return None
            if chunk.fields and not self.fields:
                self.fields = chunk.fields
            self.rows = chunk.rows
            self.pos = 0
        row = self.rows[self.pos]
        self.pos += 1
        return row

    async def close(self) -> None:
        await aclose(self.stream)


async def interleave(streams: Sequence[AsyncIterator[Result]], buffer: int = 4) -> AsyncGenerator[tuple[int, Result], None]:
    """Chunks of several streams as they arrive, each tagged with its stream index.

    A bounded queue keeps memory flat: a fast shard waits while the consumer is busy.
    Closing the generator cancels the readers and closes every stream.
    """
    queue: asyncio.Queue[tuple[int, Result | None, BaseException | None]] = asyncio.Queue(buffer)

    async def pump(i: int, s: AsyncIterator[Result]) -> None:
        try:
            async for chunk in s:
                await queue.put((i, chunk, None))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # handed to the consumer, which re-raises it
            await queue.put((i, None, e))
            return
        await queue.put((i, None, None))

    tasks = [asyncio.create_task(pump(i, s)) for i, s in enumerate(streams)]
    try:
        remaining = len(tasks)
        while remaining:
            i, chunk, err = await queue.get()
            if err is not None:
                raise err
            if chunk is None:
                remaining -= 1
                continue
            yield i, chunk
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        for s in streams:
            await aclose(s)


def truncate_result(r: Result, n: int) -> Result:
    if n <= 0:
        return r
    fields = r.fields[:-n] if r.fields else r.fields
    return Result(fields=fields, rows=[row[:-n] for row in r.rows], affected_rows=r.affected_rows,
                  insert_id=r.insert_id, info=r.info, warnings=r.warnings)
