"""``null``: every value, NULL included, maps to keyspace id ``0x00`` (the first shard).

Useful while a keyspace moves from unsharded to sharded: all rows stay on one shard.
"""

from __future__ import annotations

from vschema.vindexes.base import FunctionalVindex

NULL_KEYSPACE_ID = b"\x00"


class NullVindex(FunctionalVindex):
    type_name = "null"
    cost = 0
    unique = True

    def keyspace_id(self, value: object) -> bytes:
        return NULL_KEYSPACE_ID
