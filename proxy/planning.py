"""From a session's statement to an executed plan: the bridge between the front
end, the planner (``rewriter``, pure) and the engine (``proxy.engine``)."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from proxy.engine.result import Result
from proxy.engine.statement_steps import reaches_shards_at_once
from proxy.errors import ER_NO_DB_ERROR, ProxyError
from proxy.messaging.queue_ddl import is_create_queue
from proxy.observability.metrics import plan_label
from proxy.vschema_statements import alter_vschema
from vschema.ddl import is_vschema_ddl

if TYPE_CHECKING:
    from proxy.server import Proxy
    from proxy.session import Outcome, ProxySession
    from vschema.model import VSchema
    from vschema.tracked_schema import TrackedSchema

    Catalog = tuple[VSchema, TrackedSchema]

logger = logging.getLogger(__name__)

_DDL = {"create", "drop", "alter", "truncate", "rename"}
# The first table name a DDL statement acts on, with its keyspace qualifier if any.
_DDL_TARGET = re.compile(
    r"\b(?:table|view|on|into)\s+(?:if\s+(?:not\s+)?exists\s+)?(?P<qual>`?(?P<ks>[\w-]+)`?\.)(?=`?\w)",
    re.I,
)
_STREAMED = {"select", "with", "show", "explain", "describe", "desc", "table", "values", "("}


class Planner:
    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    def _unsharded_target(self, session: ProxySession) -> tuple[str, str] | None:
        ks = session.keyspace
        if ks is not None and not self.proxy.is_sharded(ks):
            return ks, self.proxy.shard_names(ks)[0]
        return None

    async def run(self, session: ProxySession, sql: str, kw: str) -> Outcome:
        if kw in _DDL:
            return await self.ddl(session, sql)
        target = self._unsharded_target(session)
        if target is not None:
            # An unsharded keyspace holds every table it names: the statement goes
            # as written, and the shard's own errors (1146, ...) reach the client.
            session.route = ("Unsharded", target[0])
            return await self.proxy.send(session, target[0], target[1], sql, stream=kw in _STREAMED)
        return await self.execute_planned(session, sql, kw)

    async def execute_planned(self, session: ProxySession, sql: str, kw: str, catalog: Catalog | None = None) -> Outcome:
        """Plan and run; ``catalog``: the vschema and tracked schema to plan with instead of the
        proxy's (topics plan with an overlay in which each topic is a pinned table)."""
        from proxy import engine

        plan, bindvars = self.plan(session, sql, catalog)
        if session.tx is not None and session.tx.implicit and not reaches_shards_at_once(plan):
            session.tx.in_steps = True  # atomic only if its first step does not commit alone
        session.route = (plan_label(plan), getattr(plan, "keyspace", None) or session.keyspace or "")
        if kw in _STREAMED:
            return engine.stream(plan, session.vcursor, bindvars)
        return await engine.execute(plan, session.vcursor, bindvars)

    def plan(self, session: ProxySession, sql: str, catalog: Catalog | None = None) -> tuple[Any, dict[str, Any]]:
        from rewriter import PlanningError, plan_query

        vschema, schema = catalog if catalog is not None else (self.proxy.vschema, self.proxy.schema)
        try:
            return plan_query(sql, vschema, session.keyspace, schema=schema)
        except PlanningError as e:
            raise ProxyError(e.code, e.message) from e
        except RecursionError as e:
            # rewriter.dialect refuses statements nested deeper than the planner goes
            # before parsing them; should a walk still run out of stack, answer MySQL's
            # error for that, never an internal error
            from rewriter.dialect import DIALECT
            from rewriter.errors import StackOverrun

            err = StackOverrun(DIALECT.max_nesting + 1, DIALECT.max_nesting)
            raise ProxyError(err.code, err.message) from e

    async def ddl(self, session: ProxySession, sql: str) -> Result:
        """DDL goes to every shard of its keyspace, as Vitess's direct DDL does.

        DDL commits implicitly in MySQL, so an open transaction is committed first."""
        if is_create_queue(sql):
            return await self.create_queue(session, sql)
        m = _DDL_TARGET.search(sql)
        keyspace = m.group("ks") if m and m.group("ks") in self.proxy.vschema.keyspaces else session.keyspace
        if keyspace is None:
            raise ProxyError(ER_NO_DB_ERROR, "No database selected")
        session.route = ("DDL", keyspace)
        if m and m.group("ks") == keyspace:
            # Shards name their database themselves; drop the keyspace qualifier.
            sql = sql[: m.start("qual")] + sql[m.end("qual") :]
        if session.in_transaction:
            await session.commit()
        shards = self.proxy.shard_names(keyspace)
        results = await session.vcursor.execute_multi(keyspace, [(shard, sql) for shard in shards])
        await self.proxy.schema_changed(keyspace, sql)
        return Result(affected_rows=results[0].affected_rows if results else 0)

    async def create_queue(self, session: ProxySession, sql: str) -> Result:
        """``CREATE QUEUE`` (beyond Vitess): the message table on every shard, and in a
        sharded keyspace its vschema entry (hash vindex on id), in the cluster's vschema store
        (every proxy process follows it)."""
        from proxy.messaging.queue_ddl import translate_create_queue

        head = translate_create_queue(sql, sharded=False)
        keyspace = head.keyspace or session.keyspace
        if keyspace is None:
            raise ProxyError(ER_NO_DB_ERROR, "No database selected")
        if keyspace not in self.proxy.vschema.keyspaces:
            raise ProxyError(1049, f"VT05003: unknown database '{keyspace}' in vschema")
        queue = translate_create_queue(sql, sharded=self.proxy.is_sharded(keyspace))
        if session.in_transaction:
            await session.commit()
        shards = self.proxy.shard_names(keyspace)
        await session.vcursor.execute_multi(keyspace, [(shard, queue.create_table) for shard in shards])
        if queue.vschema_table is not None:
            await self.proxy.add_vschema_table(keyspace, queue.name, queue.vschema_table, queue.vindexes, sql)
        else:  # no vschema entry, but the other proxies must still load the new message table
            await self.proxy.live_vschema.announce(keyspace, sql)
        await self.proxy.schema_changed(keyspace, queue.create_table)
        return Result()

    async def proxy_statement(self, session: ProxySession, sql: str) -> Outcome | None:
        kw = sql.split(None, 1)[0].lower()
        if kw == "alter":
            return await alter_vschema(self.proxy, session, sql) if is_vschema_ddl(sql) else None
        if kw == "vexplain":
            return await self.execute_planned(session, sql, "select")
        if kw in ("stream", "vstream"):
            if session.workload != "olap":
                raise ProxyError(
                    1235, f"{kw.upper()} is supported only for OLAP workload: run SET WORKLOAD = OLAP first"
                )
            if kw == "vstream":
                from proxy.vstream_statement import vstream

                return vstream(self.proxy, session, sql)
            return self.proxy.messaging.stream(sql, session.keyspace, session.target_shard)
        return None
