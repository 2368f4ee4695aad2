"""``unicode_loose_xxhash``: XXH64 of the value's loose (UCA level 1) collation key."""

from __future__ import annotations

from vschema.vindexes.unicode_loose import UnicodeLooseVindex
from vschema.vindexes.xxhash import xxhash64_keyspace_id


class UnicodeLooseXXHashVindex(UnicodeLooseVindex):
    type_name = "unicode_loose_xxhash"

    def hash_key(self, key: bytes) -> bytes:
        return xxhash64_keyspace_id(key)
