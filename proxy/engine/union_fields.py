"""The columns of a UNION whose arms run apart (Concatenate): MySQL types each column
from all arms together (``SELECT int_col ... UNION SELECT bigint_col`` is a BIGINT,
INT with DECIMAL a DECIMAL, a number with a string a VARCHAR), and names it after the
first arm. Sending the first arm's type instead makes a client convert the other arms'
values with the wrong converter (``int('1.50')``).

The other arms' columns come from their routes' field queries (``WHERE 1 != 1``: no rows
read), asked only when the statement has more than one arm.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from mysql_mimic.types import ColumnType

from proxy.engine.result import BINARY_CHARSET, NOT_NULL_FLAG, UTF8MB4_GENERAL_CI, Field
from proxy.engine.route import field_result
from proxy.engine.vcursor import VCursor
from rewriter.nodes import Distinct, Filter, Limit, MemorySort, Plan, Route, VindexLookup

_INTEGERS = [ColumnType.TINY, ColumnType.SHORT, ColumnType.INT24, ColumnType.LONG, ColumnType.LONGLONG]
_DECIMALS = (ColumnType.DECIMAL, ColumnType.NEWDECIMAL)
_FLOATS = (ColumnType.FLOAT, ColumnType.DOUBLE)
_TEMPORALS = (ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP, ColumnType.TIME, ColumnType.YEAR)
_BLOBS = (ColumnType.BLOB, ColumnType.TINY_BLOB, ColumnType.MEDIUM_BLOB, ColumnType.LONG_BLOB)


def _merged_type(a: Field, b: Field) -> tuple[int, int]:
    """(type, charset) of a column holding ``a``'s and ``b``'s values, as MySQL joins them."""
    ta, tb = a.type, b.type
    if tb == ColumnType.NULL:
        return ta, a.charset
    if ta == ColumnType.NULL or ta == tb:
        return tb, b.charset if ta == ColumnType.NULL else a.charset
    if ta in _INTEGERS and tb in _INTEGERS:
        return max(ta, tb, key=_INTEGERS.index), BINARY_CHARSET
    numeric = (*_INTEGERS, *_DECIMALS, *_FLOATS)
    if ta in numeric and tb in numeric:
        if ta in _FLOATS or tb in _FLOATS:
            return ColumnType.DOUBLE, BINARY_CHARSET
        return ColumnType.NEWDECIMAL, BINARY_CHARSET
    if {ta, tb} <= {ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP}:
        return ColumnType.DATETIME, BINARY_CHARSET
    charset = next((f.charset for f in (a, b) if f.charset != BINARY_CHARSET
                    and f.type not in (*numeric, *_TEMPORALS)), UTF8MB4_GENERAL_CI)
    if ta in _BLOBS or tb in _BLOBS:
        return ColumnType.BLOB, charset
    return ColumnType.VAR_STRING, charset


def merge_union_fields(arms: Sequence[Sequence[Field]]) -> list[Field]:
    """The first arm's columns, retyped for the values of every arm."""
    first = list(arms[0])
    out = []
    for i, f in enumerate(first):
        merged = f
        for arm in arms[1:]:
            g = arm[i]
            t, charset = _merged_type(merged, g)
            nullable = not (merged.flags & NOT_NULL_FLAG and g.flags & NOT_NULL_FLAG)
            if (t, charset) == (merged.type, merged.charset) and g.length <= merged.length \
                    and g.decimals <= merged.decimals and not (nullable and merged.flags & NOT_NULL_FLAG):
                continue
            merged = dataclasses.replace(
                merged, type=t, charset=charset, length=max(merged.length, g.length),
                decimals=max(merged.decimals, g.decimals),
                flags=merged.flags & ~NOT_NULL_FLAG if nullable else merged.flags)
        out.append(merged)
    return out


async def arm_fields(plan: Plan, vcursor: VCursor, bindvars: Mapping[str, Any]) -> list[Field] | None:
    """The columns ``plan`` answers with, from its route's field query; None when other
    operators than row filters and sorts stand above the route (their columns are known
    only from their rows)."""
    dropped = 0
    while True:
        if isinstance(plan, Route):
            res = await field_result(plan, vcursor, bindvars)
            return res.fields[:len(res.fields) - dropped] if dropped else res.fields
        if isinstance(plan, VindexLookup):
            plan = plan.route
        elif isinstance(plan, MemorySort | Distinct):
            dropped += plan.truncate
            plan = plan.input
        elif isinstance(plan, Limit | Filter):
            plan = plan.input
        else:
            return None
