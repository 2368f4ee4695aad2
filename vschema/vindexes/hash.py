"""``hash``: DES (all-zero key, one ECB block) of the value's 8 big-endian uint64 bytes.

Vitess once used 3DES with a zero key, which degenerates to single DES, so the keyspace
ids are the same. The mapping is reversible: decrypting a keyspace id gives the value.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache

from Crypto.Cipher import DES

from vschema.vindexes.base import IntegerVindex
from vschema.vindexes.values import UINT64_MAX

_CIPHER = DES.new(bytes(8), DES.MODE_ECB)
# From this many values on, ``map`` enciphers them in one ECB call (each 8-byte block is
# enciphered on its own, so the blocks are the values' keyspace ids): 100 ids took 200 µs one
# call each, 32 µs in one call (a 100-row INSERT, an ack of 50 ids, a reshard copy chunk).
# Fewer values go through the cache of hot values (a routed statement's).
_BATCH_FROM = 16


# Hot values (the ids of point selects) are hashed again and again: a cache hit costs
# ~0.2 µs, pycryptodome's DES call ~2-5 µs (its per-call cffi overhead, not DES itself).
@lru_cache(maxsize=65_536)
def hash_uint64(number: int) -> bytes:
    """The ``hash`` keyspace id of an unsigned 64-bit integer."""
    return _CIPHER.encrypt(number.to_bytes(8, "big"))


# The keyspace ids of the values mapped in batches lately: a message's id is mapped when its
# 100-row INSERT is tried on the fast path, again when the normal path runs it, and when its
# ack's 50 ids are routed: a batch of 100 known ids 65 -> 10 us (new ones 65 -> 57). Cleared
# whole when full.
_BATCHED: dict[int, bytes] = {}
_BATCHED_MAX = 65_536


def _keyspace_ids(numbers: list[int]) -> list[bytes | None]:
    found = list(map(_BATCHED.get, numbers))
    if None not in found:
        return found
    missing = [n for n, k in zip(numbers, found, strict=True) if k is None]
    data = _CIPHER.encrypt(struct.pack(f">{len(missing)}Q", *missing))
    new: list[bytes | None] = [data[i : i + 8] for i in range(0, len(data), 8)]
    if len(_BATCHED) + len(new) > _BATCHED_MAX:
        _BATCHED.clear()
    _BATCHED.update(zip(missing, new, strict=True))  # type: ignore[arg-type]  # new holds no None
    if len(new) == len(found):
        return new
    fresh = iter(new)
    return [k if k is not None else next(fresh) for k in found]


def unhash_keyspace_id(ksid: bytes) -> int:
    """The uint64 whose ``hash`` keyspace id is ``ksid`` (it must be 8 bytes)."""
    if len(ksid) != 8:
        raise ValueError(f"invalid keyspace id: {ksid.hex()}")
    return int.from_bytes(_CIPHER.decrypt(ksid), "big")


class HashVindex(IntegerVindex):
    type_name = "hash"
    cost = 1
    unique = True
    wrap_negative = True
    unconvertible_maps_to_none = False

    def keyspace_id_of_uint64(self, number: int) -> bytes:
        return hash_uint64(number)

    def map(self, values: Sequence[object]) -> list[bytes | None]:
        """Keyspace ids of many values in one DES call (ECB: block by block): the Reshard copy
        places thousands of rows a chunk, where a call per value costs ~2-5 us of cffi overhead.
        A few values (a routed statement's) go through the cache of hot values instead."""
        if len(values) < _BATCH_FROM:
            return [self.keyspace_id(v) for v in values]
        # A plain non-negative int is its own uint64 (what uint64_of answers for it, without its
        # three calls), and the blocks are packed and cut in one call each: 100 ids 66 -> 43 us
        # (DES itself is 26 of them).
        numbers = [v if type(v) is int and 0 <= v <= UINT64_MAX else self.uint64_of(v) for v in values]
        if None not in numbers:
            return _keyspace_ids(numbers)  # type: ignore[arg-type]  # no None among them
        data = _CIPHER.encrypt(b"".join(n.to_bytes(8, "big") for n in numbers if n is not None))
        blocks = iter(range(0, len(data), 8))
        return [None if n is None else data[(i := next(blocks)) : i + 8] for n in numbers]

    def reverse_map(self, ksids: list[bytes]) -> list[int]:
        """The values that produced these keyspace ids."""
        return [unhash_keyspace_id(k) for k in ksids]
