"""``xxhash``: XXH64 (seed 0) of the value's raw bytes.

Vitess stores the 64-bit digest little-endian (``binary.LittleEndian.PutUint64``); the
shared vectors confirm it. NULL hashes as the empty string, as in Vitess.
"""

from __future__ import annotations

import xxhash as _xxhash

from vschema.vindexes.base import FunctionalVindex
from vschema.vindexes.values import ValueConversionError, to_bytes


def xxhash64_keyspace_id(data: bytes) -> bytes:
    """XXH64 (seed 0) of ``data`` as the 8 little-endian bytes Vitess uses."""
    return _xxhash.xxh64_intdigest(data, seed=0).to_bytes(8, "little")


class XXHashVindex(FunctionalVindex):
    type_name = "xxhash"
    cost = 1
    unique = True

    def keyspace_id(self, value: object) -> bytes:
        try:
            return xxhash64_keyspace_id(to_bytes(value))
        except ValueConversionError as exc:
            raise self.error(f"cannot map value {value!r}: {exc}") from exc
