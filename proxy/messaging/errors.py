"""Errors of the messaging subsystem, with the texts a Vitess user recognises."""

from __future__ import annotations

from proxy.errors import ER_NO_SUCH_TABLE, ER_UNKNOWN_ERROR, ProxyError


class MessageTableError(ProxyError):
    """A message table whose declaration is invalid (missing vt_ key or column, bad value).

    The table is unusable until its comment/columns are fixed; every operation on it
    returns this error while other tables keep working (Vitess skips such a table).
    """

    def __init__(self, message: str) -> None:
        super().__init__(ER_UNKNOWN_ERROR, message)


class MessageTableNotFound(ProxyError):
    def __init__(self, table: str) -> None:
        super().__init__(ER_NO_SUCH_TABLE, f"table {table} not found in schema")
        self.table = table


class NotAMessageTable(ProxyError):
    def __init__(self, table: str) -> None:
        super().__init__(ER_UNKNOWN_ERROR, f"'{table}' is not a message table")
        self.table = table


class MessagingClosed(ProxyError):
    def __init__(self) -> None:
        super().__init__(
            ER_UNKNOWN_ERROR, "messager engine is closed, probably because this is not a primary any more"
        )


class SubscriptionEnded(ProxyError):
    """A stream ended by the proxy (table dropped, its streamed columns changed, shutdown)."""

    def __init__(self, reason: str) -> None:
        super().__init__(ER_UNKNOWN_ERROR, reason)
