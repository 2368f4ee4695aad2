"""From a session's statement to an executed plan: the bridge between the front
end, the planner (``rewriter``, pure) and the engine (``proxy.engine``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from proxy.errors import ProxyError, UnsupportedError

if TYPE_CHECKING:
    from proxy.server import Proxy
    from proxy.session import Outcome, ProxySession

logger = logging.getLogger(__name__)

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
        target = self._unsharded_target(session)
        if target is not None:
            # An unsharded keyspace holds every table it names: the statement goes
            # as written, and the shard's own errors (1146, ...) reach the client.
            return await self.proxy.send(session, target[0], target[1], sql, stream=kw in _STREAMED)
        return await self.execute_planned(session, sql, kw)

    async def execute_planned(self, session: ProxySession, sql: str, kw: str) -> Outcome:
        from proxy import engine

        plan, bindvars = self.plan(session, sql)
        if kw in _STREAMED:
            return engine.stream(plan, session.vcursor, bindvars)
        return await engine.execute(plan, session.vcursor, bindvars)

    def plan(self, session: ProxySession, sql: str) -> tuple[Any, dict[str, Any]]:
        from rewriter import PlanningError, plan_query

        try:
            return plan_query(sql, self.proxy.vschema, session.keyspace)
        except PlanningError as e:
            raise ProxyError(e.code, e.message) from e

    async def proxy_statement(self, session: ProxySession, sql: str) -> Outcome | None:
        kw = sql.split(None, 1)[0].lower()
        if kw == "vexplain":
            return await self.execute_planned(session, sql, "select")
        if kw in ("stream", "vstream"):
            if session.workload != "olap":
                raise ProxyError(
                    1235, f"{kw.upper()} is supported only for OLAP workload: run SET WORKLOAD = OLAP first"
                )
            raise UnsupportedError(f"{kw.upper()} is not available in this build")
        return None
