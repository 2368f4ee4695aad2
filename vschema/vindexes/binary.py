"""``binary``: the keyspace id is the value's bytes themselves (cost 0 in current Vitess).

As in Vitess, NULL has the empty byte string as keyspace id, which the first shard holds.
"""

from __future__ import annotations

from vschema.vindexes.base import FunctionalVindex
from vschema.vindexes.values import ValueConversionError, to_bytes


class BinaryVindex(FunctionalVindex):
    type_name = "binary"
    cost = 0
    unique = True

    def keyspace_id(self, value: object) -> bytes:
        try:
            return to_bytes(value)
        except ValueConversionError as exc:
            raise self.error(f"cannot map value {value!r}: {exc}") from exc

    def reverse_map(self, ksids: list[bytes]) -> list[bytes]:
        return list(ksids)
