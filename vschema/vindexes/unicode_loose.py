"""Shared base of ``unicode_loose_md5`` and ``unicode_loose_xxhash``: a hash of the
value's loose collation key (see ``unicode_collation``).

Case, accents, width and trailing spaces do not change the keyspace id, matching a
column with a case- and accent-insensitive collation; NULL hashes as the empty string.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping

from vschema.vindexes.base import FunctionalVindex
from vschema.vindexes.unicode_collation import (
    CollationKeyError,
    ensure_collation_table,
    loose_collation_key,
)
from vschema.vindexes.values import ValueConversionError, to_bytes
from vschema.vindexes.xtext_collation_table import CollationTableMissing


class UnicodeLooseVindex(FunctionalVindex):
    cost = 1
    unique = True

    def __init__(
        self, name: str, params: Mapping[str, str] | None = None, owner: str | None = None
    ) -> None:
        super().__init__(name, params, owner)
        try:
            ensure_collation_table()  # fail when the vschema loads, not on a query
        except CollationTableMissing as exc:
            raise self.error(str(exc)) from exc

    def keyspace_id(self, value: object) -> bytes:
        try:
            return self.hash_key(loose_collation_key(to_bytes(value)))
        except (CollationKeyError, ValueConversionError) as exc:
            raise self.error(f"cannot map value {value!r}: {exc}") from exc

    @abstractmethod
    def hash_key(self, key: bytes) -> bytes:
        """The keyspace id of a collation key."""
