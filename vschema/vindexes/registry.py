"""Vindex types by their vschema ``type`` name, and construction of vindexes."""

from __future__ import annotations

from collections.abc import Mapping

from vschema.errors import UnknownVindexType
from vschema.vindexes.base import Vindex
from vschema.vindexes.binary import BinaryVindex
from vschema.vindexes.binary_md5 import BinaryMD5Vindex
from vschema.vindexes.consistent_lookup import (
    ConsistentLookupUniqueVindex,
    ConsistentLookupVindex,
)
from vschema.vindexes.hash import HashVindex
from vschema.vindexes.lookup import (
    LookupHashUniqueVindex,
    LookupHashVindex,
    LookupNonUniqueVindex,
    LookupUniqueVindex,
)
from vschema.vindexes.null import NullVindex
from vschema.vindexes.numeric import NumericVindex
from vschema.vindexes.reverse_bits import ReverseBitsVindex
from vschema.vindexes.unicode_loose_md5 import UnicodeLooseMD5Vindex
from vschema.vindexes.unicode_loose_xxhash import UnicodeLooseXXHashVindex
from vschema.vindexes.xxhash import XXHashVindex

VINDEX_TYPES: dict[str, type[Vindex]] = {
    cls.type_name: cls
    for cls in (
        HashVindex,
        XXHashVindex,
        NumericVindex,
        BinaryVindex,
        BinaryMD5Vindex,
        UnicodeLooseMD5Vindex,
        UnicodeLooseXXHashVindex,
        ReverseBitsVindex,
        NullVindex,
        LookupNonUniqueVindex,
        LookupUniqueVindex,
        LookupHashVindex,
        LookupHashUniqueVindex,
        ConsistentLookupVindex,
        ConsistentLookupUniqueVindex,
    )
}


def create_vindex(
    name: str, type_name: str, params: Mapping[str, str] | None = None, owner: str | None = None
) -> Vindex:
    """Build the vindex ``name`` of type ``type_name``; unknown types are an error."""
    cls = VINDEX_TYPES.get(type_name)
    if cls is None:
        known = ", ".join(sorted(VINDEX_TYPES))
        raise UnknownVindexType(
            f"vindexType {type_name!r} not found (vindex {name}); known types: {known}"
        )
    return cls(name, params, owner)
