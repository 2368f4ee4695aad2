"""The HTTP listener: loopback without authentication; beyond loopback only with HTTP Basic
authentication by a configured user with a password (as the MySQL port refuses password-less
exposure)."""

from __future__ import annotations

import base64

import aiohttp
import pytest
from aiohttp import web

from proxy.config import HttpConfig, UserConfig
from proxy.errors import ProxyError
from proxy.http_listener import start_http_listener
from tests.proxy_process import free_port


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def _ping(app: web.Application) -> None:
    async def ping(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app.router.add_get("/ping", ping)


async def test_loopback_listener_needs_no_authentication():
    port = free_port()
    listener = await start_http_listener(HttpConfig("127.0.0.1", port), [UserConfig("root", "")], [_ping])
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/ping") as r:
            assert r.status == 200
    finally:
        await listener.stop()


async def test_a_listener_beyond_loopback_is_refused_without_passwords():
    with pytest.raises(ProxyError) as e:
        await start_http_listener(HttpConfig("0.0.0.0", free_port()), [UserConfig("root", "")], [_ping])
    assert e.value.code == 1045


async def test_a_listener_beyond_loopback_requires_basic_authentication():
    port = free_port()
    users = [UserConfig("root", ""), UserConfig("app", "s3cret")]
    listener = await start_http_listener(HttpConfig("0.0.0.0", port), users, [_ping])
    url = f"http://127.0.0.1:{port}/ping"
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as r:
                assert r.status == 401 and "Basic" in r.headers["WWW-Authenticate"]
            async with http.get(url, headers=_basic("app", "wrong")) as r:
                assert r.status == 401
            async with http.get(url, headers=_basic("root", "")) as r:
                assert r.status == 401  # a password-less user cannot log in from outside
            async with http.get(url, headers=_basic("app", "s3cret")) as r:
                assert r.status == 200
    finally:
        await listener.stop()
