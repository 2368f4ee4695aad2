"""Topic errors, each a ``ProxyError`` with a MySQL code (SQL clients) and an HTTP status (REST)."""

from __future__ import annotations

from proxy.errors import ER_WRONG_VALUE_FOR_VAR, ProxyError

ER_TABLE_EXISTS = 1050
ER_BAD_TABLE = 1051
ER_NON_UPDATABLE = 1288


class TopicExists(ProxyError):
    http_status = 409

    def __init__(self, keyspace: str, name: str) -> None:
        super().__init__(ER_TABLE_EXISTS, f"Topic '{keyspace}.{name}' already exists", "42S01")


class TopicNotFound(ProxyError):
    http_status = 404

    def __init__(self, keyspace: str, name: str) -> None:
        super().__init__(ER_BAD_TABLE, f"Unknown topic '{keyspace}.{name}'", "42S02")


class KeyspaceNotFound(ProxyError):
    http_status = 404

    def __init__(self, keyspace: str) -> None:
        super().__init__(1049, f"Unknown database '{keyspace}'")


class InvalidTopicRequest(ProxyError):
    http_status = 400

    def __init__(self, message: str) -> None:
        super().__init__(ER_WRONG_VALUE_FOR_VAR, message)


class PointerConflict(ProxyError):
    """A rollback of a write pointer whose messages were already published (visible)."""

    http_status = 409

    def __init__(self, pointer: int) -> None:
        super().__init__(1105, f"transaction write pointer {pointer} was already published; it cannot be rolled back")


def http_status(e: ProxyError) -> int:
    status = getattr(e, "http_status", None)
    if isinstance(status, int):
        return status
    if e.code in (ER_TABLE_EXISTS,):
        return 409
    if e.code in (ER_BAD_TABLE, 1146, 1049):
        return 404
    if e.code in (ER_WRONG_VALUE_FOR_VAR, 1064, 1103):
        return 400
    return 500
