"""LRU plan cache keyed by (normalised shape, session keyspace, vschema version).

A hit returns the stored plan without parsing or planning. The vschema "version"
is the identity of the ``VSchema`` object (it is immutable; a reload builds a new
one, so old entries simply stop matching and age out of the LRU), or its
``version`` attribute when it has one.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from rewriter.nodes import Plan

CacheKey = tuple[str, str | None, Any, int]


def vschema_version(vschema: Any) -> Any:
    v = getattr(vschema, "version", None)
    return v if v is not None else vschema  # identity-hashed, kept alive by the key


class PlanCache:
    def __init__(self, capacity: int = 5000) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[CacheKey, Plan] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> Plan | None:
        plan = self._entries.get(key)
        if plan is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return plan

    def peek(self, key: CacheKey) -> Plan | None:
        """``get`` that does not count a miss: for a caller that plans nothing itself and
        lets the statement go on to ``plan_query`` (which counts it) when it finds none."""
        plan = self._entries.get(key)
        if plan is not None:
            self._entries.move_to_end(key)
            self.hits += 1
        return plan

    def put(self, key: CacheKey, plan: Plan) -> None:
        self._entries[key] = plan
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def entries(self) -> list[tuple[CacheKey, Plan]]:
        """The cached plans with their keys, the most recently used first."""
        return list(reversed(self._entries.items()))

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
