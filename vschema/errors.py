"""Errors raised while loading a vschema or resolving names against it.

Messages follow Vitess's wording where Vitess has one, so that clients and operators
who know Vitess recognise them.
"""

from __future__ import annotations


class VSchemaError(Exception):
    """Base class of every error raised by the vschema package."""


class InvalidVSchema(VSchemaError):
    """A vschema document (or the shard list that goes with it) is not acceptable."""


class InvalidShardName(InvalidVSchema):
    """A shard name that is not a Vitess key range (``-80``, ``80-``, ``40-80``, ``-``, ``0``)."""


class KeyspaceNotFound(VSchemaError):
    """A keyspace name that the vschema does not know (MySQL error 1049)."""

    def __init__(self, keyspace: str) -> None:
        super().__init__(f"VT05003: unknown database '{keyspace}' in vschema")
        self.keyspace = keyspace


class TableNotFound(VSchemaError):
    """A table that name resolution cannot find (Vitess: ``table t not found``)."""

    def __init__(self, table: str, keyspace: str | None = None) -> None:
        super().__init__(f"table {table} not found")
        self.table = table
        self.keyspace = keyspace


class AmbiguousTable(VSchemaError):
    """An unqualified table name that exists in more than one keyspace."""

    def __init__(self, table: str, keyspaces: list[str]) -> None:
        names = ", ".join(sorted(keyspaces))
        super().__init__(f"ambiguous table reference: {table} (found in keyspaces: {names})")
        self.table = table
        self.keyspaces = sorted(keyspaces)


class TableDisabled(VSchemaError):
    """A routing rule with no target tables: the table exists but is switched off."""

    def __init__(self, table: str) -> None:
        super().__init__(f"table {table} has been disabled")
        self.table = table


class VindexError(VSchemaError):
    """A vindex cannot be built from its parameters or cannot map a value."""


class UnknownVindexType(VindexError):
    """A vindex ``type`` that is not in the registry."""


class KeyRangeError(VSchemaError):
    """A keyspace id that no shard of the keyspace covers."""
