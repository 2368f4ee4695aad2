"""``unicode_loose_md5``: MD5 of the value's loose (UCA level 1) collation key."""

from __future__ import annotations

from vschema.vindexes.binary_md5 import md5_keyspace_id
from vschema.vindexes.unicode_loose import UnicodeLooseVindex


class UnicodeLooseMD5Vindex(UnicodeLooseVindex):
    type_name = "unicode_loose_md5"

    def hash_key(self, key: bytes) -> bytes:
        return md5_keyspace_id(key)
