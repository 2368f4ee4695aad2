"""The vindex interfaces the planner and the engine are written against.

A vindex maps a column value to a keyspace id (the bytes that pick a shard). Functional
vindexes compute it (``map``); lookup vindexes read it from a lookup table, so they only
build the SQL the engine runs and interpret its rows.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar

from vschema.errors import VindexError
from vschema.vindexes.values import ValueConversionError, to_uint64


class Vindex(ABC):
    """A named vindex of one type with its string parameters."""

    type_name: ClassVar[str]
    cost: ClassVar[int]  # Vitess's Cost(): the planner prefers the cheapest vindex
    unique: ClassVar[bool]  # maps a value to at most one keyspace id
    needs_lookup: ClassVar[bool] = False  # mapping needs a query against a lookup table
    # Parameters this type understands; others are kept in ``unknown_params``.
    known_params: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self, name: str, params: Mapping[str, str] | None = None, owner: str | None = None
    ):
        self.name = name
        self.params: dict[str, str] = dict(params or {})
        self.owner = owner or None
        self.unknown_params = sorted(set(self.params) - self.known_params)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, type={self.type_name!r})"

    def error(self, message: str) -> VindexError:
        """A VindexError whose text names this vindex and its type."""
        return VindexError(f"vindex {self.name} ({self.type_name}): {message}")


class FunctionalVindex(Vindex):
    """A vindex whose keyspace id is a pure function of the value."""

    def map(self, values: Sequence[object]) -> list[bytes | None]:
        """Keyspace id per value; None means the value maps to no shard."""
        return [self.keyspace_id(v) for v in values]

    def verify(self, values: Sequence[object], ksids: Sequence[bytes]) -> list[bool]:
        """Whether each value maps to the keyspace id given for it."""
        if len(values) != len(ksids):
            raise self.error(f"verify got {len(values)} values but {len(ksids)} keyspace ids")
        return [self.keyspace_id(v) == k for v, k in zip(values, ksids, strict=True)]

    @abstractmethod
    def keyspace_id(self, value: object) -> bytes | None:
        """Keyspace id of one value (None: no shard); raises VindexError if unmappable."""


class IntegerVindex(FunctionalVindex):
    """A functional vindex over uint64 values (hash, numeric, reverse_bits)."""

    # Vitess's hash takes a negative signed value as its two's complement.
    wrap_negative: ClassVar[bool] = False
    # Whether a value with no uint64 form maps to no shard (True) or is an error (False).
    unconvertible_maps_to_none: ClassVar[bool] = True

    def keyspace_id(self, value: object) -> bytes | None:
        number = self.uint64_of(value)
        return None if number is None else self.keyspace_id_of_uint64(number)

    def uint64_of(self, value: object) -> int | None:
        """The uint64 the vindex maps ``value`` by (None: no shard); raises VindexError if unmappable."""
        if value is None:
            return None
        try:
            return to_uint64(value, wrap_negative=self.wrap_negative)
        except ValueConversionError as exc:
            if self.unconvertible_maps_to_none:
                return None
            raise self.error(f"cannot map value {value!r}: {exc}") from exc

    @abstractmethod
    def keyspace_id_of_uint64(self, number: int) -> bytes:
        """Keyspace id of an unsigned 64-bit integer."""
