"""The proxy's HTTP listener (``http: {host, port}`` in the cluster file), on aiohttp.

Features mount their routes on it: the topics REST API (``proxy.topics.http``) and the
observability pages (``proxy.observability.debug_routes``). On a loopback address it
serves without authentication; elsewhere only with HTTP Basic authentication by a
configured user that has a password (as the MySQL port refuses password-less exposure).
Every ``--workers`` process listens on the same port (SO_REUSEPORT).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from aiohttp import web

from proxy.addresses import is_loopback
from proxy.errors import ER_ACCESS_DENIED, ProxyError

if TYPE_CHECKING:
    from proxy.config import HttpConfig, UserConfig

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Mount = Callable[[web.Application], None]


def basic_auth_middleware(users: Sequence[UserConfig]) -> Any:
    """HTTP Basic authentication against the configured users that have a password."""
    accounts = {u.user: u.password for u in users if u.password}

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        ok = False
        if header.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                user, password = "", ""
            expected = accounts.get(user)
            ok = expected is not None and hmac.compare_digest(expected.encode(), password.encode())
        if not ok:
            return web.json_response({"error": "authentication required"}, status=401,
                                     headers={"WWW-Authenticate": 'Basic realm="shardgate"'})
        return await handler(request)

    return check


class HttpListener:
    def __init__(self, runner: web.AppRunner, host: str, port: int) -> None:
        self.runner = runner
        self.host = host
        self.port = port

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_http_listener(
    config: HttpConfig, users: Sequence[UserConfig], mounts: Sequence[Mount],
) -> HttpListener:
    """Serve an application with every ``mounts`` routes on ``config.host:port`` (SO_REUSEPORT,
    so ``--workers`` processes share it)."""
    middlewares = []
    if not is_loopback(config.host):
        if not any(u.password for u in users):
            raise ProxyError(ER_ACCESS_DENIED, f"refusing to serve HTTP on {config.host}: no user has a password"
                             " (set one in 'users' or listen on 127.0.0.1)")
        middlewares.append(basic_auth_middleware(users))
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=middlewares)
    for mount in mounts:
        mount(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, reuse_port=True)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    logger.info("http listening", extra={"host": config.host, "port": config.port})
    return HttpListener(runner, config.host, config.port)
