"""SemiJoin / AntiJoin: ``EXISTS``, ``IN`` (semi) and ``NOT EXISTS``, ``NOT IN``
(anti) between an outer input and a subquery input, keeping each outer row once.
``null_aware`` marks ``NOT IN``: a NULL on either side makes the row's test unknown
(SQL's rule), so it is dropped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class SemiJoin(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("outer", "inner")

    outer: Operator
    inner: Operator
    predicates: tuple[exp.Expression, ...]
    anti: bool = False
    null_aware: bool = False
