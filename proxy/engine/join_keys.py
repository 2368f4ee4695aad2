"""Equality keys for joins the proxy matches itself (HashJoin, BatchedJoin).

A key must be equal at the proxy exactly when ``l = r`` holds at a shard. The planner
only chooses these joins when the tracked schema shows both columns of a key pair of
one type family (rewriter.join_planner), and each pair is checked again here against
the columns the shards sent: numbers compare by value (``5 = 5.00``), ``*_general_ci``
text by its weights (case, accents and trailing spaces ignored, rewriter.collation),
binary strings and temporal values byte-wise. Any other pairing (a schema change since
planning) is refused rather than matched differently from MySQL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from proxy.engine.result import BINARY_CHARSET, Field, Row, decode_value, is_numeric
from proxy.errors import ER_NOT_SUPPORTED_YET, ProxyError
from rewriter.collation import general_ci_key

# utf8mb3_general_ci and utf8mb4_general_ci: the collations general_ci_key reproduces
GENERAL_CI_COLLATIONS = frozenset({33, 45})

RowKey = Callable[[Row], tuple[Any, ...] | None]


def _value_key(f: Field, other: Field) -> Callable[[bytes], Any]:
    numeric = is_numeric(f), is_numeric(other)
    if all(numeric):
        return lambda raw: decode_value(f, raw)
    if not any(numeric):
        if f.charset == BINARY_CHARSET and other.charset == BINARY_CHARSET:
            return lambda raw: raw
        if f.charset in GENERAL_CI_COLLATIONS and other.charset in GENERAL_CI_COLLATIONS:
            return lambda raw: general_ci_key(raw.decode("utf-8", "surrogateescape"))
    raise ProxyError(
        ER_NOT_SUPPORTED_YET,
        f"VT12001: unsupported: join keys {f.name} and {other.name} of different types matched at the proxy",
    )


def _row_key(fields: Sequence[Field], other: Sequence[Field], cols: Sequence[int],
             other_cols: Sequence[int]) -> RowKey:
    parts = [(c, _value_key(fields[c], other[o])) for c, o in zip(cols, other_cols, strict=True)]

    def key(row: Row) -> tuple[Any, ...] | None:
        out = []
        for c, fn in parts:
            raw = row[c]
            if raw is None:
                return None  # NULL = anything is never true
            out.append(fn(raw))
        return tuple(out)

    return key


def key_functions(left: Sequence[Field], right: Sequence[Field], left_keys: Sequence[int],
                  right_keys: Sequence[int]) -> tuple[RowKey, RowKey]:
    """(key of a left row, key of a right row); None for a row whose key has a NULL."""
    return (_row_key(left, right, left_keys, right_keys), _row_key(right, left, right_keys, left_keys))


def combine(cols: Sequence[int], left: Row, right: Row) -> Row:
    """The joined row: ``-(i+1)`` is left column i, ``i+1`` right column i (Join's cols)."""
    return tuple(left[-c - 1] if c < 0 else right[c - 1] for c in cols)


def combine_fields(cols: Sequence[int], left: Sequence[Field], right: Sequence[Field]) -> list[Field]:
    return [left[-c - 1] if c < 0 else right[c - 1] for c in cols]


def build_table(rows: Sequence[Row], key: RowKey) -> dict[tuple[Any, ...], list[Row]]:
    table: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        k = key(r)
        if k is not None:
            table.setdefault(k, []).append(r)
    return table


def probe(cols: Sequence[int], rows: Sequence[Row], key: RowKey, table: dict[tuple[Any, ...], list[Row]],
          left_join: bool, right_width: int) -> list[Row]:
    """Joined rows for ``rows`` (left rows, in order), each followed by its matches in
    the right input's order; unmatched left rows padded with NULLs for a LEFT JOIN."""
    out: list[Row] = []
    nulls = (None,) * right_width
    for lrow in rows:
        k = key(lrow)
        matches = table.get(k) if k is not None else None
        if matches:
            out.extend(combine(cols, lrow, r) for r in matches)
        elif left_join:
            out.append(combine(cols, lrow, nulls))
    return out
