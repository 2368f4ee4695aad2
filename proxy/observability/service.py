"""The observability of one proxy process: owned by ``proxy.cluster_state.ClusterState``, which starts
and stops it and mounts its routes on the HTTP listener.

It keeps the open client sessions (connections and open transactions are counted from
them), runs the state sampler every second and the QPS history every ``history.interval``
seconds, and answers the health check.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from proxy.observability import metrics
from proxy.observability.debug_routes import add_debug_routes
from proxy.observability.figures import Figures
from proxy.observability.health import HealthCheck
from proxy.observability.history import QueryHistory
from proxy.observability.process_group import scrape_registry
from proxy.observability.slow_queries import SLOW_QUERIES
from proxy.observability.state_sampler import StateSampler

if TYPE_CHECKING:
    from aiohttp import web

    from proxy.cluster_state import ClusterState
    from proxy.session import ProxySession

logger = logging.getLogger(__name__)

SAMPLE_SECONDS = 1.0


class Observability:
    def __init__(self, proxy: ClusterState) -> None:
        self.proxy = proxy
        self.started_at = time.time()
        self.pid = os.getpid()
        self.sessions: set[ProxySession] = set()
        self.sampler = StateSampler(proxy, self.sessions)
        self.health = HealthCheck(proxy.pools)
        self.history = QueryHistory()
        self._task: asyncio.Task[None] | None = None

    # -- sessions ------------------------------------------------------------------------
    def session_opened(self, session: ProxySession) -> None:
        self.sessions.add(session)
        metrics.CLIENT_CONNECTIONS_ACCEPTED.inc()

    def session_closed(self, session: ProxySession) -> None:
        self.sessions.discard(session)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="observability sampler")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        await self.health.close()

    async def _run(self) -> None:
        next_history = time.monotonic()
        while True:
            try:
                self.sample()
                await self.sampler.sample_cdc_lag()
                if time.monotonic() >= next_history:
                    next_history += self.history.interval
                    self.history.sample(self.figures(), time.time())
            except Exception:  # a figure that cannot be read must not stop the others
                logger.exception("observability sample failed")
            await asyncio.sleep(SAMPLE_SECONDS)

    # -- reading -------------------------------------------------------------------------
    def sample(self) -> None:
        """Bring this process's figures up to date (every second, and before every scrape)."""
        metrics.flush_statements()
        self.sampler.sample()
        SLOW_QUERIES.tick()

    def figures(self) -> Figures:
        """The figures a scrape shows: this process's, or the whole group's under ``--workers``."""
        return Figures.collect(scrape_registry())

    def mount_http(self, app: web.Application) -> None:
        add_debug_routes(app, self)

    def process_info(self) -> dict[str, Any]:
        return {"pid": self.pid, "started_at": self.started_at, "uptime_seconds": time.time() - self.started_at}
