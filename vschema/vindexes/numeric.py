"""``numeric``: the keyspace id is the value's 8 big-endian uint64 bytes (cost 0)."""

from __future__ import annotations

from vschema.vindexes.base import IntegerVindex


class NumericVindex(IntegerVindex):
    type_name = "numeric"
    cost = 0
    unique = True

    def keyspace_id_of_uint64(self, number: int) -> bytes:
        return number.to_bytes(8, "big")

    def reverse_map(self, ksids: list[bytes]) -> list[int]:
        out = []
        for ksid in ksids:
            if len(ksid) != 8:
                raise self.error(f"length of keyspace id is not 8: {len(ksid)}")
            out.append(int.from_bytes(ksid, "big"))
        return out
