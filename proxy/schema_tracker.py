"""Schema tracking (Vitess's vtgate schema tracker): every table's columns, per keyspace.

Each keyspace is read from one shard's ``information_schema.columns`` (the first shard in
order that answers; the shard's database is its endpoint's ``database``) and published as
an immutable ``vschema.tracked_schema.TrackedSchema``: a new object with a new version,
only when something changed, so the plan cache (keyed on the version) keeps its plans
otherwise.

When it is read:

* at start (``start``) — a keyspace whose shards are all down is logged and left unknown
  (the proxy still starts) and read again by the timer;
* after DDL through the proxy (``refresh(keyspace)``, awaited, so the next statement sees it);
* when a CDC stream run by the proxy sees a DDL, or a shard-targeted DDL was sent
  (``ddl_seen(keyspace)``: a refresh in the background, coalesced per keyspace);
* every ``refresh_seconds`` (cluster file ``schema_tracking: {refresh_seconds: N}``; 0: never),
  which catches DDL made directly on the shards.

Each worker process (``--workers N``) tracks on its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from proxy.errors import ProxyError
from sqltext.quoting import sql_literal
from vschema.tracked_schema import EMPTY_SCHEMA, ColumnInfo, TableSchema, TrackedSchema

logger = logging.getLogger(__name__)

COLUMNS_QUERY = (
    "select c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.COLLATION_NAME, c.IS_NULLABLE, "
    "c.EXTRA, c.COLUMN_KEY, t.TABLE_ROWS "
    "from information_schema.columns c left join information_schema.tables t "
    "on t.TABLE_SCHEMA = c.TABLE_SCHEMA and t.TABLE_NAME = c.TABLE_NAME "
    "where c.TABLE_SCHEMA = {db} order by c.TABLE_NAME, c.ORDINAL_POSITION"
)


class PoolsLike(Protocol):
    """``proxy.pools.ShardPools``."""

    def get(self, keyspace: str, shard: str) -> Any: ...


def _text(v: Any) -> str:
    if v is None:
        return ""
    return v.decode("utf-8", "replace") if isinstance(v, bytes | bytearray) else str(v)


def tables_from_rows(rows: Sequence[Sequence[Any]]) -> dict[str, TableSchema]:
    """``information_schema.columns`` rows (as ``COLUMNS_QUERY`` selects them, in its
    order) -> lower-cased table name -> TableSchema."""
    columns: dict[str, list[ColumnInfo]] = {}
    names: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for table, column, data_type, column_type, collation, nullable, extra, column_key, table_rows in rows:
        name = _text(table)
        key = name.lower()
        names.setdefault(key, name)
        sizes[key] = rows_magnitude(int(_text(table_rows) or 0))
        columns.setdefault(key, []).append(
            ColumnInfo(
                name=_text(column),
                data_type=_text(data_type).lower(),
                column_type=_text(column_type).lower(),
                collation=_text(collation) or None,
                nullable=_text(nullable).upper() == "YES",
                auto_increment="auto_increment" in _text(extra).lower(),
                primary_key=_text(column_key).upper() == "PRI",
            )
        )
    return {key: TableSchema(names[key], tuple(cols), sizes[key]) for key, cols in columns.items()}


def rows_magnitude(n: int) -> int:
    """A table's row estimate rounded down to a power of 10: the planner only compares
    sizes, and a schema whose estimates move within a magnitude keeps its version."""
    return 0 if n <= 0 else 10 ** (len(str(n)) - 1)


class SchemaTracker:
    """Owns the tracked schema of one proxy process, and the tasks that refresh it."""

    def __init__(
        self,
        pools: PoolsLike,
        shards: Mapping[str, Sequence[str]],
        databases: Mapping[tuple[str, str], str],
        *,
        refresh_seconds: float = 60.0,
        on_change: Callable[[TrackedSchema], None] | None = None,
    ) -> None:
        self.pools = pools
        self.shards = {ks: list(s) for ks, s in shards.items()}
        self.databases = dict(databases)
        self.refresh_seconds = refresh_seconds
        self.on_change = on_change
        self.schema: TrackedSchema = EMPTY_SCHEMA
        self.failures = 0  # keyspace reads that found no shard answering
        self._locks = {ks: asyncio.Lock() for ks in self.shards}
        self._timer: asyncio.Task[None] | None = None
        self._pending: dict[str, asyncio.Task[None]] = {}  # ddl_seen refreshes, per keyspace
        self._dirty: set[str] = set()  # keyspaces with a DDL seen since their refresh began
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Read every keyspace (concurrently; one that cannot be read is logged, not raised)
        and start the timer."""
        await self.refresh_all()
        if self.refresh_seconds > 0 and self._timer is None:
            self._timer = asyncio.get_running_loop().create_task(self._run_timer(), name="schema-tracker-timer")

    async def close(self) -> None:
        self._closed = True
        tasks = [t for t in (self._timer, *self._pending.values()) if t is not None]
        self._timer = None
        self._pending = {}
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run_timer(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_seconds)
            try:
                await self.refresh_all()
            except asyncio.CancelledError:
                raise
            except Exception:  # never let the timer die; the next tick tries again
                logger.exception("schema tracking refresh failed")

    # -- refreshing -----------------------------------------------------------------------
    async def refresh_all(self) -> bool:
        """Re-read every keyspace; True if the schema changed."""
        results = await asyncio.gather(*(self._refresh_logged(ks) for ks in self.shards))
        return any(results)

    async def _refresh_logged(self, keyspace: str) -> bool:
        try:
            return await self.refresh(keyspace)
        except ProxyError as e:
            self.failures += 1
            logger.warning(
                "schema tracking: keyspace not read",
                extra={"keyspace": keyspace, "shards": ",".join(self.shards[keyspace]), "error": e.message,
                       "retry": f"in {self.refresh_seconds:g}s" if self.refresh_seconds > 0 else "at the next DDL"},
            )
            return False

    def set_shards(self, keyspace: str, shards: Sequence[str], databases: Mapping[str, str]) -> None:
        """The shards serving ``keyspace`` changed (a resharding switch); read from these now."""
        self.shards[keyspace] = list(shards)
        self.databases.update({(keyspace, s): db for s, db in databases.items()})

    async def refresh(self, keyspace: str) -> bool:
        """Re-read one keyspace; publish a new schema if it changed (True then).

        Raises ProxyError when no shard of the keyspace answers."""
        if keyspace not in self.shards:
            return False
        async with self._locks[keyspace]:
            tables = await self._read(keyspace)
            current = self.schema
            if current.keyspaces.get(keyspace) == tables:
                return False
            # Built from the schema as it is now: concurrent refreshes of other keyspaces
            # (each under its own lock) are kept.
            new = current.replace_keyspace(keyspace, tables)
            self.schema = new
        logger.info(
            "schema tracked",
            extra={"keyspace": keyspace, "tables": len(tables), "schema_version": new.version},
        )
        if self.on_change is not None:
            self.on_change(new)
        return True

    async def _read(self, keyspace: str) -> dict[str, TableSchema]:
        last: ProxyError | None = None
        for shard in self.shards[keyspace]:
            db = self.databases[(keyspace, shard)]
            try:
                async with self.pools.get(keyspace, shard).connection() as sc:
                    res = await sc.execute(COLUMNS_QUERY.format(db=sql_literal(db)))
            except ProxyError as e:
                logger.warning(
                    "schema tracking: shard unavailable",
                    extra={"keyspace": keyspace, "shard": shard, "error": e.message},
                )
                last = e
                continue
            return tables_from_rows(res.rows)
        assert last is not None
        raise last

    def ddl_seen(self, keyspace: str) -> None:
        """A DDL happened on ``keyspace`` (seen in a binlog, or sent to one shard): refresh it
        in the background. Calls while a refresh runs make it run once more after."""
        if self._closed or keyspace not in self.shards:
            return
        self._dirty.add(keyspace)
        task = self._pending.get(keyspace)
        if task is not None and not task.done():
            return
        self._pending[keyspace] = asyncio.get_running_loop().create_task(
            self._drain(keyspace), name=f"schema-tracker-{keyspace}"
        )

    async def _drain(self, keyspace: str) -> None:
        try:
            while keyspace in self._dirty:
                self._dirty.discard(keyspace)
                await self._refresh_logged(keyspace)
        finally:
            if self._pending.get(keyspace) is asyncio.current_task():
                del self._pending[keyspace]
