"""``unicode_loose_xxhash``: XXH64 of the value's loose (UCA level 1) collation key."""

from __future__ import annotations

from vschema.vindexes.base import FunctionalVindex
from vschema.vindexes.unicode_collation import CollationKeyError, loose_collation_key
from vschema.vindexes.values import ValueConversionError, to_bytes
from vschema.vindexes.xxhash import xxhash64_keyspace_id


class UnicodeLooseXXHashVindex(FunctionalVindex):
    type_name = "unicode_loose_xxhash"
    cost = 1
    unique = True

    def keyspace_id(self, value: object) -> bytes:
        try:
            return xxhash64_keyspace_id(loose_collation_key(to_bytes(value)))
        except (CollationKeyError, ValueConversionError) as exc:
            raise self.error(f"cannot map value {value!r}: {exc}") from exc
