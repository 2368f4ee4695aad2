"""Sort and equality keys over text-protocol rows, matching the shards' collation.

Merging ordered shard streams, grouping and DISTINCT must compare values exactly as
MySQL ordered them: NULL first ascending (last descending), numbers as numbers,
strings under ``utf8mb4_general_ci`` (``rewriter.collation``), binary strings as bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from proxy.engine.result import Field, Row, decode_value, is_numeric
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


def row_key_fn(fields: Sequence[Field], keys: Sequence[OrderKey]) -> Callable[[Row], tuple[Any, ...]]:
    width = len(fields)
    parts = []
    for k in keys:
        idx = resolve_index(k.column, width)
        parts.append((idx, value_key_fn(fields[idx]), k.desc))

    def key(row: Row) -> tuple[Any, ...]:
        out = []
        for idx, fn, desc in parts:
            v = fn(row[idx])
            out.append(Desc(v) if desc else v)
        return tuple(out)

    return key


def columns_key_fn(fields: Sequence[Field], columns: Sequence[int]) -> Callable[[Row], tuple[Any, ...]]:
    """Equality key over some columns (grouping, DISTINCT)."""
    fns = [(c, value_key_fn(fields[c], ordering=False)) for c in columns]
    return lambda row: tuple(fn(row[c]) for c, fn in fns)
