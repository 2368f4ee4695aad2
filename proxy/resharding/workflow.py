"""A Reshard workflow's persisted state (Vitess's ``_vt.vreplication`` and ``_vt.copy_state``).

Kept on the vschema-store shard (``config.vschema_store_location``) in two sidecar tables
(:mod:`proxy.sidecar_tables`: ``_shardgate.reshard_workflow`` and ``_shardgate.reshard_copy_state``):

- ``reshard_workflow``: one row per workflow: its state and a JSON document (source and target
  shards, the GTID position each source's copy started from, the reverse stream after a switch).
- ``reshard_copy_state``: one row per (workflow, source shard, table): the last primary key copied
  (``lastpk``, JSON), rows copied, done. A copy resumes after the last saved chunk.

The GTID position each target has applied of each source's binlog is not here but on the target
itself (:mod:`proxy.resharding.catchup`), written in the same transaction as the rows it covers.

Only one process drives a workflow's streams at a time: it holds the MariaDB user lock
:func:`lock_name` on the store shard (``GET_LOCK``; a killed holder's lock goes with its
connection).
"""

from __future__ import annotations

import builtins
import enum
import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from proxy.config import ClusterConfig, ShardEndpoint
from proxy.errors import ER_UNKNOWN_ERROR, ProxyError
from proxy.pools import ShardAddress, ShardConnection, ShardPool
from proxy.sidecar_tables import ensure_sidecar_table, row_text, utf8_literal
from sqltext.quoting import sql_literal

logger = logging.getLogger(__name__)

WORKFLOW_TABLE = "reshard_workflow"
COPY_STATE_TABLE = "reshard_copy_state"


class WorkflowState(enum.StrEnum):
    """Vitess's workflow states, plus the traffic ones (``SwitchedReads``/``Switched``)."""

    COPYING = "Copying"  # the table copy runs
    RUNNING = "Running"  # copied: targets follow the sources' binlogs
    STOPPED = "Stopped"  # streams stopped (a vdiff or a traffic switch holds the workflow)
    SWITCHED = "Switched"  # targets serve; the reverse stream keeps the sources up to date
    COMPLETED = "Completed"
    CANCELLED = "Cancelled"

    @property
    def streams_forward(self) -> bool:
        return self in (WorkflowState.COPYING, WorkflowState.RUNNING)

    @property
    def finished(self) -> bool:
        return self in (WorkflowState.COMPLETED, WorkflowState.CANCELLED)


class WorkflowError(ProxyError):
    """A refused or failed workflow request; the message names the workflow."""

    def __init__(self, workflow: str, message: str) -> None:
        super().__init__(ER_UNKNOWN_ERROR, f"workflow {workflow}: {message}")
        self.workflow = workflow


class WorkflowChanged(Exception):
    """A command changed the workflow's state under a running host: the host lets go of it."""


@dataclass(frozen=True)
class Workflow:
    name: str
    keyspace: str
    sources: tuple[str, ...]
    targets: tuple[str, ...]
    state: WorkflowState
    # Per source shard: the GTID position of its first copy snapshot. Catch-up replays every
    # source's binlog from there (idempotently), whatever later snapshot a resumed copy used.
    copy_start: dict[str, str] = field(default_factory=dict)
    # The state to go back to when a vdiff releases a Stopped workflow.
    resume_state: str | None = None
    # After a switch: the reverse stream runs from the targets to the sources.
    reversed: bool = False
    # Traffic switches so far (each writes a journal of its own id).
    switches: int = 0
    message: str = ""

    @property
    def streaming_sources(self) -> tuple[str, ...]:
        """The shards whose binlogs the running stream reads (the targets once reversed)."""
        return self.targets if self.reversed else self.sources

    @property
    def streaming_targets(self) -> tuple[str, ...]:
        return self.sources if self.reversed else self.targets

    def to_json(self) -> dict[str, Any]:
        return {
            "keyspace": self.keyspace,
            "sources": list(self.sources),
            "targets": list(self.targets),
            "copy_start": self.copy_start,
            "resume_state": self.resume_state,
            "reversed": self.reversed,
            "switches": self.switches,
            "message": self.message,
        }

    @classmethod
    def from_row(cls, name: str, state: str, doc: Mapping[str, Any]) -> Workflow:
        return cls(
            name=name,
            keyspace=str(doc["keyspace"]),
            sources=tuple(doc["sources"]),
            targets=tuple(doc["targets"]),
            state=WorkflowState(state),
            copy_start=dict(doc.get("copy_start") or {}),
            resume_state=doc.get("resume_state"),
            reversed=bool(doc.get("reversed", False)),
            switches=int(doc.get("switches", 0)),
            message=str(doc.get("message") or ""),
        )

    def with_state(self, state: WorkflowState, **changes: Any) -> Workflow:
        return replace(self, state=state, **changes)


@dataclass(frozen=True)
class TableCopyState:
    source: str
    table: str
    lastpk: tuple[Any, ...] | None
    rows_copied: int
    done: bool


def lock_name(workflow: str) -> str:
    return f"shardgate.reshard.{workflow}"[:64]


def _create_workflow_table(name: str) -> str:
    return (
        f"create table if not exists {name} ("
        " workflow varbinary(255) not null,"
        " state varbinary(32) not null,"
        " doc longtext character set utf8mb4 not null,"
        " created_at datetime(6) not null,"
        " updated_at datetime(6) not null,"
        " primary key (workflow)"
        ") engine=InnoDB comment 'shardgate: Reshard workflows (proxy/resharding/workflow.py)'"
    )


def _create_copy_state_table(name: str) -> str:
    return (
        f"create table if not exists {name} ("
        " workflow varbinary(255) not null,"
        " source_shard varbinary(255) not null,"
        " table_name varbinary(255) not null,"
        " lastpk longtext character set utf8mb4,"
        " rows_copied bigint not null default 0,"
        " done tinyint not null default 0,"
        " updated_at datetime(6) not null,"
        " primary key (workflow, source_shard, table_name)"
        ") engine=InnoDB comment 'shardgate: Reshard copy progress, Vitess copy_state (proxy/resharding/workflow.py)'"
    )


def lastpk_to_json(values: tuple[Any, ...]) -> str:
    """A primary key as JSON: bytes as {"hex": ...}, everything else by its SQL literal text."""
    return json.dumps([{"hex": bytes(v).hex()} if isinstance(v, bytes | bytearray) else sql_literal(v) for v in values])


def lastpk_literals(text: str) -> list[str]:
    """SQL literals of a stored lastpk (for ``where (pk...) > (...)``)."""
    return [sql_literal(bytes.fromhex(v["hex"])) if isinstance(v, dict) else str(v) for v in json.loads(text)]


def store_address(config: ClusterConfig, endpoint: ShardEndpoint) -> ShardAddress:
    keyspace, shard = config.vschema_store_location
    e = endpoint
    return ShardAddress.of(keyspace, shard, e)


class WorkflowStore:
    """The workflow tables on the vschema-store shard."""

    def __init__(self, pool: ShardPool) -> None:
        self.pool = pool
        self._workflow_table: str | None = None
        self._copy_table: str | None = None

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[ShardConnection]:
        async with self.pool.connection() as sc:
            yield sc

    async def _tables(self, sc: ShardConnection) -> tuple[str, str]:
        if self._workflow_table is None or self._copy_table is None:
            database = self.pool.address.database
            self._workflow_table = await ensure_sidecar_table(sc, database, WORKFLOW_TABLE, _create_workflow_table)
            self._copy_table = await ensure_sidecar_table(sc, database, COPY_STATE_TABLE, _create_copy_state_table)
        return self._workflow_table, self._copy_table

    async def list(self) -> builtins.list[Workflow]:
        async with self.connection() as sc:
            table, _ = await self._tables(sc)
            res = await sc.execute(f"select workflow, state, doc from {table} order by created_at")
        return [Workflow.from_row(row_text(n), row_text(s), json.loads(row_text(d))) for n, s, d in res.rows]

    async def get(self, name: str) -> Workflow | None:
        async with self.connection() as sc:
            table, _ = await self._tables(sc)
            res = await sc.execute(f"select workflow, state, doc from {table} where workflow = {sql_literal(name)}")
        if not res.rows:
            return None
        n, s, d = res.rows[0]
        return Workflow.from_row(row_text(n), row_text(s), json.loads(row_text(d)))

    async def require(self, name: str) -> Workflow:
        workflow = await self.get(name)
        if workflow is None:
            raise WorkflowError(name, "not found")
        return workflow

    async def insert(self, workflow: Workflow) -> None:
        async with self.connection() as sc:
            table, _ = await self._tables(sc)
            res = await sc.execute(
                f"insert ignore into {table} (workflow, state, doc, created_at, updated_at) values ("
                f"{sql_literal(workflow.name)}, {sql_literal(str(workflow.state))}, "
                f"{utf8_literal(json.dumps(workflow.to_json()))}, utc_timestamp(6), utc_timestamp(6))"
            )
        if res.affected_rows != 1:
            raise WorkflowError(workflow.name, "already exists (see `status`; `cancel` or `complete` it first)")
        logger.info("workflow created", extra={"workflow": workflow.name, "keyspace": workflow.keyspace})

    async def save(self, workflow: Workflow, *, if_state: WorkflowState | None = None) -> bool:
        """Store ``workflow``; with ``if_state`` only while the stored state is still that one (the
        host's own changes must not undo a state a command set meanwhile). True if written."""
        condition = "" if if_state is None else f" and state = {sql_literal(str(if_state))}"
        async with self.connection() as sc:
            table, _ = await self._tables(sc)
            res = await sc.execute(
                f"update {table} set state = {sql_literal(str(workflow.state))}, "
                f"doc = {utf8_literal(json.dumps(workflow.to_json()))}, updated_at = utc_timestamp(6) "
                f"where workflow = {sql_literal(workflow.name)}{condition}"
            )
        written = if_state is None or res.affected_rows == 1
        if written:
            logger.info("workflow saved", extra={"workflow": workflow.name, "state": str(workflow.state)})
        return written

    async def copy_states(self, name: str) -> builtins.list[TableCopyState]:
        async with self.connection() as sc:
            _, table = await self._tables(sc)
            res = await sc.execute(
                f"select source_shard, table_name, lastpk, rows_copied, done from {table} "
                f"where workflow = {sql_literal(name)} order by source_shard, table_name"
            )
        return [
            TableCopyState(
                source=row_text(s),
                table=row_text(t),
                lastpk=None if pk is None else tuple(json.loads(row_text(pk))),
                rows_copied=int(row_text(rows)),
                done=row_text(done) == "1",
            )
            for s, t, pk, rows, done in res.rows
        ]

    async def lastpk_text(self, name: str, source: str, table: str) -> tuple[str | None, int, bool]:
        """(stored lastpk JSON or None, rows copied, done) of one table's copy."""
        async with self.connection() as sc:
            _, copy_table = await self._tables(sc)
            res = await sc.execute(
                f"select lastpk, rows_copied, done from {copy_table} where workflow = {sql_literal(name)} "
                f"and source_shard = {sql_literal(source)} and table_name = {sql_literal(table)}"
            )
        if not res.rows:
            return None, 0, False
        pk, rows, done = res.rows[0]
        return (None if pk is None else row_text(pk)), int(row_text(rows)), row_text(done) == "1"

    async def save_copy_progress(
        self, name: str, source: str, table: str, lastpk: str | None, rows_copied: int, done: bool
    ) -> None:
        async with self.connection() as sc:
            _, copy_table = await self._tables(sc)
            pk = "NULL" if lastpk is None else utf8_literal(lastpk)
            await sc.execute(
                f"insert into {copy_table} (workflow, source_shard, table_name, lastpk, rows_copied, done, updated_at) "
                f"values ({sql_literal(name)}, {sql_literal(source)}, {sql_literal(table)}, {pk}, {rows_copied}, "
                f"{int(done)}, utc_timestamp(6)) on duplicate key update lastpk = values(lastpk), "
                "rows_copied = values(rows_copied), done = values(done), updated_at = values(updated_at)"
            )

    async def delete_copy_state(self, name: str) -> None:
        async with self.connection() as sc:
            _, copy_table = await self._tables(sc)
            await sc.execute(f"delete from {copy_table} where workflow = {sql_literal(name)}")

    async def delete(self, name: str) -> None:
        async with self.connection() as sc:
            workflow_table, copy_table = await self._tables(sc)
            async with sc.transaction():
                await sc.execute(f"delete from {copy_table} where workflow = {sql_literal(name)}")
                await sc.execute(f"delete from {workflow_table} where workflow = {sql_literal(name)}")

    @asynccontextmanager
    async def locked(self, name: str, timeout_seconds: float) -> AsyncIterator[bool]:
        """Hold the workflow's lock for the block; yields False (not held) if another process
        kept it for ``timeout_seconds``."""
        sc = await self.pool.acquire()
        try:
            res = await sc.execute(f"select get_lock({sql_literal(lock_name(name))}, {float(timeout_seconds)})")
            held = row_text(res.rows[0][0]) == "1"
            try:
                yield held
            finally:
                if held:
                    await sc.execute(f"select release_lock({sql_literal(lock_name(name))})")
        finally:
            self.pool.release(sc)
