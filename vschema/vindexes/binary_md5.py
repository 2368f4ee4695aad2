"""``binary_md5``: MD5 of the value's raw bytes (NULL hashes as the empty string)."""

from __future__ import annotations

import hashlib

from vschema.vindexes.base import FunctionalVindex
from vschema.vindexes.values import ValueConversionError, to_bytes


def md5_keyspace_id(data: bytes) -> bytes:
    return hashlib.md5(data, usedforsecurity=False).digest()


class BinaryMD5Vindex(FunctionalVindex):
    type_name = "binary_md5"
    cost = 1
    unique = True

    def keyspace_id(self, value: object) -> bytes:
        try:
            return md5_keyspace_id(to_bytes(value))
        except ValueConversionError as exc:
            raise self.error(f"cannot map value {value!r}: {exc}") from exc
