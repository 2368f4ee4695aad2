"""``reverse_bits``: the value's 64 bits in reverse order, as 8 big-endian bytes.

Sequential ids thereby spread over the key space from its most significant bit.
"""

from __future__ import annotations

from vschema.vindexes.base import IntegerVindex


def reverse_bits64(number: int) -> int:
    return int(f"{number:064b}"[::-1], 2)


class ReverseBitsVindex(IntegerVindex):
    type_name = "reverse_bits"
    cost = 1
    unique = True

    def keyspace_id_of_uint64(self, number: int) -> bytes:
        return reverse_bits64(number).to_bytes(8, "big")

    def reverse_map(self, ksids: list[bytes]) -> list[int]:
        out = []
        for ksid in ksids:
            if len(ksid) != 8:
                raise self.error(f"invalid keyspace id: {ksid.hex()}")
            out.append(reverse_bits64(int.from_bytes(ksid, "big")))
        return out
