"""Which tables a change stream carries.

Entries are ``keyspace.table``, ``keyspace.*`` (every table of a keyspace), a bare
``table`` (that table in every keyspace), ``*`` (everything), or, as Vitess's filter
rules, a regular expression between slashes: ``/regex/`` (tables of every keyspace whose
name it matches, searched as Go's ``regexp.MatchString`` does) or ``keyspace./regex/``.
Matching is case-insensitive, as MariaDB table names are on the default configuration.

The wildcards (``*``, ``keyspace.*``, regular expressions) never match the proxy's own
tables behind a topic (``_tms_<topic>`` and ``_tms_topics``, ``vschema.internal_tables``), as
Vitess's match-all rule ``/.*/`` never matches its internal tables: a stream of "every
table" carries what users wrote, not the topics' bookkeeping. An entry naming such a table
(``commerce._tms_orders``, ``_tms_orders``) still carries it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from proxy.cdc.errors import CdcError
from vschema.internal_tables import is_internal

WILDCARD = "*"


def _regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text[1:-1], re.I)
    except re.error as e:
        raise CdcError(f"invalid regular expression {text!r} in the table filter: {e}") from None


def _is_regex(text: str) -> bool:
    return len(text) >= 2 and text.startswith("/") and text.endswith("/")


class TableFilter:
    __slots__ = ("_all", "_any_keyspace", "_by_keyspace", "_patterns", "_whole_keyspaces")

    def __init__(self, entries: Iterable[str] | None = None) -> None:
        self._all = False
        self._whole_keyspaces: set[str] = set()
        self._by_keyspace: dict[str, set[str]] = {}
        self._any_keyspace: set[str] = set()
        # (keyspace or None for every keyspace, pattern)
        self._patterns: list[tuple[str | None, re.Pattern[str]]] = []
        for raw in entries if entries is not None else [WILDCARD]:
            stripped = raw.strip()
            entry = stripped.lower()
            if not entry:
                raise CdcError("empty table name in the table filter")
            if entry == WILDCARD:
                self._all = True
                continue
            if _is_regex(stripped):  # before the split: a pattern may hold dots
                self._patterns.append((None, _regex(stripped)))
                continue
            keyspace, dot, table = entry.partition(".")
            if not dot:
                self._any_keyspace.add(keyspace)
            elif table == WILDCARD:
                self._whole_keyspaces.add(keyspace)
            elif _is_regex(table):
                self._patterns.append((keyspace, _regex(stripped.partition(".")[2])))
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
            or any(ks is None or ks == keyspace for ks, _ in self._patterns)
        )

    def matches(self, keyspace: str, table: str) -> bool:
        keyspace = keyspace.lower()
        table = table.lower()
        if table in self._any_keyspace:
            return True
        tables = self._by_keyspace.get(keyspace)
        if tables is not None and table in tables:
            return True
        if is_internal(table):
            return False  # only named entries carry the topics' tables
        if self._all or keyspace in self._whole_keyspaces:
            return True
        return any((ks is None or ks == keyspace) and p.search(table) for ks, p in self._patterns)

    def explicit_tables(self, keyspace: str) -> list[str] | None:
        """The exact table names for ``keyspace``, or None if wildcards make it open-ended
        (lets the binlog library skip decoding rows of other tables)."""
        keyspace = keyspace.lower()
        if self._all or keyspace in self._whole_keyspaces:
            return None
        if any(ks is None or ks == keyspace for ks, _ in self._patterns):
            return None
        return sorted(self._by_keyspace.get(keyspace, set()) | self._any_keyspace)
