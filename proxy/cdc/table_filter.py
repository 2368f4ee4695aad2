"""Which tables a change stream carries.

Entries are ``keyspace.table``, ``keyspace.*`` (every table of a keyspace), a bare
``table`` (that table in every keyspace) or ``*`` (everything). Matching is
case-insensitive, as MariaDB table names are on the default configuration.
"""

from __future__ import annotations

from collections.abc import Iterable

from proxy.cdc.errors import CdcError

WILDCARD = "*"


class TableFilter:
    __slots__ = ("_all", "_any_keyspace", "_by_keyspace", "_whole_keyspaces")

    def __init__(self, entries: Iterable[str] | None = None) -> None:
        self._all = False
        self._whole_keyspaces: set[str] = set()
        self._by_keyspace: dict[str, set[str]] = {}
        self._any_keyspace: set[str] = set()
        for raw in entries if entries is not None else [WILDCARD]:
            entry = raw.strip().lower()
            if not entry:
                raise CdcError("empty table name in the table filter")
            if entry == WILDCARD:
                self._all = True
                continue
            keyspace, dot, table = entry.partition(".")
            if not dot:
                self._any_keyspace.add(keyspace)
            elif table == WILDCARD:
                self._whole_keyspaces.add(keyspace)
            else:
                self._by_keyspace.setdefault(keyspace, set()).add(table)

    def includes_keyspace(self, keyspace: str) -> bool:
        """Whether any table of ``keyspace`` may pass (decides which shards to stream)."""
        keyspace = keyspace.lower()
        return (
            self._all
            or bool(self._any_keyspace)
            or keyspace in self._whole_keyspaces
            or keyspace in self._by_keyspace
        )

    def matches(self, keyspace: str, table: str) -> bool:
        keyspace = keyspace.lower()
        table = table.lower()
        if self._all or keyspace in self._whole_keyspaces or table in self._any_keyspace:
            return True
        tables = self._by_keyspace.get(keyspace)
        return tables is not None and table in tables

    def explicit_tables(self, keyspace: str) -> list[str] | None:
        """The exact table names for ``keyspace``, or None if wildcards make it open-ended
        (lets the binlog library skip decoding rows of other tables)."""
        keyspace = keyspace.lower()
        if self._all or keyspace in self._whole_keyspaces:
            return None
        return sorted(self._by_keyspace.get(keyspace, set()) | self._any_keyspace)
