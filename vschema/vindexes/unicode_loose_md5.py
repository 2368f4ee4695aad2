"""``unicode_loose_md5``: MD5 of the value's loose (UCA level 1) collation key.

Case, accents and trailing spaces do not change the keyspace id, matching a column with
a ``*_unicode_ci`` collation. See ``unicode_collation`` for how the key is built.
"""

from __future__ import annotations

from vschema.vindexes.base import FunctionalVindex
from vschema.vindexes.binary_md5 import md5_keyspace_id
from vschema.vindexes.unicode_collation import CollationKeyError, loose_collation_key
from vschema.vindexes.values import ValueConversionError, to_bytes


class UnicodeLooseMD5Vindex(FunctionalVindex):
    type_name = "unicode_loose_md5"
    cost = 1
    unique = True

    def keyspace_id(self, value: object) -> bytes:
        try:
            return md5_keyspace_id(loose_collation_key(to_bytes(value)))
        except (CollationKeyError, ValueConversionError) as exc:
            raise self.error(f"cannot map value {value!r}: {exc}") from exc
