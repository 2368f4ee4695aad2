"""Topic errors, each a ``ProxyError`` with a MySQL code (SQL clients) and an HTTP status (REST)."""

from __future__ import annotations

from proxy.errors import (
    ER_BAD_DB_ERROR,
    ER_BAD_TABLE,
    ER_NET_PACKET_TOO_LARGE,
    ER_NO_SUCH_TABLE,
    ER_PARSE_ERROR,
    ER_SERVER_SHUTDOWN,
    ER_TABLE_EXISTS,
    ER_UNKNOWN_ERROR,
    ER_WRONG_TABLE_NAME,
    ER_WRONG_VALUE_FOR_VAR,
    ProxyError,
    ShardError,
)
from proxy.topics.names import log_table


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
        super().__init__(ER_BAD_DB_ERROR, f"Unknown database '{keyspace}'")


class InvalidTopicRequest(ProxyError):
    http_status = 400

    def __init__(self, message: str) -> None:
        super().__init__(ER_WRONG_VALUE_FOR_VAR, message)


class PointerConflict(ProxyError):
    """A rollback of a write pointer whose messages were already published (visible)."""

    http_status = 409

    def __init__(self, pointer: int) -> None:
        super().__init__(ER_UNKNOWN_ERROR, f"transaction write pointer {pointer} was already published; it cannot be rolled back")


class ServiceStopping(ProxyError):
    """The proxy is stopping: a follower's stream ends with MySQL's 1053, not as if its topic
    were dropped (1051 tells a consumer to give up; this one reconnects and resumes from its
    saved position)."""

    http_status = 503

    def __init__(self, keyspace: str, name: str) -> None:
        super().__init__(ER_SERVER_SHUTDOWN, f"Server shutdown in progress (following topic '{keyspace}.{name}')")


def http_status(e: ProxyError) -> int:
    status = getattr(e, "http_status", None)
    if isinstance(status, int):
        return status
    if e.code in (ER_TABLE_EXISTS,):
        return 409
    if e.code in (ER_BAD_TABLE, ER_NO_SUCH_TABLE, ER_BAD_DB_ERROR):
        return 404
    if e.code in (ER_WRONG_VALUE_FOR_VAR, ER_PARSE_ERROR, ER_WRONG_TABLE_NAME):
        return 400
    return 500


class MessageTooLarge(ProxyError):
    """A message whose row cannot go to its shard in one statement (one packet)."""

    http_status = 413

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(ER_NET_PACKET_TOO_LARGE, f"a message of {size} bytes is larger than a statement to its shard"
                         f" carries ({limit} bytes at most)", "08S01")


def naming_the_topic(e: ProxyError, name: str) -> ProxyError:
    """``e``, an error of a statement written into topic ``name``'s log table (a publish routed
    past its view: ``routing.route_publish``), naming the topic where the shard named the log
    table: a publish racing DROP TOPIC gets MariaDB's ``Table 'ks.topic' doesn't exist``, never
    the hidden ``_tms_`` table's name."""
    log = log_table(name)
    if log not in e.message:
        return e
    if isinstance(e, ShardError):
        return ShardError(e.keyspace, e.shard, e.code, e.shard_message.replace(log, name))
    return ProxyError(e.code, e.message.replace(log, name), e.sqlstate)
