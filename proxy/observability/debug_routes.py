"""The observability routes on the proxy's HTTP listener::

    GET /metrics              Prometheus text format (the whole group under --workers)
    GET /debug/vars           the same figures as JSON, with the process and its workers
    GET /debug/query_plans    this worker's cached plans (VEXPLAIN's JSON), most recently used first
    GET /debug/health         200 while every shard answers a ping, 503 when one does not
    GET /debug/status         an HTML page for a person
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from proxy.observability.health import Health
from proxy.observability.process_group import queries_by_worker, scrape_registry, worker_pids
from proxy.observability.slow_queries import SLOW_QUERIES
from proxy.observability.status_page import KeyspaceInfo, StatusView, render
from rewriter import DEFAULT_CACHE
from rewriter.vexplain import describe

if TYPE_CHECKING:
    from proxy.observability.service import Observability

DEFAULT_PLAN_LIMIT = 1000


def health_json(health: Health) -> dict[str, Any]:
    return {
        "status": "serving" if health.ok else "unhealthy",
        "checked_at": health.at,
        "shards": [
            {"keyspace": s.keyspace, "shard": s.shard, "ok": s.ok, "ping_ms": s.ping_ms, "error": s.error}
            for s in health.shards
        ],
    }


def add_debug_routes(app: web.Application, obs: Observability) -> None:
    async def metrics(request: web.Request) -> web.Response:
        obs.sample()
        # Under --workers this reads every worker's files: off the event loop.
        body = await asyncio.get_running_loop().run_in_executor(None, generate_latest, scrape_registry())
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def debug_vars(request: web.Request) -> web.Response:
        obs.sample()
        figures = obs.figures()
        return web.json_response({
            "process": obs.process_info(),
            "workers": worker_pids(),
            "queries_by_worker": {str(pid): n for pid, n in queries_by_worker().items()},
            "metrics": figures.as_json(),
        })

    async def query_plans(request: web.Request) -> web.Response:
        try:
            limit = int(request.query.get("limit", DEFAULT_PLAN_LIMIT))
        except ValueError:
            return web.json_response({"error": "'limit' must be an integer"}, status=400)
        plans = []
        for (shape, keyspace, _vschema, _schema), plan in DEFAULT_CACHE.entries()[:limit]:
            plans.append({"query": shape, "keyspace": keyspace, "plan": describe(plan)})
        return web.json_response({
            "pid": obs.pid, "size": len(DEFAULT_CACHE), "hits": DEFAULT_CACHE.hits, "misses": DEFAULT_CACHE.misses,
            "plans": plans,
        })

    async def health(request: web.Request) -> web.Response:
        checked = await obs.health.check()
        return web.json_response(health_json(checked), status=200 if checked.ok else 503)

    async def status(request: web.Request) -> web.Response:
        obs.sample()
        checked = await obs.health.check()
        proxy = obs.proxy
        view = StatusView(
            pid=obs.pid,
            workers=worker_pids(),
            uptime_seconds=time.time() - obs.started_at,
            keyspaces=[
                KeyspaceInfo(name, proxy.is_sharded(name), tuple(proxy.shard_names(name)))
                for name in sorted(proxy.config.keyspaces)
            ],
            figures=obs.figures(),
            health=checked,
            history=list(obs.history.points),
            history_interval=obs.history.interval,
            slow=SLOW_QUERIES.slowest(),
        )
        return web.Response(text=render(view), content_type="text/html", charset="utf-8")

    app.router.add_get("/metrics", metrics)
    app.router.add_get("/debug/vars", debug_vars)
    app.router.add_get("/debug/query_plans", query_plans)
    app.router.add_get("/debug/health", health)
    app.router.add_get("/debug/status", status)
