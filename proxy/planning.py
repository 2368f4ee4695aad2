"""From a session's statement to an executed plan: the bridge between the front
end, the planner (``rewriter``, pure) and the engine (``proxy.engine``)."""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

from proxy.engine.result import local_result
from proxy.errors import ER_NO_DB_ERROR, ProxyError, UnsupportedError

if TYPE_CHECKING:
    from proxy.server import Proxy
    from proxy.session import Outcome, ProxySession

logger = logging.getLogger(__name__)

_VEXPLAIN = re.compile(r"^vexplain\s+(?:(?P<kind>plan|queries|all|trace|keys)\s+)?(?P<q>.+?)\s*;?$", re.I | re.S)
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
        from rewriter import plan_query
        from rewriter.errors import Unsupported

        try:
            plan, bindvars = plan_query(sql, self.proxy.vschema, session.keyspace)
        except Unsupported as e:
            raise UnsupportedError(str(e)) from e
        except ProxyError:
            raise
        return await self._execute(session, plan, bindvars, kw)

    async def _execute(self, session: ProxySession, plan: Any, bindvars: dict[str, Any], kw: str) -> Outcome:
        from proxy import engine

        if kw in _STREAMED:
            return engine.stream(plan, session.vcursor, bindvars)
        return await engine.execute(plan, session.vcursor, bindvars)

    async def proxy_statement(self, session: ProxySession, sql: str) -> Outcome | None:
        m = _VEXPLAIN.match(sql)
        if m:
            kind = (m.group("kind") or "plan").lower()
            if kind != "plan":
                raise UnsupportedError(f"VEXPLAIN {kind.upper()} is not supported; use VEXPLAIN PLAN")
            from rewriter import plan_query
            from rewriter.vexplain import vexplain

            plan, _ = plan_query(m.group("q"), self.proxy.vschema, session.keyspace)
            return local_result(["JSON"], [(json.dumps(vexplain(plan), indent=2),)])
        kw = sql.split(None, 1)[0].lower()
        if kw in ("stream", "vstream"):
            if session.workload != "olap":
                raise ProxyError(1235, f"{kw.upper()} is supported only for OLAP workload: run SET WORKLOAD = OLAP first")
            raise UnsupportedError(f"{kw.upper()} is not available in this build")
        if session.keyspace is None:
            raise ProxyError(ER_NO_DB_ERROR, "No database selected")
        return None
