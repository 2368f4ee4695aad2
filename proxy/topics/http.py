"""CDAP's messaging REST API for topics, on aiohttp, and a minimal HTTP listener.

Routes (namespace = keyspace), JSON bodies; ids are the 20-hex-digit message ids, payloads
base64 unless the body says ``"encoding": "text"`` (UTF-8 strings)::

    GET    /v1/namespaces/{ns}/topics                      -> ["t1", ...]
    PUT    /v1/namespaces/{ns}/topics/{t}                  {"ttl": "3600", ...}  200 | 409 exists | 400 bad TTL
    GET    /v1/namespaces/{ns}/topics/{t}                  -> {"name", "properties", "keyspace", "shard", "generation"}
    PUT    /v1/namespaces/{ns}/topics/{t}/properties       replaces the properties  200 | 404 | 400
    DELETE /v1/namespaces/{ns}/topics/{t}                  200 | 404
    POST   /v1/namespaces/{ns}/topics/{t}/publish          {"messages": [...], "transactionWritePointer": p | null}
                                                           413: a message too large for one statement to its shard
    POST   /v1/namespaces/{ns}/topics/{t}/store            {"messages": [...], "transactionWritePointer": p}
    POST   /v1/namespaces/{ns}/topics/{t}/rollback         {"transactionWritePointer": p}
    POST   /v1/namespaces/{ns}/topics/{t}/poll             {"startFrom": id | ms | null, "inclusive": true, "limit": n}
                                                           -> [{"id", "publishTime", "payload"}, ...]

``add_topic_routes`` mounts them on an aiohttp application: the proxy's HTTP listener
(``proxy.http_listener``) carries them next to the observability pages.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from proxy.errors import ProxyError
from proxy.topics.errors import InvalidTopicRequest, http_status
from proxy.topics.ids import is_id
from proxy.topics.statement import StartPosition

if TYPE_CHECKING:
    from proxy.topics.service import TopicService

logger = logging.getLogger(__name__)

PREFIX = "/v1/namespaces/{ns}/topics"
DEFAULT_POLL_LIMIT = 1000
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str, code: int | None = None) -> web.Response:
    body: dict[str, Any] = {"error": message}
    if code is not None:
        body["code"] = code
    return web.json_response(body, status=status)


async def _json_body(request: web.Request, default: Any) -> Any:
    raw = await request.read()
    if not raw.strip():
        return default
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidTopicRequest(f"invalid JSON body: {e}") from e


def _payloads(body: dict[str, Any]) -> list[bytes]:
    messages = body.get("messages", [])
    if not isinstance(messages, list):
        raise InvalidTopicRequest("'messages' must be a list")
    encoding = str(body.get("encoding", "base64")).lower()
    if encoding not in ("base64", "text"):
        raise InvalidTopicRequest("'encoding' must be 'base64' or 'text'")
    out: list[bytes] = []
    for m in messages:
        if not isinstance(m, str):
            raise InvalidTopicRequest("every message must be a string (base64, or text with \"encoding\": \"text\")")
        if encoding == "text":
            out.append(m.encode())
            continue
        try:
            out.append(base64.b64decode(m, validate=True))
        except (binascii.Error, ValueError) as e:
            raise InvalidTopicRequest(f"a message is not valid base64: {e}") from e
    return out


def _pointer(body: dict[str, Any], required: bool) -> int | None:
    p = body.get("transactionWritePointer")
    if p is None:
        if required:
            raise InvalidTopicRequest("'transactionWritePointer' is required")
        return None
    if isinstance(p, str) and re.fullmatch(r"-?\d{1,19}", p.strip()):
        # Tephra's write pointers pass 2**53: JSON clients that parse numbers as doubles
        # (JavaScript) send them as strings, as CDAP reads it (Long.parseLong of its text).
        p = int(p)
    if isinstance(p, bool) or not isinstance(p, int):
        raise InvalidTopicRequest("'transactionWritePointer' must be an integer (or its decimal text)")
    return p


def _properties(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidTopicRequest("the body must be a JSON object of topic properties")
    return body


def _start(body: dict[str, Any]) -> StartPosition:
    start = body.get("startFrom")
    inclusive = body.get("inclusive", True)
    if not isinstance(inclusive, bool):
        raise InvalidTopicRequest("'inclusive' must be true or false")
    if start is None:
        return StartPosition.beginning()
    if isinstance(start, bool):
        raise InvalidTopicRequest("'startFrom' must be a message id or a timestamp in ms")
    if isinstance(start, int):
        return StartPosition.at_time(start)
    if isinstance(start, str) and is_id(start):
        return StartPosition.from_id(start, inclusive)
    if isinstance(start, str) and start.isdigit():
        return StartPosition.at_time(int(start))
    raise InvalidTopicRequest(f"'startFrom' must be a message id (20 hex digits) or a timestamp in ms, got {start!r}")


def add_topic_routes(app: web.Application, service: TopicService) -> None:
    """Mount the topic routes on ``app``."""

    def guarded(handler: Handler) -> Handler:
        async def run(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except ProxyError as e:
                status = http_status(e)
                if status >= 500:
                    logger.warning("topics REST failed", extra={"path": request.path, "error": e.message})
                return _error(status, e.message, e.code)

        return run

    def ns_topic(request: web.Request) -> tuple[str, str]:
        return request.match_info["ns"], request.match_info["topic"]

    async def list_topics(request: web.Request) -> web.StreamResponse:
        rows = await service.list_topics(request.match_info["ns"])
        return web.json_response([row.name for _, row in rows])

    async def create(request: web.Request) -> web.StreamResponse:
        ns, topic = ns_topic(request)
        await service.create_topic(ns, topic, _properties(await _json_body(request, {})))
        return web.json_response({})

    async def get(request: web.Request) -> web.StreamResponse:
        ns, topic = ns_topic(request)
        row = await service.get_topic(ns, topic)
        return web.json_response({
            "name": row.name, "properties": row.properties, "keyspace": ns, "shard": service.placement(ns, topic),
            "generation": row.generation,
        })

    async def update(request: web.Request) -> web.StreamResponse:
        ns, topic = ns_topic(request)
        await service.update_topic(ns, topic, _properties(await _json_body(request, {})), replace=True)
        return web.json_response({})

    async def delete(request: web.Request) -> web.StreamResponse:
        ns, topic = ns_topic(request)
        await service.drop_topic(ns, topic)
        return web.json_response({})

    async def publish(request: web.Request) -> web.StreamResponse:
        ns, topic = ns_topic(request)
        body = _properties(await _json_body(request, {}))
        payloads = _payloads(body)
        pointer = _pointer(body, required=False)
        if pointer is None:
            if not payloads:
                raise InvalidTopicRequest("'messages' must not be empty without a transactionWritePointer")
            count = await service.publish(ns, topic, payloads)
            return web.json_response({"published": count})
        count = await service.publish_pointer(ns, topic, pointer, payloads)
        return web.json_response({"transactionWritePointer": pointer, "published": count})

    async def store(request: web.Request) -> web.StreamResponse:
        ns, topic = ns_topic(request)
        body = _properties(await _json_body(request, {}))
        pointer = _pointer(body, required=True)
        assert pointer is not None
        payloads = _payloads(body)
        if not payloads:  # CDAP: a store must be transactional with payload
            raise InvalidTopicRequest("a store request must carry messages (and a transactionWritePointer)")
        count = await service.store_payloads(ns, topic, pointer, payloads)
        return web.json_response({"transactionWritePointer": pointer, "stored": count})

    async def rollback(request: web.Request) -> web.StreamResponse:
        ns, topic = ns_topic(request)
        pointer = _pointer(_properties(await _json_body(request, {})), required=True)
        assert pointer is not None
        count = await service.rollback_pointer(ns, topic, pointer)
        return web.json_response({"transactionWritePointer": pointer, "rolledBack": count})

    async def poll(request: web.Request) -> web.StreamResponse:
        ns, topic = ns_topic(request)
        body = _properties(await _json_body(request, {}))
        limit = body.get("limit")
        if limit is None:
            limit = DEFAULT_POLL_LIMIT
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise InvalidTopicRequest("'limit' must be an integer")
        text = str(body.get("encoding", "base64")).lower() == "text"
        messages = await service.poll(ns, topic, _start(body), limit)
        return web.json_response([
            {"id": m.id, "publishTime": m.publish_time,
             "payload": m.payload.decode("utf-8", "replace") if text else base64.b64encode(m.payload).decode()}
            for m in messages
        ])

    app.router.add_get(PREFIX, guarded(list_topics))
    app.router.add_put(PREFIX + "/{topic}", guarded(create))
    app.router.add_get(PREFIX + "/{topic}", guarded(get))
    app.router.add_delete(PREFIX + "/{topic}", guarded(delete))
    app.router.add_put(PREFIX + "/{topic}/properties", guarded(update))
    app.router.add_post(PREFIX + "/{topic}/publish", guarded(publish))
    app.router.add_post(PREFIX + "/{topic}/store", guarded(store))
    app.router.add_post(PREFIX + "/{topic}/rollback", guarded(rollback))
    app.router.add_post(PREFIX + "/{topic}/poll", guarded(poll))
