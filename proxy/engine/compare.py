"""Sort and equality keys over text-protocol rows, matching the shards' collation.

Merging ordered shard streams, grouping and DISTINCT must compare values exactly as
MySQL ordered them: NULL first ascending (last descending), numbers as numbers,
strings under ``utf8mb4_general_ci`` (``rewriter.collation``), binary strings as bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from proxy.engine.result import DECIMAL_TYPES, INT_TYPES, Field, Row, decode_value, is_numeric
from proxy.errors import ER_NOT_SUPPORTED_YET, ProxyError
from rewriter.collation import BINARY_COLLATIONS, general_ci_key
from rewriter.nodes import OrderKey


class Desc:
    """Inverts the order of the wrapped key (for DESC columns)."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: Desc) -> bool:
        return other.v < self.v

    def __gt__(self, other: Desc) -> bool:
        return other.v > self.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Desc) and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)


ENUM_FLAG = 256
SET_FLAG = 2048


def value_key_fn(f: Field, ordering: bool = True) -> Callable[[bytes | None], Any]:
    """raw value -> comparable key (NULL sorts first). ENUM and SET columns sort by
    their definition order, which the result does not carry: ordering them across
    shards is refused rather than answered in the wrong order."""
    if ordering and f.flags & (ENUM_FLAG | SET_FLAG):
        raise ProxyError(ER_NOT_SUPPORTED_YET, f"VT12001: unsupported: ordering by ENUM/SET column {f.name} across shards")
    if is_numeric(f):
        def numeric(raw: bytes | None) -> Any:
            return (0,) if raw is None else (1, decode_value(f, raw))
        return numeric
    if f.charset in BINARY_COLLATIONS:
        return lambda raw: (0,) if raw is None else (1, raw)

    def text(raw: bytes | None) -> Any:
        return (0,) if raw is None else (1, general_ci_key(raw.decode("utf-8", "surrogateescape")))

    return text


def resolve_index(i: int, width: int) -> int:
    return i if i >= 0 else width + i


_BELOW = float("-inf")  # a NULL number's key: before every number (MySQL has no infinities)
_ABOVE = float("inf")


def _decimal(raw: bytes) -> Decimal:
    return Decimal(raw.decode())


def sort_part_fn(f: Field, desc: bool) -> Callable[[bytes | None], Any]:
    """raw value -> a scalar key in ``ORDER BY col [DESC]`` order (NULL first ascending, last
    descending). Scalars rather than ``value_key_fn``'s ``(flag, value)`` pairs and ``Desc``
    wrappers where the type allows: numbers negated for DESC, NULL an infinity; strings
    prefixed so that NULL's empty key sorts first. 20,000 rows keyed on (INT, INT): 8.5 ms
    instead of 21 ms, and sorting the two shards' runs by those keys 3 ms instead of 35 ms."""
    value_key_fn(f)  # refuses ENUM / SET
    if is_numeric(f):
        conv: Callable[[bytes], Any] = (int if f.type in INT_TYPES else
                                        _decimal if f.type in DECIMAL_TYPES else float)
        if desc:
            return lambda raw: _ABOVE if raw is None else -conv(raw)
        return lambda raw: _BELOW if raw is None else conv(raw)
    if f.charset in BINARY_COLLATIONS:
        def binary(raw: bytes | None) -> Any:
            return b"" if raw is None else b"\0" + raw
        return (lambda raw: Desc(binary(raw))) if desc else binary

    def text(raw: bytes | None) -> Any:
        return "" if raw is None else " " + general_ci_key(raw.decode("utf-8", "surrogateescape"))

    return (lambda raw: Desc(text(raw))) if desc else text


def row_key_fn(fields: Sequence[Field], keys: Sequence[OrderKey]) -> Callable[[Row], tuple[Any, ...]]:
    """Row -> its ORDER BY key (a tuple of ``sort_part_fn`` scalars); keys of one function
    compare only with each other, equal exactly when MySQL's order ties."""
    width = len(fields)
    parts = []
    for k in keys:
        idx = resolve_index(k.column, width)
        parts.append((idx, sort_part_fn(fields[idx], k.desc)))
    if len(parts) == 1:
        ((i0, f0),) = parts
        return lambda row: (f0(row[i0]),)
    if len(parts) == 2:
        (i0, f0), (i1, f1) = parts
        return lambda row: (f0(row[i0]), f1(row[i1]))
    return lambda row: tuple([fn(row[idx]) for idx, fn in parts])


def columns_key_fn(fields: Sequence[Field], columns: Sequence[int]) -> Callable[[Row], tuple[Any, ...]]:
    """Equality key over some columns (grouping, DISTINCT)."""
    fns = [(c, value_key_fn(fields[c], ordering=False)) for c in columns]
    return lambda row: tuple(fn(row[c]) for c, fn in fns)
