"""Vindexes: functions (or lookup tables) from column values to keyspace ids."""

from vschema.vindexes.base import FunctionalVindex, Vindex
from vschema.vindexes.lookup import LookupVindex
from vschema.vindexes.registry import VINDEX_TYPES, create_vindex

__all__ = ["VINDEX_TYPES", "FunctionalVindex", "LookupVindex", "Vindex", "create_vindex"]
