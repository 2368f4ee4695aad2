"""Tables the proxy keeps in a keyspace's own database that are not the keyspace's tables to
its users: those behind topics (``proxy.topics.names``: each topic's log ``_tms_<topic>`` and
the metadata table ``_tms_topics``; ``CREATE TOPIC`` refuses names with the prefix).

A keyspace-level session never sees them: ``SHOW TABLES`` (the topics service's listing),
``information_schema`` reads (the planner adds the condition, ``rewriter.internal_tables``) and
the wildcards of a change stream's table filter (``proxy.cdc.table_filter``) leave them out. A
session targeting one shard (``USE ks:-80``) sees the shard's database as it is.
"""

from __future__ import annotations

PREFIX = "_tms_"


def is_internal(table: str) -> bool:
    """Whether ``table`` (any case: MariaDB's names compare without case by default here) is
    one of the proxy's."""
    return table[: len(PREFIX)].lower() == PREFIX
